"""What a job's watcher saw (``attach --auto``), read on the attaching side as a stranger's file.

The watcher (:mod:`patchkit.runtime.attach.watch`) writes ``watch.json`` into its channel, which is the job's
user's.  :func:`read` opens it as :mod:`patchkit.attach.channel` opens a status (no link followed, a regular file,
UTF-8, at most :data:`LIMIT` bytes, nested at most :data:`NESTING` deep, counted before any parser sees it) and
makes it a :class:`Watch`: every row of its type, every index inside the table it names (a caller's ``parent``
before the call itself, so that following parents always ends), every text bounded and on one line, every time
inside the watch.  A row that is not one is left out; a file that is not one is :class:`Unreadable`, with why.
Its ``wraps`` are a frame's *moves* (see :class:`Watch`): every line change, not only the loops' turns.
"""

from __future__ import annotations

import json
from typing import Any, Callable, List, NamedTuple, Optional, Tuple

from patchkit.attach import channel
from patchkit.core.confined import Refused

NAME = "watch.json"
LIMIT = 48 << 20  # the watcher keeps at most 60,000 calls and as many moves: about 10 MiB of JSON
NESTING = 3  # {calls: [[code, thread, ...]]}
TEXT = 4096  # a file name or a qualified name
MAX_ROWS = 200000
MAX_TIME = 7 * 24 * 3600.0


class Watch(NamedTuple):
    pid: int
    interval: float  # mean seconds between two looks
    first: float  # the first look (every time: seconds since the watch began)
    last: float  # the last look
    samples: int
    stopped: str  # repeated, time, cap, detached
    threads: List[str]
    codes: List[Tuple[str, int, str]]  # (file, co_firstlineno, co_qualname)
    calls: List[Tuple[int, int, int, int, float, float]]  # (code, thread, parent, parent_line, start, end)
    # each move of a frame between two looks in a row: its line changed (forward or back), or stayed while the
    # call under it is a new one of the same function (from_line == to_line); a loop entered, turned or left
    wraps: List[Tuple[int, float, float, int, int]]  # (call, t_prev, t, from_line, to_line)
    lines: List[Tuple[int, int, int]]  # (code, line, looks): every kept frame of each look
    leaves: List[Tuple[int, int, int]]  # (code, line, looks): the deepest kept frame not in torch
    markers: List[Tuple[str, int, float]]  # (kind, call, t): "optimizer"
    cutoff: str  # torch's folder ("" when the job had not imported torch)
    cost: float  # the share of the watched time the looks took
    npu: bool = False  # the job had imported torch_npu


class Unreadable(Exception):
    """The job's watch.json is not what a watcher writes."""


def read(base: str) -> Optional[Watch]:
    """The watch in the channel of the request folder ``base``; None when there is none; :class:`Unreadable`."""
    try:
        raw = channel._raw(base, NAME, LIMIT)
    except FileNotFoundError:
        return None
    except (channel.Unusable, Refused, OSError) as exc:
        raise Unreadable(str(exc)) from None
    if raw is None:
        return None
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"{NAME} is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if channel.deeper_than(raw, NESTING):
        raise Unreadable(f"{NAME} nests more than {NESTING} deep")
    try:
        data = json.loads(decoded, parse_constant=channel._no_constant)
    except (ValueError, RecursionError) as exc:
        raise Unreadable(f"{NAME} is not JSON: {str(exc)[:80]}") from None
    return typed(data)


def _int(v: Any, low: int = 0, high: int = 1 << 31) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) and low <= v < high else None


def _time(v: Any) -> Optional[float]:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= MAX_TIME
    return float(v) if ok else None


def _text(v: Any) -> Optional[str]:
    return channel.text(v, TEXT)


def _rows(data: dict, key: str, kinds: List[Callable[[Any], Any]], indexed: bool = False) -> list:
    """The rows of ``key`` of their types.  A row that is not one is left out, unless others name rows by their
    index (``indexed``: codes, calls), where one left out would shift the rest: then the watch is unreadable."""
    rows = data.get(key)
    if not isinstance(rows, list) or (indexed and len(rows) > MAX_ROWS):
        raise Unreadable(f"{NAME} has no list {key!r} of at most {MAX_ROWS} rows")
    out = []
    for i, row in enumerate(rows[:MAX_ROWS]):
        values = tuple(kind(v) for kind, v in zip(kinds, row)) if isinstance(row, list) and \
            len(row) == len(kinds) else None
        if values is not None and all(v is not None for v in values):
            out.append(values)
        elif indexed:
            raise Unreadable(f"{NAME}: row {i} of {key!r} is not one")
    return out


def typed(data: Any) -> Watch:
    if not isinstance(data, dict) or data.get("format") != 1:
        raise Unreadable(f"{NAME} is not a watch of format 1")
    head = {k: _time(data.get(k)) for k in ("interval", "first", "last", "cost")}
    if any(v is None for v in head.values()) or head["first"] > head["last"]:
        raise Unreadable(f"{NAME} has no times of its watch")
    threads = [t for (t,) in _rows({"threads": [[v] for v in data.get("threads") or []]}, "threads", [_text], True)]
    codes = [(f, n, q) for f, n, q in _rows(data, "codes", [_text, _int, _text], True)]
    codes_n, threads_n = len(codes), len(threads)
    calls: List[Tuple[int, int, int, int, float, float]] = []
    for code, thread, parent, line, start, end in _rows(data, "calls", [
            lambda v: _int(v, 0, codes_n), lambda v: _int(v, 0, threads_n), lambda v: _int(v, -1), _int, _time,
            _time], True):
        if not parent < len(calls) or start > end:  # a caller comes before its calls: following parents ends
            raise Unreadable(f"{NAME}: row {len(calls)} of 'calls' is not one (its caller {parent}, from {start} "
                             f"to {end})")
        calls.append((code, thread, parent, line, start, end))
    n = len(calls)
    wraps = [w for w in _rows(data, "wraps", [lambda v: _int(v, 0, n), _time, _time, _int, _int]) if w[1] <= w[2]]
    per_line = [lambda v: _int(v, 0, codes_n), _int, _int]
    markers = [m for m in _rows(data, "markers", [_text, lambda v: _int(v, 0, n), _time]) if m[0] == "optimizer"]
    return Watch(_int(data.get("pid"), 1) or 0, head["interval"], head["first"], head["last"],
                 _int(data.get("samples")) or 0, _text(data.get("stopped")) or "", threads, codes, calls, wraps,
                 _rows(data, "lines", per_line), _rows(data, "leaves", per_line), markers,
                 _text(data.get("cutoff")) or "", head["cost"], data.get("npu") is True)
