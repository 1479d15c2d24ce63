"""Schedule semantics: which steps wait, warm up and record.

The periodic schedule (wait, warmup, active, repeat, skip_first) is exactly
torch.profiler.schedule's.  A list of steps (``schedule.steps``) records
exactly those steps: each run of consecutive steps is one window, with no
warmup.  Every function takes the schedule as ``(wait, warmup, active, repeat,
skip_first, steps)``.

Standard library only: the runtime asks these in the training process.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from patchkit.core.vocabulary import PERIODIC

# Schedule actions, numbered like torch.profiler.ProfilerAction.
NONE, WARMUP, RECORD, RECORD_AND_SAVE = 0, 1, 2, 3


def schedule_action(step: int, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
                    steps: Sequence[int] = ()) -> int:
    """The action for ``step``, as an int (NONE..RECORD_AND_SAVE): ``torch.profiler.schedule(...)``'s, or the steps'."""
    if steps:
        if step not in steps:
            return NONE
        return RECORD if step + 1 in steps else RECORD_AND_SAVE
    if step < skip_first:
        return NONE
    step -= skip_first
    cycle = wait + warmup + active
    if repeat > 0 and step >= repeat * cycle:
        return NONE
    m = step % cycle
    if m < wait:
        return NONE
    if m < wait + warmup:
        return WARMUP
    return RECORD if m < cycle - 1 else RECORD_AND_SAVE


def schedule_end(wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
                 steps: Sequence[int] = ()) -> Optional[int]:
    """The first step from which the schedule stays NONE for good (None when ``repeat`` is 0)."""
    if steps:
        return max(steps) + 1
    if repeat <= 0:
        return None
    return skip_first + repeat * (wait + warmup + active)


def runs(steps: Sequence[int]) -> List[Tuple[int, int]]:
    """(first, last) of each run of consecutive steps: the windows of ``schedule.steps``."""
    out: List[Tuple[int, int]] = []
    for n in sorted(set(steps)):
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def window_last(n: int, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
                steps: Sequence[int] = ()) -> int:
    """The last recorded step of the window that records step ``n``."""
    if steps:
        while n + 1 in steps:
            n += 1
        return n
    cycle = wait + warmup + active
    return n + cycle - 1 - (n - skip_first) % cycle  # this cycle's RECORD_AND_SAVE step


def next_event(n: int, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
               steps: Sequence[int] = ()) -> int:
    """The first step after ``n`` at which a window may open or close, or the schedule end.

    Periodic: windows open only at a cycle's first recorded step and close only
    at a cycle's first step (after the RECORD_AND_SAVE step before it); the end
    is a cycle's first step too.  Steps: a run's first step, the step after its last.
    """
    if steps:
        edges = sorted({e for first, last in runs(steps) for e in (first, last + 1)})
        at = bisect_right(edges, n)
        return edges[at] if at < len(edges) else n + 1
    if n < skip_first:
        return skip_first
    cycle = wait + warmup + active
    first = n - (n - skip_first) % cycle
    opens = first + wait + warmup
    return opens if opens > n else first + cycle


def windows(settings: Mapping[str, Any], cycles: Optional[int] = None) -> List[Tuple[int, int]]:
    """(first, last) recorded step of each window; the first ``cycles`` ones when ``repeat`` is 0."""
    s = settings
    if s.get("steps"):
        return runs(s["steps"])
    cycle = s["wait"] + s["warmup"] + s["active"]
    count = s["repeat"] if s["repeat"] > 0 else (cycles or 1)
    out = []
    for c in range(count):
        first = s["skip_first"] + c * cycle + s["wait"] + s["warmup"]
        out.append((first, first + s["active"] - 1))
    return out


def describe_schedule(settings: Mapping[str, Any]) -> str:
    s = settings
    if s.get("trigger") == "manual":
        return "trigger=manual: records nothing until `patchkit capture` asks, then exactly the steps it asks for"
    end = schedule_end(*(s[k] for k in PERIODIC), s.get("steps", ()))
    if s.get("steps"):
        spans = ", ".join(_span(a, b) for a, b in runs(s["steps"]))
        return f"steps={list(s['steps'])}: records {spans}; the schedule is over at step {end}"
    sched = " ".join(f"{k}={s[k]}" for k in PERIODIC)
    spans = ", ".join(_span(a, b) for a, b in windows(s, cycles=2))
    if s["repeat"] > 0:
        return f"{sched}: records {spans}; the schedule is over at step {end}"
    cycle = s["wait"] + s["warmup"] + s["active"]
    return f"{sched}: records {spans}, ... (every {cycle} steps until the process exits)"


def _span(a: int, b: int) -> str:
    return f"step {a}" if a == b else f"steps {a}-{b}"


def steps_function(action: str, steps: Sequence[int]) -> List[str]:
    """Source lines of ``schedule(step)`` for ``schedule.steps``, returning the members of the profiler's own
    ``ProfilerAction`` (``action``: ``torch.profiler.ProfilerAction`` or torch_npu's, never mixed)."""
    return [f"recorded_steps = frozenset({tuple(sorted(set(steps)))!r})",
            "",
            "",
            "def schedule(step):",
            "    if step not in recorded_steps:",
            f"        return {action}.NONE",
            "    if step + 1 in recorded_steps:",
            f"        return {action}.RECORD",
            f"    return {action}.RECORD_AND_SAVE",
            ""]
