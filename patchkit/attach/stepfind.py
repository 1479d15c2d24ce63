"""A job's step found from what ``patchkit attach --auto``'s watcher saw of its threads' stacks, with no recipe.

The step is what runs once per training step (or once per model forward, for an inference loop): a function
entered again and again, or a loop turning in a long-lived frame.  :func:`find` reads a
:class:`~patchkit.attach.watchread.Watch` (only its attributes: any value with the same fields will do) and the
job's files (``source_of``: the caller's checked reader, ``None`` for a file not to be read) and returns every
:class:`Candidate`, ranked, with the one chosen and why (:class:`Found`):

- a function candidate is one code in one thread with at least 3 complete calls (not the module's code, a lambda,
  a comprehension or a function nested twice: no recipe point can name those; not torch's own code); a loop
  candidate, a loop of a function (:mod:`.steploops`) with a complete turn, each turn started by one of the frame's
  moves (back to the loop, or on one line under a new call: it turned; into it from outside: it was entered) and
  complete when the next starts before the loop is left: nested loops (epochs, mini-batches, micro-batches) are
  each a candidate;
- a step is judged by the markers: the optimizer steps when any was seen, else the model forwards (the outermost
  calls of ``torch/nn/modules/module.py``); each marker is in the repetition its chain of parent calls leads to
  (an optimizer step is also where its frames were at its time: one run wholly between two looks is not missed);
- the step is a candidate each of whose repetitions holds exactly one marker (of those, the one that covers the
  most of the job's time: a loop's turn loading its batch over a helper it calls; of those that cover about as
  much, within :data:`NEAR`, one whose every repetition held one, then the innermost: a chain of calls that each
  hold the step, as Lightning's ``_call_lightning_module_hook``, ``LightningModule.optimizer_step``, ...,
  ``Precision.optimizer_step``, starts with the generic ones, which are called for other things too, a step each
  time); the others are ``inner``
  (micro-batches, a helper called per micro-batch: as many per step as were seen start per marker) or ``outer``
  (epochs);
- with no marker, the candidate that covers the most of the time most regularly is chosen, when clear enough
  (seen repeating 3 times at least: two turns give one period, which says nothing of how regular it is).

Steps shorter than about 3 samples cannot be told apart: a function whose calls were each seen in one sample,
or a loop whose turns are under 2.5 samples apart, holding no marker, is no candidate.  Nothing here raises on
what the watch holds: rows that make no sense (indexes out of range, loops of parents) are skipped.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from patchkit.attach.steploops import Sources, moved, turn_index, turns, with_marks
from patchkit.attach.stepwatch import Checked, markers, marks

MOST = 20  # candidates listed
NEAR = 0.05  # step candidates covering within this share of the job's time of the widest one cover the same step


class Candidate(NamedTuple):
    kind: str  # "function" or "loop"
    file: str
    qualname: str  # the function's (a loop's: the function that holds it)
    line: int  # co_firstlineno (a loop's: its header line)
    code: str  # that line's text, stripped ("" when unknown)
    thread: str
    repeats: int  # complete repetitions seen
    period: float  # median seconds from one repetition's start to the next
    regularity: float  # 1 - (median absolute deviation of the periods / median period), floored at 0
    share: float  # fraction of the watched time inside a repetition
    per_step: Optional[float]  # markers per complete repetition (mean); None when there are no markers
    holds: str  # what one repetition holds, in words
    role: str  # "step", "inner", "outer", or "" (no markers, or none of those)
    covers: float = 1.0  # the median share of its period one repetition lasts (a loop's turn lasts until the next)


class Found(NamedTuple):
    candidates: Tuple[Candidate, ...]  # ranked, best first
    chosen: Optional[int]  # index into candidates, or None when no step is clear
    why: str  # one line
    marker: str  # "optimizer step", "model forward" or ""
    top: Tuple[Tuple[str, int, str, float], ...]  # the busiest leaves: (file, line, qualname, share of samples)


class _Rep(NamedTuple):
    """A candidate before its markers are counted."""
    kind: str
    code: int
    thread: int
    line: int
    periods: List[float]
    share: float
    counts: Dict[Any, int]  # each complete repetition -> markers in it
    seen: int  # repetitions seen start, complete or not


def _functions(w: Checked) -> List[_Rep]:
    groups: Dict[Tuple[int, int], List[int]] = defaultdict(list)
    for i, call in enumerate(w.calls):
        if call and w.nameable(call[0]):
            groups[(call[0], call[1])].append(i)
    reps = []
    for (code, thread), calls in groups.items():
        done = sorted((w.calls[i][4], i) for i in calls if w.complete(w.calls[i]))
        if len(done) < 3:
            continue
        time = sum(w.calls[i][5] - w.calls[i][4] + w.interval for i in calls)
        reps.append(_Rep("function", code, thread, w.codes[code][1], [b[0] - a[0] for a, b in zip(done, done[1:])],
                         min(1.0, time / w.span), {i: 0 for _, i in done}, len(calls)))
    return reps


def _loops(w: Checked, sources: Sources, times: List[Tuple[int, float]]) -> Tuple[List[_Rep], Dict[int, list]]:
    """The loop candidates, and for each call that turned one: [(the loop, its rep's counts, its turns' starts)]."""
    marked = marks(w, times)
    by_call: Dict[int, List[tuple]] = defaultdict(list)
    for wrap in w.wraps:
        by_call[wrap[0]].append(wrap)
    found: Dict[Tuple[int, int, int], Tuple[Any, List[float], Dict[Any, int]]] = {}
    seen: Dict[Tuple[int, int, int], int] = defaultdict(int)
    placed: Dict[int, list] = defaultdict(list)
    for call, wraps in by_call.items():
        code, thread = w.calls[call][:2]
        file, firstlineno, qualname = w.codes[code]
        if len(wraps) < 2 or not w.nameable(code):
            continue
        loops = sources.loops(file, firstlineno, qualname)
        started: Dict[int, List[tuple]] = defaultdict(list)
        broken: Dict[int, List[float]] = defaultdict(list)
        known = len(sources.file(file)[0])  # a move from or to a line the file has not turns no loop
        moves = with_marks(sorted((r[1:] for r in wraps if 0 < r[3] <= known and 0 < r[4] <= known),
                                  key=lambda r: r[1]), marked.get(call, ())) if loops else ()
        for t_prev, t, a, b in moves:
            starts, breaks = moved(loops, a, b)
            for i in starts:
                started[i].append((t_prev, t, b))
            for i in breaks:
                broken[i].append(t)
        for i, own in started.items():
            seen[(code, thread, loops[i].header)] += len(own)
            complete = turns(own, broken[i])
            if complete:
                _, periods, counts = found.setdefault((code, thread, loops[i].header), (loops[i], [], {}))
                periods.extend(own[b][1] - own[a][1] for a, b in complete)
                counts.update({(call, b): 0 for _, b in complete})
                placed[call].append((loops[i], counts, own))
    samples: Dict[Tuple[int, int], int] = defaultdict(int)
    for code, line, n in w.lines:
        samples[(code, line)] += n
    reps = []
    for (code, thread, header), (loop, periods, counts) in found.items():
        inside = sum(n for (c, line), n in samples.items() if c == code and loop.holds(line))
        reps.append(_Rep("loop", code, thread, header, periods, min(1.0, inside * w.interval / w.span), counts,
                         seen[(code, thread, header)]))
    return reps, placed


def _count(w: Checked, reps: List[_Rep], placed: Dict[int, list], times: List[Tuple[int, float]]) -> None:
    """Adds each marker to the complete repetition that holds it, if any."""
    by_code = defaultdict(list)
    for rep in reps:
        if rep.kind == "function":
            by_code[rep.code].append(rep)
    for call, t in times:
        chain = w.chain(call)
        nearest: Dict[int, int] = {}
        for x in chain:
            nearest.setdefault(w.calls[x][0], x)
        for code, x in nearest.items():
            for rep in by_code.get(code, ()):
                if x in rep.counts:
                    rep.counts[x] += 1
        child_of: Dict[int, int] = {}
        for child, parent in zip(chain, chain[1:]):
            child_of.setdefault(parent, child)
        for parent, child in child_of.items():
            at = w.calls[child][3]  # the line of the parent the marker came from
            for loop, counts, own in placed.get(parent, ()):
                key = (parent, turn_index(loop, own, t, at))
                if loop.holds(at) and key in counts:
                    counts[key] += 1


def _median(values: List[float]) -> float:
    return statistics.median(values) if values else 0.0


def find(watch: Any, source_of: Callable[[str], Optional[str]]) -> Found:
    """The job's step candidates, ranked, and the one chosen (see the module's docstring)."""
    w = Checked(watch)
    sources = Sources(source_of)
    marker, times = markers(w)
    loops, placed = _loops(w, sources, times) if w.span else ([], {})
    reps = (_functions(w) if w.span else []) + loops
    _count(w, reps, placed, times)
    stamps = sorted(t for _, t in times)
    step = _median([b - a for a, b in zip(stamps, stamps[1:])]) or None
    found = []
    for rep in reps:
        period = _median(rep.periods)
        held = list(rep.counts.values())
        if not any(held) and (period < 2.5 * w.interval if rep.kind == "loop" else
                              all(w.calls[c][5] - w.calls[c][4] < w.interval / 2 for c in rep.counts)):
            continue  # too short to be told apart
        spread = _median([abs(p - period) for p in rep.periods])
        regular = max(0.0, 1 - spread / period) if period > 0 else 0.0
        per_step = sum(held) / len(held) if marker else None
        role, holds = _role(marker, per_step, held, period / step if step and period else 0.0,
                            rep.seen / len(times) if times else 0.0)
        file, _, qualname = w.codes[rep.code]
        lasts = _median([w.calls[c][5] - w.calls[c][4] + w.interval for c in rep.counts]) \
            if rep.kind == "function" else period
        found.append((Candidate(rep.kind, file, qualname, rep.line, sources.line(file, rep.line),
                                w.threads[rep.thread], len(held), round(period, 6), round(regular, 4),
                                round(rep.share, 4), per_step, holds, role,
                                round(min(1.0, lasts / period), 4) if period > 0 else 1.0),
                      held.count(1), _depth(w, rep)))
    return _choose(w, marker, len(times), step, found)


def _depth(w: Checked, rep: _Rep) -> float:
    """How deep the candidate's frames are (the median of its calls' chains; a loop half a frame below its
    function's)."""
    if rep.kind == "function":
        return _median([len(w.chain(c)) for c in rep.counts])
    return _median([len(w.chain(key[0])) for key in rep.counts]) + 0.5


