"""A job's step found from what ``patchkit attach --auto``'s watcher saw of its threads' stacks, with no recipe.

The step is what runs once per training step (or once per model forward, for an inference loop): a function
entered again and again, or a loop turning in a long-lived frame.  :func:`find` reads a
:class:`~patchkit.attach.watchread.Watch` (only its attributes: any value with the same fields will do) and the
job's files (``source_of``: the caller's checked reader, ``None`` for a file not to be read) and returns every
:class:`Candidate`, ranked, with the one chosen and why (:class:`Found`):

- a function candidate is one code in one thread with at least 3 complete calls (not the module's code, a lambda,
  a comprehension or a function nested twice: no recipe point can name those; not torch's own code); a loop
  candidate, a loop of a function (:mod:`.steploops`) with a complete turn, its turns the frame's wraps;
- a step is judged by the markers: the optimizer steps when any was seen, else the model forwards (the outermost
  calls of ``torch/nn/modules/module.py``); each marker is in the repetition its chain of parent calls leads to;
- the step is a candidate each of whose repetitions holds exactly one marker (of those, the one that covers the
  most of the job's time: a loop's turn loading its batch over a helper it calls); the others are ``inner``
  (micro-batches, a helper called per micro-batch) or ``outer`` (epochs);
- with no marker, the candidate that covers the most of the time most regularly is chosen, when clear enough
  (seen repeating 3 times at least: two turns give one period, which says nothing of how regular it is).

Steps shorter than about 3 samples cannot be told apart: a function whose calls were each seen in one sample,
or a loop whose turns are under 2.5 samples apart, holding no marker, is no candidate.  Nothing here raises on
what the watch holds: rows that make no sense (indexes out of range, loops of parents) are skipped.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from patchkit.attach.steploops import Sources, turn_index, turned, turns

HIDDEN = frozenset({"<module>", "<lambda>", "<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"})
FORWARD = "torch/nn/modules/module.py"
MOST = 20  # candidates listed


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


class Found(NamedTuple):
    candidates: Tuple[Candidate, ...]  # ranked, best first
    chosen: Optional[int]  # index into candidates, or None when no step is clear
    why: str  # one line
    marker: str  # "optimizer step", "model forward" or ""
    top: Tuple[Tuple[str, int, str, float], ...]  # the busiest leaves: (file, line, qualname, share of samples)


def _num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _rows(rows: Any, kinds: str) -> List[Optional[tuple]]:
    """Each row as a tuple of the kinds given ("i" int, "f" number, "s" str), or None when it is not one."""
    def good(row: Any) -> bool:
        return isinstance(row, (tuple, list)) and len(row) == len(kinds) and all(
            isinstance(v, int) and not isinstance(v, bool) if k == "i" else _num(v) if k == "f" else isinstance(v, str)
            for k, v in zip(kinds, row))
    return [tuple(row) if good(row) else None for row in (rows if isinstance(rows, (list, tuple)) else ())]


class _Watch:
    """The watch's rows, each checked; a call's code and thread indexes in range, or the call is None."""

    def __init__(self, watch: Any):
        self.interval = watch.interval if _num(watch.interval) and watch.interval > 0 else 0.0
        self.first = watch.first if _num(watch.first) else 0.0
        self.span = watch.last - self.first if _num(watch.last) and watch.last > self.first else 0.0
        self.last = self.first + self.span
        self.samples = watch.samples if isinstance(watch.samples, int) else 0
        self.threads = [str(t) for t in watch.threads] if isinstance(watch.threads, (list, tuple)) else []
        self.codes = _rows(watch.codes, "sis")
        self.cutoff = watch.cutoff.rstrip("/") + "/" if isinstance(watch.cutoff, str) and watch.cutoff else ""
        self.calls = [c if c and 0 <= c[0] < len(self.codes) and self.codes[c[0]] and 0 <= c[1] < len(self.threads)
                      else None for c in _rows(watch.calls, "iiiiff")]
        self.wraps = [w for w in _rows(watch.wraps, "iffii") if w and self.call(w[0])]
        self.lines, self.leaves = ([r for r in _rows(rows, "iii") if r and 0 <= r[0] < len(self.codes)
                                    and self.codes[r[0]] and r[2] > 0] for rows in (watch.lines, watch.leaves))
        self.markers = [m for m in _rows(watch.markers, "sif") if m and self.call(m[1])]

    def call(self, index: int) -> Optional[tuple]:
        return self.calls[index] if 0 <= index < len(self.calls) else None

    def chain(self, index: int) -> List[int]:
        """The call and its parents up to the root, each once (a loop of parents ends there)."""
        out, seen = [], set()
        while self.call(index) and index not in seen and len(out) < 4096:
            out.append(index)
            seen.add(index)
            index = self.calls[index][2]
        return out

    def nameable(self, code: int) -> bool:
        """A function a recipe point can name (in a file, not ``<string>``), and not torch's own."""
        file, _, qualname = self.codes[code]
        return not (self.cutoff and file.startswith(self.cutoff)) and not file.startswith("<") \
            and qualname not in HIDDEN and qualname.count("<locals>") <= 1

    def complete(self, call: tuple) -> bool:
        return self.first < call[4] and call[5] < self.last


class _Rep(NamedTuple):
    """A candidate before its markers are counted."""
    kind: str
    code: int
    thread: int
    line: int
    periods: List[float]
    share: float
    counts: Dict[Any, int]  # each complete repetition -> markers in it


