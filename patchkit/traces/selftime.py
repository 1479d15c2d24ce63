"""Steps and operators' self time from Chrome trace events fed one at a time, in memory far below the trace's.

A step is a ``ProfilerStep#N`` complete ("X") event; the first of each N
counts.  An operator's self time is its duration less the time of the
events nested directly in it on the same thread (what torch's
``key_averages()`` calls self time): each thread's complete events are
walked in start order, longest first on a tie and in the file's order
after that, with a stack of the open ones.

The walk needs a thread's events in order, and torch does not write them
so: a thread's operators come sorted, but its ``cuda_runtime`` launches
come after all of them, at the end of the file, and a stream's kernels
come in the driver's buffers.  So a thread's events are kept, 20 bytes
each (start, -duration and the (name, category) as a number, in arrays,
against some 250 bytes of JSON), as sorted runs: events wait in a small
buffer, which is sorted and handed on ``window`` at a time, and a new run
starts when the buffer's earliest event comes before the last one handed
on.  At the end each thread's runs are merged (``heapq.merge``: memory of
one event per run) and walked, thread after thread, adding up as the
whole-trace sort did: the result is the same, to the last bit, whatever
the order of the file.  Bounds for a trace no profiler wrote:
:data:`MAX_HELD` events kept, :data:`MAX_THREADS` threads, step numbers of
:data:`MAX_STEP_DIGITS` digits, finite times; past them, :class:`BadEvent`.
The distinct (name, category) pairs kept are bounded too, by :class:`Names`
(shared by every trace one command reads): the events of a pair past
:data:`MAX_NAMES` pairs or :data:`MAX_NAME_CHARS` characters in all are
added up as :data:`OTHER`, and counted, so that the summary says so.

Standard library only; nothing here reads a file.
"""

from __future__ import annotations

import heapq
import operator
import re
from array import array
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

WINDOW = 1024
MAX_HELD = 64_000_000  # complete events kept (20 bytes each: 1.3 GB); a torch trace of ~15 GB has that many
MAX_THREADS = 4096  # (pid, tid) pairs: a buffer each, so what waits in buffers stays under 8.4 million events
MAX_STEP_DIGITS = 18
MAX_NAMES = 100_000  # distinct (name, category) pairs one command keeps: a torch trace has a few thousand
MAX_NAME_CHARS = 16 << 20  # their characters, all together (CUDA kernels' names run to a few thousand each)
OTHER = ("(other names: past patchkit's bound on names)", "other")  # what the events of a pair past them count as
NOT_OPERATORS = frozenset({"Trace", "python_function", "fwdbwd", "ac2g", "overhead"})  # trace plumbing, Python frames
_STEP = re.compile(r"ProfilerStep#(\d+)")
_ORDER = operator.itemgetter(0, 1)  # (ts, -dur): start order, the longer (the parent) first; a stable sort keeps ties


class Step(NamedTuple):
    number: Optional[int]  # N of ProfilerStep#N or of step_trace_time.csv's Step; None without a schedule
    duration_us: float


class Op(NamedTuple):
    name: str
    kind: str  # the trace event's category (cpu_op, kernel, ...) or the Ascend Core Type
    calls: int
    self_us: float


class BadEvent(Exception):
    """An event (or a number of them) no profiler writes; ``needle`` is its text, to find its line by."""

    def __init__(self, message: str, needle: str = ""):
        super().__init__(message)
        self.message, self.needle = message, needle