def _role(marker: str, per_step: Optional[float], held: List[int], part: float, each: float) -> Tuple[str, str]:
    """The candidate's role among the steps, and what one repetition holds in words: ``part`` is its period over
    the markers', ``each`` the repetitions seen start per marker (an inner one's count per step: its turns take
    their own time, not a share of the step's)."""
    if per_step is None:
        return "", ""
    training = marker == "optimizer step"
    if 0.9 <= per_step <= 1.1 and held.count(1) >= 0.8 * len(held):
        return "step", f"one {marker}"
    if per_step < 0.9 and 0 < part < 1:
        k = max(2, round(each if each >= 1.5 else 1 / part))
        return "inner", (f"1/{k} of an optimizer step (a micro-batch: {k} per step)" if training
                         else f"1/{k} of a model forward ({k} per forward)")
    if per_step > 1.1:
        return "outer", f"{round(per_step)} {marker}s" + (" (an epoch?)" if training else "")
    return "", f"no {marker}" if not per_step else f"{per_step:.2f} {marker}s on average, not one each"


ORDER = {"step": 0, "inner": 1, "outer": 2, "": 3}


def _choose(w: Checked, marker: str, n: int, step: Optional[float],
            found: List[Tuple[Candidate, int, float]]) -> Found:
    """Ranks the candidates (``found``: each with how many of its repetitions hold exactly one marker, and how
    deep it is), chooses."""
    if marker:
        found.sort(key=lambda f: (ORDER[f[0].role], -f[0].share, -f[0].regularity, f[0].kind != "loop",
                                  f[0].file, f[0].line, f[0].thread))
        steps = [f for f in found if f[0].role == "step" and f[0].repeats >= 3]
        if steps:  # (the widest first): of those about as wide, one that always held one, then the innermost
            same = [f for f in steps if f[0].share >= steps[0][0].share - NEAR]
            same.sort(key=lambda f: (f[1] < f[0].repeats, -f[2]))
            found = same + [f for f in found if not any(f is g for g in same)]
    else:
        found.sort(key=lambda f: (f[0].repeats < 3, -f[0].share * f[0].regularity, -f[0].share,  # 2 turns:
                                  f[0].kind != "loop", f[0].file, f[0].line, f[0].thread))  # 1 period, no spread
    ranked = tuple(f[0] for f in found[:MOST])
    chosen, why = None, ""
    if marker:
        seen = f"{n} {marker}s were seen" + (f" (one every {step:.3g} s)" if step else "")
        steps = [i for i, c in enumerate(ranked) if c.role == "step" and c.repeats >= 3]
        if steps:
            chosen, best = steps[0], ranked[steps[0]]
            why = (f"each {what(best)} holds exactly one {marker} ({found[chosen][1]} of {best.repeats}), and "
                   f"covers {best.share:.0%} of the job's time")
        elif ranked:
            why = (f"{seen}, but no function or loop holds exactly one each, 3 times or more; each "
                   f"{what(ranked[0])} holds {ranked[0].holds}")
        else:
            why = f"{seen}, but no function or loop repeated 3 times in {w.span:.1f} s"
    elif ranked and ranked[0].share >= 0.3 and ranked[0].regularity >= 0.5 and ranked[0].repeats >= 3:
        chosen, best = 0, ranked[0]
        why = ("no optimizer step or model forward was seen: chosen by the time each repetition covers and how "
               f"regular it is ({best.share:.0%} of the time, regularity {best.regularity:.2f})")
    elif ranked:
        why = ("no optimizer step or model forward was seen, and nothing repeats regularly over most of the time "
               f"(the best covers {ranked[0].share:.0%}, regularity {ranked[0].regularity:.2f})")
    else:
        why = f"no function or loop repeated 3 times in {w.span:.1f} s"
    return Found(ranked, chosen, why, marker, _top(w))


def what(c: Candidate) -> str:
    """One repetition of the candidate, in words."""
    return f"turn of the loop at line {c.line} of {c.qualname}" if c.kind == "loop" else f"call of {c.qualname}"


def _top(w: Checked) -> Tuple[Tuple[str, int, str, float], ...]:
    counted: Dict[Tuple[int, int], int] = defaultdict(int)
    for code, line, n in w.leaves:
        counted[(code, line)] += n
    total = w.samples if w.samples > 0 else sum(counted.values())
    ranked = sorted(counted.items(), key=lambda item: (-item[1], item[0]))[:5]
    return tuple((w.codes[c][0], line, w.codes[c][2], min(1.0, n / total)) for (c, line), n in ranked)
