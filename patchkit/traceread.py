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

Standard library only; nothing here writes.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
from collections import defaultdict
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from .errors import Location, TraceError
from .tracefiles import ASCEND_OUTPUT, Capture, check_ascend_capture

_STEP = re.compile(r"ProfilerStep#(\d+)$")
NOT_OPERATORS = frozenset({"Trace", "python_function", "fwdbwd", "ac2g", "overhead"})  # trace plumbing, Python frames
STEP_COLUMNS = ("Computing", "Communication(Not Overlapped)", "Free")
RETAKE = "take the capture again, or copy it again from the node that wrote it (`patchkit collect` verifies sizes)"


class Step(NamedTuple):
    number: Optional[int]  # N of ProfilerStep#N or of step_trace_time.csv's Step; None without a schedule
    duration_us: float


class Op(NamedTuple):
    name: str
    kind: str  # the trace event's category (cpu_op, kernel, ...) or the Ascend Core Type
    calls: int
    self_us: float


class CaptureData(NamedTuple):
    capture: Capture
    steps: Tuple[Step, ...]
    ops: Tuple[Op, ...]  # by self time, largest first
    steps_from: str
    ops_from: str


def read(capture: Capture) -> CaptureData:
    if capture.format == "ascend":
        return _read_ascend(capture)
    events = chrome_events(capture.path)
    return CaptureData(capture, steps_in(events), self_times(events), "ProfilerStep# events", "trace events")


# ---------------------------------------------------------------- Chrome traces


def chrome_events(path: str) -> List[dict]:
    """The events of a Chrome trace (an object with ``traceEvents``, or a bare list); a TraceError saying where it breaks."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            text = handle.read()
    except EOFError:
        raise TraceError("the compressed trace is cut off", Location(path), hint=RETAKE) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read the trace: {exc}", Location(path), hint=RETAKE) from None
    if not text.strip():
        raise TraceError("the trace is empty (0 events)", Location(path), hint=RETAKE)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        cut = exc.pos >= len(text.rstrip())
        why = "the trace ends in the middle of its JSON data: it was cut off while written or copied" if cut \
            else f"the trace is not valid JSON ({exc.msg})"
        raise TraceError(why, Location(path, exc.lineno, exc.colno), hint=RETAKE) from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError("not a Chrome trace: no traceEvents list", Location(path, 1),
                         hint="give a torch.profiler trace (*.pt.trace.json) or torch_npu's trace_view.json")
    return [e for e in events if isinstance(e, dict)]


def _spans(events: Iterable[dict]) -> Iterable[Tuple[dict, float, float]]:
    for e in events:
        if e.get("ph") == "X":
            try:
                ts, dur = float(e["ts"]), float(e.get("dur", 0))
            except (KeyError, TypeError, ValueError):
                continue
            yield e, ts, max(dur, 0.0)


def steps_in(events: Iterable[dict]) -> Tuple[Step, ...]:
    """The ``ProfilerStep#N`` spans, by N (the first span of each N)."""
    seen: Dict[int, float] = {}
    for e, _ts, dur in _spans(events):
        match = _STEP.match(str(e.get("name", "")))
        if match:
            seen.setdefault(int(match.group(1)), dur)
    return tuple(Step(n, seen[n]) for n in sorted(seen))


def self_times(events: Iterable[dict]) -> Tuple[Op, ...]:
    """Self time and calls per (operator, category), from the nesting of complete events on each thread."""
    threads: Dict[Tuple[str, str], List[Tuple[float, float, dict]]] = defaultdict(list)
    for e, ts, dur in _spans(events):
        threads[(str(e.get("pid")), str(e.get("tid")))].append((ts, dur, e))
    calls: Dict[Tuple[str, str], int] = defaultdict(int)
    spent: Dict[Tuple[str, str], float] = defaultdict(float)
    for spans in threads.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: List[List] = []  # [end, children time, event, dur]
        for ts, dur, e in spans:
            while stack and stack[-1][0] <= ts:
                _account(stack.pop(), calls, spent)
            if stack:
                stack[-1][1] += min(dur, stack[-1][0] - ts)
            stack.append([ts + dur, 0.0, e, dur])
        while stack:
            _account(stack.pop(), calls, spent)
    ops = [Op(name, kind, calls[(name, kind)], spent[(name, kind)]) for name, kind in calls]
    return tuple(sorted(ops, key=lambda o: (-o.self_us, o.name)))


def _account(frame: list, calls: Dict[Tuple[str, str], int], spent: Dict[Tuple[str, str], float]) -> None:
    _end, children, e, dur = frame
    name, kind = str(e.get("name", "")), str(e.get("cat", ""))
    if kind in NOT_OPERATORS or _STEP.match(name):
        return
    calls[(name, kind)] += 1
    spent[(name, kind)] += max(dur - children, 0.0)


# ---------------------------------------------------------------- torch_npu's parsed output


