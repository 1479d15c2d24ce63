"""Reading one capture: its recorded steps and its operators' self time.

torch.profiler traces (Chrome trace JSON): the steps are the
``ProfilerStep#N`` spans the profiler's ``step()`` opens; an operator's
self time is its duration minus the time of the events nested directly in
it on the same thread (what torch's ``key_averages()`` calls self time).

torch_npu captures, parsed (``ASCEND_PROFILER_OUTPUT``, text export):
steps from ``step_trace_time.csv`` (a step's time is Computing +
Communication(Not Overlapped) + Free, torch_npu's own breakdown of it),
operators from ``op_statistic.csv`` (device time per OP Type), else
``kernel_details.csv`` (per kernel); where those are missing (CPU-only
activities) the host side of ``trace_view.json``, read like a torch trace.

Chrome traces are read as a stream (:mod:`patchkit.traces.jsonstream`, ijson) and
summarised as they are read (:mod:`patchkit.traces.selftime`); nothing here writes.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from collections import defaultdict
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple

from patchkit.core.confined import Refused, open_bounded
from patchkit.core.errors import Location, TraceError
from patchkit.traces.jsonstream import MOVE, RETAKE, TraceStream
from patchkit.core.printable import printable
from patchkit.traces.selftime import MAX_NAMES, MAX_STEP_DIGITS, BadEvent, Names, Op, Step, totals
from patchkit.traces.files import ASCEND_OUTPUT, Capture, check_ascend_capture

STEP_COLUMNS = ("Computing", "Communication(Not Overlapped)", "Free")
TEXT_FILES = ("trace_view.json", "step_trace_time.csv", "op_statistic.csv", "kernel_details.csv")  # what is read
CSV_LIMIT = 16 << 30  # bytes of one CSV file read: kernel_details.csv of a long capture runs to a few GB
LINE_LIMIT = 1 << 20  # characters of one CSV line: torch_npu writes a few hundred
_NOT_UTF8 = re.compile("[\udc80-\udcff]")
FOREIGN = "torch does not write this: check where the trace came from, or take the capture again"


class CaptureData(NamedTuple):
    capture: Capture
    steps: Tuple[Step, ...]
    ops: Tuple[Op, ...]  # by self time, largest first
    steps_from: str
    ops_from: str
    note: str = ""  # what was cut (names past patchkit's bound), "" when nothing


def read(capture: Capture, on_bytes: Optional[Callable[[int], None]] = None,
         names: Optional[Names] = None) -> CaptureData:
    """A capture's steps and operators; ``on_bytes(n)`` is told the bytes of a torch trace as they are read.
    ``names``: the operator names kept so far by this command (bounded: see :class:`patchkit.traces.selftime.Names`)."""
    names = names if names is not None else Names()
    before = names.cut
    if capture.format == "ascend":
        data = _read_ascend(capture, names)
    else:
        steps, ops = chrome_totals(capture.path, on_bytes, names)
        data = CaptureData(capture, steps, ops, "ProfilerStep# events", "trace events")
    return data._replace(note=names.note(names.cut - before))


# ---------------------------------------------------------------- Chrome traces


def chrome_totals(path: str, on_bytes: Optional[Callable[[int], None]] = None,
                  names: Optional[Names] = None) -> Tuple[Tuple[Step, ...], Tuple[Op, ...]]:
    """The steps and operators of a Chrome trace (an object with ``traceEvents``, or a bare list), read as a stream.

    Memory is what the summary keeps (see :mod:`patchkit.traces.selftime`: some 20 bytes per complete event, against
    some 250 of JSON), never the file; a TraceError says where the file breaks.  ``on_bytes(n)``: told the bytes
    read so far, as they are read.
    """
    stream = TraceStream(path, on_bytes)
    try:
        found = totals(stream, names=names)
    except BadEvent as exc:
        raise TraceError(exc.message, stream.where(exc.needle), hint=FOREIGN) from None
    return found.step_list(), found.ops()


def steps_in(events: Iterable[object]) -> Tuple[Step, ...]:
    """The ``ProfilerStep#N`` spans of a list of events, by N (the first span of each N)."""
    return totals(events).step_list()


def self_times(events: Iterable[object]) -> Tuple[Op, ...]:
    """Self time and calls per (operator, category) of a list of events (see :mod:`patchkit.traces.selftime`)."""
    return totals(events).ops()


# ---------------------------------------------------------------- torch_npu's parsed output


