"""Schedule semantics, exactly torch.profiler.schedule's: which steps wait, warm up and record.

Standard library only: the runtime asks these in the training process.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Tuple

from ..vocabulary import SCHEDULE_KEYS

# Schedule actions, numbered like torch.profiler.ProfilerAction.
NONE, WARMUP, RECORD, RECORD_AND_SAVE = 0, 1, 2, 3


def schedule_action(step: int, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0) -> int:
    """The action ``torch.profiler.schedule(...)`` returns for ``step``, as an int (NONE..RECORD_AND_SAVE)."""
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


def schedule_end(wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0) -> Optional[int]:
    """The first step from which the schedule stays NONE for good (None when ``repeat`` is 0)."""
    if repeat <= 0:
        return None
    return skip_first + repeat * (wait + warmup + active)


def windows(settings: Mapping[str, Any], cycles: Optional[int] = None) -> List[Tuple[int, int]]:
    """(first, last) recorded step of each cycle; the first ``cycles`` ones when ``repeat`` is 0."""
    s = settings
    cycle = s["wait"] + s["warmup"] + s["active"]
    count = s["repeat"] if s["repeat"] > 0 else (cycles or 1)
    out = []
    for c in range(count):
        first = s["skip_first"] + c * cycle + s["wait"] + s["warmup"]
        out.append((first, first + s["active"] - 1))
    return out


def describe_schedule(settings: Mapping[str, Any]) -> str:
    s = settings
    sched = " ".join(f"{k}={s[k]}" for k in SCHEDULE_KEYS)
    wins = windows(s, cycles=2)
    spans = ", ".join(_span(a, b) for a, b in wins)
    if s["repeat"] > 0:
        return f"{sched}: records {spans}; the schedule is over at step {schedule_end(*(s[k] for k in SCHEDULE_KEYS))}"
    cycle = s["wait"] + s["warmup"] + s["active"]
    return f"{sched}: records {spans}, ... (every {cycle} steps until the process exits)"


def _span(a: int, b: int) -> str:
    return f"step {a}" if a == b else f"steps {a}-{b}"


