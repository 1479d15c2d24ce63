"""The call that makes each step, when no loop or function holds exactly one: a step found at its call site.

An optimizer step (or an outermost model forward) is seen exactly, with the call of the first frame in torch's
folder it ran in: that call's caller and the caller's line are the job's own code that asks for the step (the
``self.optimizer.step()`` of transformers' ``Trainer._run_epoch``, whose update loop samples cannot tell from its
micro-batch loop, since both turn at the same lines).  :func:`call_sites` makes each such place a candidate of
kind ``call``: each repetition, from one call to the next, holds exactly one marker by construction, so its role
is ``step``; the recipe puts a step after that call (``after_call``).  :func:`with_call_sites` adds them to what
:func:`patchkit.attach.stepfind.find` found, after the loops and functions that hold one step each, and chooses
the first when none of those was chosen, or when each repetition of the one chosen lasts less than half of the
time from one to the next (a wrapper of the optimizer's step: its spans would hold the step and nothing of the
forward or backward).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Tuple

from patchkit.attach.stepfind import Candidate, Found, what
from patchkit.attach.stepwatch import Checked, markers

LEAST = 3  # calls seen, at least


def call_sites(watch: Any, source_of: Callable[[str], Optional[str]]) -> Tuple[str, List[Candidate]]:
    """(what a step was judged by, a candidate for each place the job's own code called it from, most first)."""
    w = Checked(watch)
    marker, times = markers(w)
    places: Dict[Tuple[int, int, int], List[float]] = defaultdict(list)
    for call, t in times:
        row = w.call(call)
        parent = w.call(row[2]) if row else None
        if parent is not None and w.nameable(parent[0]):
            places[(parent[0], parent[1], row[3])].append(t)
    span = w.last - w.first
    out = []
    for (code, thread, line), stamps in places.items():
        stamps.sort()
        if len(stamps) < LEAST or span <= 0:
            continue
        periods = [b - a for a, b in zip(stamps, stamps[1:])]
        period = statistics.median(periods)
        spread = statistics.median([abs(p - period) for p in periods])
        file, _, qualname = w.codes[code]
        out.append(Candidate("call", file, qualname, line, _line(source_of, file, line), w.threads[thread],
                             len(periods), round(period, 6), round(max(0.0, 1 - spread / period) if period else 0.0,
                                                                   4),
                             round(min(1.0, (stamps[-1] - stamps[0]) / span), 4), 1.0, f"one {marker}", "step"))
    out.sort(key=lambda c: (-c.repeats, c.file, c.line))
    return marker, out


def _line(source_of: Callable[[str], Optional[str]], file: str, line: int) -> str:
    try:
        text = source_of(file)
    except Exception:  # noqa: BLE001 - a reader that fails reads nothing
        text = None
    lines = text.splitlines() if isinstance(text, str) else []
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def with_call_sites(found: Found, watch: Any, source_of: Callable[[str], Optional[str]]) -> Found:
    """``found`` with the call sites among its candidates: after those that hold one step each; chosen, with why,
    when nothing else was, or when what was lasts less than half of the time from one of its repetitions to the
    next (a wrapper of the optimizer's step, whose calls hold one and little else)."""
    marker, calls = call_sites(watch, source_of)
    if not calls:
        return found
    steps = [c for c in found.candidates if c.role == "step"]
    first = calls[0]
    best = found.candidates[found.chosen] if found.chosen is not None else None
    if best is not None and best.covers >= 0.5:
        ranked = tuple(steps + calls + [c for c in found.candidates if c.role != "step"])[:20]
        return found._replace(candidates=ranked, chosen=ranked.index(best))
    ranked = tuple(calls + steps + [c for c in found.candidates if c.role != "step"])[:20]
    where = (f"each {marker} is called at line {first.line} of {first.qualname} ({first.repeats + 1} seen, one every "
             f"{first.period:.3g} s), so a step after that call holds exactly one")
    why = (f"no loop or function holds exactly one {marker}: {where}" if best is None else
           f"each {what(best)} holds one too, but lasts only {best.covers:.0%} of the time from one to the next: "
           f"{where}")
    return found._replace(candidates=ranked, chosen=ranked.index(first), why=why)