def size_to_read(capture: Capture) -> int:
    """The bytes :func:`read` reads of a capture at most: a torch trace's, or the text files of a torch_npu one."""
    if capture.format != "ascend":
        return _size(capture.path)
    out = os.path.join(capture.path, ASCEND_OUTPUT)
    return sum(_size(os.path.join(out, n)) for n in TEXT_FILES)


def _size(path: str) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0  # reading it says why


def _read_ascend(capture: Capture, kept: Names) -> CaptureData:
    check_ascend_capture(capture.path)
    out = os.path.join(capture.path, ASCEND_OUTPUT)
    if os.path.islink(out):
        raise TraceError(f"{ASCEND_OUTPUT} is a symbolic link: never followed", Location(out), hint=MOVE)
    if not os.path.isdir(out):
        raise TraceError("not parsed yet: no ASCEND_PROFILER_OUTPUT (the capture ran with analysis off)",
                         Location(capture.path), hint=f"run `patchkit analyse {os.path.dirname(capture.path)}` "
                                                      "on a machine with torch_npu and CANN, then summarise it")
    names = set(os.listdir(out))
    text = set(TEXT_FILES) & names
    if not text:
        kind = "only the Db export (*.db)" if any(n.endswith(".db") for n in names) else "no text output"
        raise TraceError(f"ASCEND_PROFILER_OUTPUT holds {kind}; patchkit reads the text export", Location(out),
                         hint="capture with profiler.export_type=text (or [text, db]); msprof-analyze reads the Db "
                              "export: `msprof-analyze cluster -d FOLDER`")
    view = os.path.join(out, "trace_view.json")
    host: Optional[Tuple[Tuple[Step, ...], Tuple[Op, ...]]] = None
    steps: Tuple[Step, ...] = ()
    steps_from = ""
    if "step_trace_time.csv" in names:
        steps = _csv_steps(os.path.join(out, "step_trace_time.csv"))
        steps_from = "step_trace_time.csv"
    if not steps and "trace_view.json" in names:
        host = chrome_totals(view, names=kept)
        steps, steps_from = host[0], "ProfilerStep# events of trace_view.json"
    ops: Tuple[Op, ...] = ()
    ops_from = ""
    for name, read_ops in (("op_statistic.csv", _csv_op_statistic), ("kernel_details.csv", _csv_kernels)):
        if name in names:
            ops, ops_from = read_ops(os.path.join(out, name), kept), name
            if ops:
                break
    if not ops and "trace_view.json" in names:
        host = host if host is not None else chrome_totals(view, names=kept)
        ops, ops_from = host[1], "host events of trace_view.json"
    return CaptureData(capture, steps, ops, steps_from, ops_from)


def _csv_rows(path: str, needed: Tuple[str, ...]) -> Iterable[Tuple[int, Dict[str, str]]]:
    """(line, row) of a CSV torch_npu wrote; a TraceError naming the line for a missing column or a cut-off row.

    Read through :func:`patchkit.core.confined.open_bounded` (a link, a FIFO or a device refused; CSV_LIMIT bytes),
    a line at most LINE_LIMIT characters.
    """
    try:
        handle = io.TextIOWrapper(open_bounded(path, CSV_LIMIT), encoding="utf-8-sig", errors="surrogateescape",
                                  newline="")
    except Refused as exc:
        raise TraceError(f"{os.path.basename(path)} {exc}", Location(path), hint=MOVE) from None
    except OSError as exc:
        raise TraceError(f"cannot read it: {exc.strerror or exc}", Location(path), hint=RETAKE) from None
    with handle:
        reader = csv.reader(_lines(handle, path))
        try:
            header = next(reader, None)
            if header is None:
                return
            _utf8(header, path, 1)
            missing = [c for c in needed if c not in header]
            if missing:
                raise TraceError(f"no {', '.join(repr(c) for c in missing)} column (its columns: {printable(', '.join(header))})",
                                 Location(path, 1), hint="patchkit reads the CSV files torch_npu's parse writes; "
                                                         "parse the capture again with `patchkit analyse`")
            for fields in reader:
                if not fields:
                    continue
                if len(fields) < len(header):
                    raise TraceError(f"this row has {len(fields)} of {len(header)} fields: the file is cut off",
                                     Location(path, reader.line_num), hint=RETAKE)
                _utf8(fields, path, reader.line_num)
                yield reader.line_num, dict(zip(header, fields))
        except csv.Error as exc:
            raise TraceError(f"not a readable CSV file ({exc})", Location(path, reader.line_num), hint=RETAKE) from None
        except Refused as exc:
            raise TraceError(f"{os.path.basename(path)} {exc}", Location(path), hint=MOVE) from None
        except OSError as exc:
            raise TraceError(f"cannot read it: {exc.strerror or exc}", Location(path), hint=RETAKE) from None


