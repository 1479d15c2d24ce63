"""``patchkit summary``: per rank, the recorded steps and the top operators; across ranks, the slowest.

Captures of the same rank and role (several windows of one process, or
a torch trace per window) make one row: their steps side by side and
their operators added up.  The slowest rank is the one with the longest
mean step, compared with the fastest rank of the same role.

Returns data; the command line prints it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from patchkit.core.progress import BYTES, Progress, given
from patchkit.traces.read import CaptureData, Op, Step, read, size_to_read
from patchkit.traces.selftime import Names
from patchkit.traces.files import Capture, find


class RankSummary(NamedTuple):
    label: str  # "rank 0", "rank 1 (ref)", or the trace's name when its rank is unknown
    rank: Optional[int]
    role: str
    format: str  # "torch" | "ascend"
    captures: Tuple[Capture, ...]
    steps: Tuple[Step, ...]
    ops: Tuple[Op, ...]  # by self time, largest first
    steps_from: str
    ops_from: str
    notes: Tuple[str, ...] = ()  # what was cut in reading its captures (names past patchkit's bound)

    @property
    def mean_step_us(self) -> Optional[float]:
        return sum(s.duration_us for s in self.steps) / len(self.steps) if self.steps else None

    def per_step(self, op: Op) -> float:
        """An operator's self time per recorded step (its total when no step was recorded)."""
        return op.self_us / len(self.steps) if self.steps else op.self_us

    def to_json(self, top: int) -> Dict[str, Any]:
        return {"label": self.label, "rank": self.rank, "role": self.role, "format": self.format,
                "captures": [{"path": c.path, "rank_from": c.rank_from, "manifest": c.manifest or None}
                             for c in self.captures],
                "steps": [{"step": s.number, "duration_us": round(s.duration_us, 3)} for s in self.steps],
                "mean_step_us": None if self.mean_step_us is None else round(self.mean_step_us, 3),
                "steps_from": self.steps_from, "ops_from": self.ops_from, "notes": list(self.notes),
                "top_ops": [{"name": o.name, "kind": o.kind, "calls": o.calls, "self_us": round(o.self_us, 3),
                             "self_us_per_step": round(self.per_step(o), 3)} for o in self.ops[:top]]}


class Slowest(NamedTuple):
    """The slowest rank of a role, and by how much its mean step exceeds the fastest rank's."""

    role: str
    slowest: str
    slowest_mean_us: float
    fastest: str
    fastest_mean_us: float

    @property
    def delta_us(self) -> float:
        return self.slowest_mean_us - self.fastest_mean_us

    @property
    def ratio(self) -> float:
        return self.delta_us / self.fastest_mean_us if self.fastest_mean_us else 0.0

    def to_json(self) -> Dict[str, Any]:
        return {"role": self.role, "slowest": self.slowest, "slowest_mean_us": round(self.slowest_mean_us, 3),
                "fastest": self.fastest, "fastest_mean_us": round(self.fastest_mean_us, 3),
                "delta_us": round(self.delta_us, 3), "delta_percent": round(100 * self.ratio, 1)}


class Summary(NamedTuple):
    path: str
    ranks: Tuple[RankSummary, ...]
    slowest: Tuple[Slowest, ...]  # one per role with two ranks or more that recorded steps

    def to_json(self, top: int = 10) -> Dict[str, Any]:
        return {"path": self.path, "ranks": [r.to_json(top) for r in self.ranks],
                "slowest": [s.to_json() for s in self.slowest]}


def summarise(path: str, progress: Optional[Progress] = None) -> Summary:
    """Every capture under ``path``, read and grouped by rank and role.

    ``progress`` is told the bytes there are to read (:func:`patchkit.traces.read.size_to_read`), then those of
    each torch trace as the stream goes, and each torch_npu capture's once it is read.
    """
    progress = given(progress)
    names = Names()  # the operator names kept, bounded across every capture read
    captures = find(path)
    sizes = [size_to_read(c) for c in captures]
    progress.start(sum(sizes), f"reading {len(captures)} capture(s)", BYTES)
    data = []
    for number, (capture, size) in enumerate(zip(captures, sizes), 1):
        what, seen = f"{number}/{len(captures)}: {capture.label}", [0]

        def told(n: int) -> None:
            seen[0] += n
            progress.advance(n, what)

        data.append(read(capture, told, names))
        progress.advance(max(size - seen[0], 0), what)  # what the stream did not count: CSV files, a file it skipped
    return summarise_data(path, data)


def summarise_data(path: str, data: Sequence[CaptureData]) -> Summary:
    groups: Dict[Tuple[Any, ...], List[CaptureData]] = defaultdict(list)
    for d in data:
        c = d.capture
        key = (c.rank, c.role, c.format) if c.rank is not None else (None, c.role, c.format, c.path)
        groups[key].append(d)
    ranks = [_merge(items) for items in groups.values()]
    ranks.sort(key=lambda r: (r.rank is None, r.rank or 0, r.role, r.label))
    return Summary(path, tuple(ranks), _slowest(ranks))


def _merge(items: List[CaptureData]) -> RankSummary:
    first = items[0].capture
    steps: List[Step] = []
    for d in items:
        steps += d.steps
    ops: Dict[Tuple[str, str], List[float]] = defaultdict(lambda: [0, 0.0])
    for d in items:
        for op in d.ops:
            acc = ops[(op.name, op.kind)]
            acc[0] += op.calls
            acc[1] += op.self_us
    merged = sorted((Op(n, k, int(c), s) for (n, k), (c, s) in ops.items()), key=lambda o: (-o.self_us, o.name))
    return RankSummary(first.label, first.rank, first.role, first.format, tuple(d.capture for d in items),
                       tuple(steps), tuple(merged), _joined(d.steps_from for d in items),
                       _joined(d.ops_from for d in items),
                       tuple(f"{d.capture.path}: {d.note}" if len(items) > 1 else d.note for d in items if d.note))


def _joined(sources) -> str:
    return ", ".join(dict.fromkeys(s for s in sources if s))


def _slowest(ranks: Sequence[RankSummary]) -> Tuple[Slowest, ...]:
    by_role: Dict[str, List[RankSummary]] = defaultdict(list)
    for r in ranks:
        if r.mean_step_us is not None:
            by_role[r.role].append(r)
    out = []
    for role, group in sorted(by_role.items()):
        if len(group) < 2:
            continue
        slow = max(group, key=lambda r: r.mean_step_us)
        fast = min(group, key=lambda r: r.mean_step_us)
        out.append(Slowest(role, slow.label, slow.mean_step_us, fast.label, fast.mean_step_us))
    return tuple(out)