class Names:
    """The distinct (name, category) pairs kept, each once, within MAX_NAMES pairs and MAX_NAME_CHARS characters.

    One is shared by every trace a command reads (the same names in every rank's trace are kept once);
    ``cut`` counts the events whose pair was past the bounds.
    """

    def __init__(self, count: int = MAX_NAMES, chars: int = MAX_NAME_CHARS):
        self.count, self.chars, self.cut = count, chars, 0
        self._kept: Dict[Tuple[str, str], Tuple[str, str]] = {}

    def keep(self, key: Tuple[str, str]) -> Tuple[str, str]:
        """``key`` (the one kept: names are shared), or OTHER once the bounds are reached (counted in ``cut``)."""
        kept = self._kept.get(key)
        if kept is None:
            size = len(key[0]) + len(key[1])
            if len(self._kept) >= self.count or size > self.chars:
                self.cut += 1
                return OTHER
            self.chars -= size
            kept = self._kept[key] = key
        return kept

    @staticmethod
    def note(cut: int) -> str:
        """What the summary says of a capture with ``cut`` events past the bounds ("" for none)."""
        return (f"{cut} event(s) have names past patchkit's bound on names ({MAX_NAMES:,} distinct names, "
                f"{MAX_NAME_CHARS:,} characters in all) and are added up as {OTHER[0]!r}: the trace holds more "
                "distinct names than a profiler writes") if cut else ""


class _Thread:
    __slots__ = ("pending", "runs", "last")

    def __init__(self) -> None:
        self.pending: List[Tuple[float, float, int]] = []  # (ts, -dur, key id), in the order they came
        self.runs: List[Tuple[array, array, array]] = []  # each sorted: ts, -dur, key id
        self.last: Optional[Tuple[float, float]] = None  # the order of the last event handed to a run