def _lines(handle: io.TextIOBase, path: str) -> Iterable[str]:
    """The lines of ``handle``, each at most LINE_LIMIT characters (a longer one is a TraceError, never held)."""
    number = 0
    while True:
        line = handle.readline(LINE_LIMIT + 1)
        if not line:
            return
        number += 1
        if len(line) > LINE_LIMIT:
            raise TraceError(f"line {number} is longer than {LINE_LIMIT:,} characters: torch_npu writes a few "
                             "hundred", Location(path, number), hint=MOVE)
        yield line


def _utf8(fields: List[str], path: str, line: int) -> None:
    """A TraceError for a row with bytes that are not UTF-8 (read as lone surrogates)."""
    if any(_NOT_UTF8.search(f) for f in fields):
        raise TraceError("this row is not UTF-8 text", Location(path, line), hint=RETAKE)


def _number(value: str, path: str, line: int, column: str) -> float:
    value = value.strip()
    if value in ("", "N/A", "NA", "None"):
        return 0.0
    try:
        number = float(value)
    except ValueError:
        raise TraceError(f"{column} is {printable(value[:40])!r}, not a number", Location(path, line),
                         hint=RETAKE) from None
    if not math.isfinite(number):
        raise TraceError(f"{column} is {printable(value[:40])!r}, not a finite number", Location(path, line),
                         hint=FOREIGN)
    return number


def _csv_steps(path: str) -> Tuple[Step, ...]:
    """One step per Step value (the longest device's, when several devices share the file)."""
    steps: Dict[Optional[int], float] = {}
    for line, row in _csv_rows(path, ("Step",) + STEP_COLUMNS):
        raw = row["Step"].strip()
        whole = re.fullmatch(r"(\d+)(\.0*)?", raw)
        if whole and len(whole.group(1)) > MAX_STEP_DIGITS:
            raise TraceError(f"Step has {len(whole.group(1))} digits: no profiler counts steps that far (patchkit "
                             f"reads up to {MAX_STEP_DIGITS})", Location(path, line), hint=FOREIGN)
        number = int(whole.group(1)) if whole else None
        if number not in steps and len(steps) >= MAX_NAMES:
            raise TraceError(f"more than {MAX_NAMES:,} distinct steps: no profiler records that many in one capture",
                             Location(path, line), hint=FOREIGN)
        took = sum(_number(row[c], path, line, c) for c in STEP_COLUMNS)
        steps[number] = max(steps.get(number, 0.0), took)
    return tuple(Step(n, steps[n]) for n in sorted(steps, key=lambda n: (n is None, n or 0)))


def _csv_op_statistic(path: str, names: Names) -> Tuple[Op, ...]:
    ops: Dict[Tuple[str, str], List[float]] = defaultdict(lambda: [0, 0.0])
    for line, row in _csv_rows(path, ("OP Type", "Core Type", "Count", "Total Time(us)")):
        acc = ops[names.keep((row["OP Type"], row["Core Type"]))]
        acc[0] += int(_number(row["Count"], path, line, "Count"))
        acc[1] += _number(row["Total Time(us)"], path, line, "Total Time(us)")
    return _sorted_ops(ops)


def _csv_kernels(path: str, names: Names) -> Tuple[Op, ...]:
    ops: Dict[Tuple[str, str], List[float]] = defaultdict(lambda: [0, 0.0])
    for line, row in _csv_rows(path, ("Name", "Accelerator Core", "Duration(us)")):
        acc = ops[names.keep((row["Name"], row["Accelerator Core"]))]
        acc[0] += 1
        acc[1] += _number(row["Duration(us)"], path, line, "Duration(us)")
    return _sorted_ops(ops)


def _sorted_ops(ops: Dict[Tuple[str, str], List[float]]) -> Tuple[Op, ...]:
    out = [Op(name, kind, int(n), total) for (name, kind), (n, total) in ops.items()]
    return tuple(sorted(out, key=lambda o: (-o.self_us, o.name)))