def _markers(w: _Watch) -> Tuple[str, List[Tuple[int, float]]]:
    """What a step is judged by, and each marker as (call, time)."""
    steps = [(m[1], m[2]) for m in w.markers if m[0] == "optimizer"]
    if steps:
        return "optimizer step", steps
    forward = {i for i, c in enumerate(w.calls) if c and w.codes[c[0]][0].replace("\\", "/").endswith(FORWARD)}
    outermost = [(i, w.calls[i][4]) for i in sorted(forward) if not forward.intersection(w.chain(i)[1:])]
    return ("model forward", outermost) if outermost else ("", [])


def _functions(w: _Watch) -> List[_Rep]:
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
                         min(1.0, time / w.span), {i: 0 for _, i in done}))
    return reps


def _loops(w: _Watch, sources: Sources) -> Tuple[List[_Rep], Dict[int, list]]:
    """The loop candidates, and for each call that turned one: [(the loop, its rep's counts, its wraps)]."""
    by_call: Dict[int, List[tuple]] = defaultdict(list)
    for wrap in w.wraps:
        by_call[wrap[0]].append(wrap)
    found: Dict[Tuple[int, int, int], Tuple[Any, List[float], Dict[Any, int]]] = {}
    placed: Dict[int, list] = defaultdict(list)
    for call, wraps in by_call.items():
        code, thread = w.calls[call][:2]
        file, firstlineno, qualname = w.codes[code]
        if len(wraps) < 2 or not w.nameable(code):
            continue
        loops = sources.loops(file, firstlineno, qualname)
        turned_at: Dict[int, List[tuple]] = defaultdict(list)
        for _, t_prev, t, a, b in sorted(wraps, key=lambda r: r[2]):
            i = turned(loops, a, b)
            if i is not None:
                turned_at[i].append((t_prev, t, b))
        for i, own in turned_at.items():
            around = [r[1] for j, rs in turned_at.items() if loops[j].encloses(loops[i]) for r in rs]
            complete = turns(own, around)
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
        reps.append(_Rep("loop", code, thread, header, periods, min(1.0, inside * w.interval / w.span), counts))
    return reps, placed


def _count(w: _Watch, reps: List[_Rep], placed: Dict[int, list], times: List[Tuple[int, float]]) -> None:
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
    w = _Watch(watch)
    sources = Sources(source_of)
    marker, times = _markers(w)
    loops, placed = _loops(w, sources) if w.span else ([], {})
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
        role, holds = _role(marker, per_step, held, period, step)
        file, _, qualname = w.codes[rep.code]
        found.append((Candidate(rep.kind, file, qualname, rep.line, sources.line(file, rep.line),
                                w.threads[rep.thread], len(held), round(period, 6), round(regular, 4),
                                round(rep.share, 4), per_step, holds, role),
                      held.count(1)))
    return _choose(w, marker, len(times), step, found)


def _role(marker: str, per_step: Optional[float], held: List[int], period: float,
          step: Optional[float]) -> Tuple[str, str]:
    """The candidate's role among the steps, and what one repetition holds in words."""
    if per_step is None:
        return "", ""
    training = marker == "optimizer step"
    if 0.9 <= per_step <= 1.1 and held.count(1) >= 0.8 * len(held):
        return "step", f"one {marker}"
    if per_step < 0.9 and step and period < step:
        k = max(2, round(step / period))
        return "inner", (f"1/{k} of an optimizer step (a micro-batch: {k} per step)" if training
                         else f"1/{k} of a model forward ({k} per forward)")
    if per_step > 1.1:
        return "outer", f"{round(per_step)} {marker}s" + (" (an epoch?)" if training else "")
    return "", f"no {marker}" if not per_step else f"{per_step:.2f} {marker}s on average, not one each"


ORDER = {"step": 0, "inner": 1, "outer": 2, "": 3}


def _choose(w: _Watch, marker: str, n: int, step: Optional[float], found: List[Tuple[Candidate, int]]) -> Found:
    """Ranks the candidates (``found``: each with how many of its repetitions hold exactly one marker), chooses."""
    if marker:
        found.sort(key=lambda f: (ORDER[f[0].role], -f[0].share, -f[0].regularity, f[0].kind != "loop",
                                  f[0].file, f[0].line, f[0].thread))
    else:
        found.sort(key=lambda f: (f[0].repeats < 3, -f[0].share * f[0].regularity, -f[0].share,  # 2 turns:
                                  f[0].kind != "loop", f[0].file, f[0].line, f[0].thread))  # 1 period, no spread
    ranked = tuple(c for c, _ in found[:MOST])
    chosen, why = None, ""
    if marker:
        seen = f"{n} {marker}s were seen" + (f" (one every {step:.3g} s)" if step else "")
        steps = [i for i, c in enumerate(ranked) if c.role == "step" and c.repeats >= 3]
        if steps:
            chosen, best = steps[0], ranked[steps[0]]
            why = (f"each {_what(best)} holds exactly one {marker} ({found[chosen][1]} of {best.repeats}), and "
                   f"covers {best.share:.0%} of the job's time")
        elif ranked:
            why = (f"{seen}, but no function or loop holds exactly one each, 3 times or more; each "
                   f"{_what(ranked[0])} holds {ranked[0].holds}")
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


def _what(c: Candidate) -> str:
    return f"turn of the loop at line {c.line} of {c.qualname}" if c.kind == "loop" else f"call of {c.qualname}"


def _top(w: _Watch) -> Tuple[Tuple[str, int, str, float], ...]:
    counted: Dict[Tuple[int, int], int] = defaultdict(int)
    for code, line, n in w.leaves:
        counted[(code, line)] += n
    total = w.samples if w.samples > 0 else sum(counted.values())
    ranked = sorted(counted.items(), key=lambda item: (-item[1], item[0]))[:5]
    return tuple((w.codes[c][0], line, w.codes[c][2], min(1.0, n / total)) for (c, line), n in ranked)