class Totals:
    """What a summary keeps of a trace; :meth:`feed` it events, then :meth:`finish`."""

    def __init__(self, window: int = WINDOW, names: Optional[Names] = None):
        self.window = max(window, 1)
        self.names = names if names is not None else Names()
        self.steps: Dict[int, float] = {}
        self.threads: Dict[Tuple[object, object], _Thread] = {}
        self.held = 0
        self._spent: Dict[int, list] = {}  # key id -> [calls, self time], added up thread after thread
        self._ids: Dict[Tuple[str, str], int] = {}
        self._keys: List[Tuple[str, str]] = []
        self._operator: List[bool] = []
        self._number: List[Optional[int]] = []

    def feed(self, events: Iterable[object]) -> None:
        ids, threads, steps, numbers, window = self._ids, self.threads, self.steps, self._number, self.window
        for e in events:
            if type(e) is not dict or e.get("ph") != "X":
                continue
            ts, dur = e.get("ts"), e.get("dur", 0)
            if type(ts) is not float or type(dur) is not float:
                try:
                    ts, dur = float(ts), float(dur)  # an int, or a number written as a string
                except (TypeError, ValueError):
                    continue
            name, cat = e.get("name", ""), e.get("cat", "")
            key = (name if type(name) is str else str(name), cat if type(cat) is str else str(cat))
            if ts - ts or dur - dur:  # inf - inf and nan - nan are nan, which is true
                raise BadEvent(f"an event has ts {ts!r} and dur {dur!r}: no profiler writes a time that is not "
                               "a finite number", key[0])
            if dur < 0:
                dur = 0.0
            kid = ids.get(key)
            if kid is None:
                kid = self._identify(key)
            number = numbers[kid]
            if number is not None and number not in steps:
                steps[number] = dur
            where = (e.get("pid"), e.get("tid"))
            try:
                thread = threads.get(where)
            except TypeError:  # a list or an object as pid or tid
                where = (str(where[0]), str(where[1]))
                thread = threads.get(where)
            if thread is None:
                if len(threads) >= MAX_THREADS:
                    raise BadEvent(f"the trace has events on more than {MAX_THREADS:,} threads and streams (pid, "
                                   "tid): no profiler writes that many")
                thread = threads[where] = _Thread()
            pending = thread.pending
            pending.append((ts, -dur, kid))
            if len(pending) >= 2 * window:
                self._hand_on(thread, len(pending) - window)

    def finish(self) -> None:
        """Merge and walk each thread's runs; the runs are let go as each thread is done."""
        for thread in self.threads.values():
            self._hand_on(thread, len(thread.pending))
            runs, thread.runs = thread.runs, []
            merged = heapq.merge(*(zip(*run) for run in runs), key=_ORDER) if len(runs) > 1 else \
                zip(*runs[0]) if runs else iter(())
            self._walk(merged)

    def step_list(self) -> Tuple[Step, ...]:
        return tuple(Step(n, self.steps[n]) for n in sorted(self.steps))

    def ops(self) -> Tuple[Op, ...]:
        """Self time and calls per (name, category), largest first."""
        ops = [Op(*self._keys[kid], calls, spent) for kid, (calls, spent) in self._spent.items()]
        return tuple(sorted(ops, key=lambda o: (-o.self_us, o.name)))

    def _identify(self, key: Tuple[str, str]) -> int:
        """The id of a pair not seen yet in this trace: one the names keep, else OTHER's (never stored for ``key``)."""
        key = self.names.keep(key)
        kid = self._ids.get(key)
        if kid is not None:  # OTHER, met before in this trace
            return kid
        name, cat = key
        step = _STEP.fullmatch(name) if name.startswith("ProfilerStep#") else None
        if step and len(step.group(1)) > MAX_STEP_DIGITS:
            raise BadEvent(f"a ProfilerStep# span numbered with {len(step.group(1))} digits: no profiler counts "
                           f"steps that far (patchkit reads up to {MAX_STEP_DIGITS} digits)", name[:64])
        kid = self._ids[key] = len(self._keys)
        self._keys.append(key)
        self._number.append(int(step.group(1)) if step else None)
        self._operator.append(cat not in NOT_OPERATORS and not step)
        return kid

    def _hand_on(self, thread: _Thread, count: int) -> None:
        """Sort the buffer and move its earliest ``count`` events to the thread's last run, or to a new one."""
        pending = thread.pending
        pending.sort(key=_ORDER)
        if count <= 0:
            return
        self.held += count
        if self.held > MAX_HELD:
            raise BadEvent(f"the trace has more than {MAX_HELD:,} complete events: more than patchkit holds to nest "
                           "them (20 bytes each); summarise a shorter capture window")
        batch = pending[:count]
        del pending[:count]
        last = thread.last
        if last is None:
            thread.runs.append((array("d"), array("d"), array("I")))
        elif _ORDER(batch[0]) < last:  # the events at or after the last run's end extend it; the others start a run
            split = len(batch)
            while split and _ORDER(batch[split - 1]) >= last:
                split -= 1
            _extend(thread.runs[-1], batch[split:])
            batch = batch[:split]
            thread.runs.append((array("d"), array("d"), array("I")))
        _extend(thread.runs[-1], batch)
        thread.last = _ORDER(batch[-1])

    def _walk(self, ordered: Iterator[Tuple[float, float, int]]) -> None:
        """Nest a thread's events, in order, and add up each one's self time as it closes."""
        stack: List[list] = []  # [end, children's time, key id, dur] of the open events
        spent, operator_ = self._spent, self._operator
        for ts, negative, kid in ordered:
            while stack and stack[-1][0] <= ts:
                self._close(stack.pop(), spent, operator_)
            dur = -negative
            if stack:
                top = stack[-1]
                left = top[0] - ts
                top[1] += dur if dur < left else left
            stack.append([ts + dur, 0.0, kid, dur])
        while stack:
            self._close(stack.pop(), spent, operator_)

    @staticmethod
    def _close(frame: list, spent: Dict[int, list], operator_: List[bool]) -> None:
        _end, children, kid, dur = frame
        if operator_[kid]:
            own = dur - children
            acc = spent.get(kid)
            if acc is None:
                spent[kid] = [1, own if own > 0.0 else 0.0]
            else:
                acc[0] += 1
                acc[1] += own if own > 0.0 else 0.0


def _extend(run: Tuple[array, array, array], events: List[Tuple[float, float, int]]) -> None:
    for column, values in zip(run, zip(*events)):
        column.extend(values)


def totals(events: Iterable[object], window: int = WINDOW, names: Optional[Names] = None) -> Totals:
    """Steps and self times of ``events``, read once; ``names``: the pairs kept so far (a new :class:`Names` if None)."""
    result = Totals(window, names)
    result.feed(events)
    result.finish()
    return result