def _read_ascend(capture: Capture) -> CaptureData:
    check_ascend_capture(capture.path)
    out = os.path.join(capture.path, ASCEND_OUTPUT)
    if not os.path.isdir(out):
        raise TraceError("not parsed yet: no ASCEND_PROFILER_OUTPUT (the capture ran with analysis off)",
                         Location(capture.path), hint=f"run `patchkit analyse {os.path.dirname(capture.path)}` "
                                                      "on a machine with torch_npu and CANN, then summarise it")
    names = set(os.listdir(out))
    text = {"trace_view.json", "step_trace_time.csv", "op_statistic.csv", "kernel_details.csv"} & names
    if not text:
        kind = "only the Db export (*.db)" if any(n.endswith(".db") for n in names) else "no text output"
        raise TraceError(f"ASCEND_PROFILER_OUTPUT holds {kind}; patchkit reads the text export", Location(out),
                         hint="capture with profiler.export_type=text (or [text, db]); msprof-analyze reads the Db "
                              "export: `msprof-analyze cluster -d FOLDER`")
    host: Optional[List[dict]] = None
    steps, steps_from = (), ""
    if "step_trace_time.csv" in names:
        steps = _csv_steps(os.path.join(out, "step_trace_time.csv"))
        steps_from = "step_trace_time.csv"
    if not steps and "trace_view.json" in names:
        host = chrome_events(os.path.join(out, "trace_view.json"))
        steps, steps_from = steps_in(host), "ProfilerStep# events of trace_view.json"
    ops, ops_from = (), ""
    for name, read_ops in (("op_statistic.csv", _csv_op_statistic), ("kernel_details.csv", _csv_kernels)):
        if name in names:
            ops, ops_from = read_ops(os.path.join(out, name)), name
            if ops:
                break
    if not ops and "trace_view.json" in names:
        host = host if host is not None else chrome_events(os.path.join(out, "trace_view.json"))
        ops, ops_from = self_times(host), "host events of trace_view.json"
    return CaptureData(capture, steps, ops, steps_from, ops_from)


def _csv_rows(path: str, needed: Tuple[str, ...]) -> Iterable[Tuple[int, Dict[str, str]]]:
    """(line, row) of a CSV torch_npu wrote; a TraceError naming the line for a missing column or a cut-off row."""
    try:
        handle = open(path, newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise TraceError(f"cannot read it: {exc.strerror or exc}", Location(path), hint=RETAKE) from None
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, None)
            if header is None:
                return
            missing = [c for c in needed if c not in header]
            if missing:
                raise TraceError(f"no {', '.join(repr(c) for c in missing)} column (its columns: {', '.join(header)})",
                                 Location(path, 1), hint="patchkit reads the CSV files torch_npu's parse writes; "
                                                         "parse the capture again with `patchkit analyse`")
            for fields in reader:
                if not fields:
                    continue
                if len(fields) < len(header):
                    raise TraceError(f"this row has {len(fields)} of {len(header)} fields: the file is cut off",
                                     Location(path, reader.line_num), hint=RETAKE)
                yield reader.line_num, dict(zip(header, fields))
        except csv.Error as exc:
            raise TraceError(f"not a readable CSV file ({exc})", Location(path, reader.line_num), hint=RETAKE) from None


def _number(value: str, path: str, line: int, column: str) -> float:
    value = value.strip()
    if value in ("", "N/A", "NA", "None"):
        return 0.0
    try:
        return float(value)
    except ValueError:
        raise TraceError(f"{column} is {value!r}, not a number", Location(path, line), hint=RETAKE) from None


def _csv_steps(path: str) -> Tuple[Step, ...]:
    """One step per Step value (the longest device's, when several devices share the file)."""
    steps: Dict[Optional[int], float] = {}
    for line, row in _csv_rows(path, ("Step",) + STEP_COLUMNS):
        raw = row["Step"].strip()
        number = int(float(raw)) if re.fullmatch(r"\d+(\.0*)?", raw) else None
        took = sum(_number(row[c], path, line, c) for c in STEP_COLUMNS)
        steps[number] = max(steps.get(number, 0.0), took)
    return tuple(Step(n, steps[n]) for n in sorted(steps, key=lambda n: (n is None, n or 0)))


def _csv_op_statistic(path: str) -> Tuple[Op, ...]:
    ops: Dict[Tuple[str, str], List[float]] = defaultdict(lambda: [0, 0.0])
    for line, row in _csv_rows(path, ("OP Type", "Core Type", "Count", "Total Time(us)")):
        acc = ops[(row["OP Type"], row["Core Type"])]
        acc[0] += int(_number(row["Count"], path, line, "Count"))
        acc[1] += _number(row["Total Time(us)"], path, line, "Total Time(us)")
    return _sorted_ops(ops)


def _csv_kernels(path: str) -> Tuple[Op, ...]:
    ops: Dict[Tuple[str, str], List[float]] = defaultdict(lambda: [0, 0.0])
    for line, row in _csv_rows(path, ("Name", "Accelerator Core", "Duration(us)")):
        acc = ops[(row["Name"], row["Accelerator Core"])]
        acc[0] += 1
        acc[1] += _number(row["Duration(us)"], path, line, "Duration(us)")
    return _sorted_ops(ops)


def _sorted_ops(ops: Dict[Tuple[str, str], List[float]]) -> Tuple[Op, ...]:
    out = [Op(name, kind, int(n), total) for (name, kind), (n, total) in ops.items()]
    return tuple(sorted(out, key=lambda o: (-o.self_us, o.name)))
