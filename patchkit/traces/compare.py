"""``patchkit compare A B``: two captures (or two folders of them) side by side.

Ranks are matched by rank and role (two single captures are matched
whatever their ranks).  For each pair: the mean step time of A and B and
the difference, and the operators whose self time per step changed most.
Per step, because two runs rarely record the same number of steps.

For torch_npu data, ``msprof-analyze compare`` (an optional extra) does the
detailed comparison (operators, kernels, communication, memory, in an
Excel workbook); :func:`msprof_commands` names the calls, one per matched
rank; :func:`patchkit.traces.analyse.run_tool` runs them.

Returns data; the command line prints it.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from patchkit.traces.analyse import MSPROF
from patchkit.traces.summary import RankSummary, Summary


class OpDelta(NamedTuple):
    name: str
    kind: str
    a_us: float  # self time per step in A
    b_us: float

    @property
    def delta_us(self) -> float:
        return self.b_us - self.a_us


class RankPair(NamedTuple):
    label: str
    a: RankSummary
    b: RankSummary
    ops: Tuple[OpDelta, ...]  # the largest changes first

    @property
    def a_mean_us(self) -> Optional[float]:
        return self.a.mean_step_us

    @property
    def b_mean_us(self) -> Optional[float]:
        return self.b.mean_step_us

    @property
    def delta_us(self) -> Optional[float]:
        if self.a_mean_us is None or self.b_mean_us is None:
            return None
        return self.b_mean_us - self.a_mean_us

    def to_json(self) -> Dict[str, Any]:
        def us(value):
            return None if value is None else round(value, 3)

        delta = self.delta_us
        return {"label": self.label, "a": self.a.label, "b": self.b.label,
                "a_steps": len(self.a.steps), "b_steps": len(self.b.steps),
                "a_mean_step_us": us(self.a_mean_us), "b_mean_step_us": us(self.b_mean_us),
                "delta_us": us(delta),
                "delta_percent": round(100 * delta / self.a_mean_us, 1) if delta is not None and self.a_mean_us else None,
                "ops": [{"name": o.name, "kind": o.kind, "a_us_per_step": us(o.a_us), "b_us_per_step": us(o.b_us),
                         "delta_us": us(o.delta_us)} for o in self.ops]}


class Comparison(NamedTuple):
    a: Summary
    b: Summary
    pairs: Tuple[RankPair, ...]
    only_a: Tuple[str, ...]  # labels with no match in B
    only_b: Tuple[str, ...]

    def to_json(self) -> Dict[str, Any]:
        return {"a": self.a.path, "b": self.b.path, "ranks": [p.to_json() for p in self.pairs],
                "only_in_a": list(self.only_a), "only_in_b": list(self.only_b)}


def compare(a: Summary, b: Summary, top: int = 10) -> Comparison:
    pairs: List[RankPair] = []
    if len(a.ranks) == 1 and len(b.ranks) == 1:
        matched = [(a.ranks[0], b.ranks[0])]
    else:
        by_key = {_key(r): r for r in b.ranks}
        matched = [(r, by_key[_key(r)]) for r in a.ranks if _key(r) in by_key]
    for ra, rb in matched:
        label = ra.label if ra.label == rb.label else f"{ra.label} / {rb.label}"
        pairs.append(RankPair(label, ra, rb, _op_deltas(ra, rb, top)))
    used_a = {id(ra) for ra, _ in matched}
    used_b = {id(rb) for _, rb in matched}
    return Comparison(a, b, tuple(pairs), tuple(r.label for r in a.ranks if id(r) not in used_a),
                      tuple(r.label for r in b.ranks if id(r) not in used_b))


def _key(r: RankSummary) -> Tuple[Any, ...]:
    return (r.rank, r.role) if r.rank is not None else (r.label, r.role)


def _op_deltas(a: RankSummary, b: RankSummary, top: int) -> Tuple[OpDelta, ...]:
    per_a = {(o.name, o.kind): a.per_step(o) for o in a.ops}
    per_b = {(o.name, o.kind): b.per_step(o) for o in b.ops}
    deltas = [OpDelta(name, kind, per_a.get((name, kind), 0.0), per_b.get((name, kind), 0.0))
              for name, kind in dict.fromkeys(list(per_a) + list(per_b))]
    deltas.sort(key=lambda d: (-abs(d.delta_us), -max(d.a_us, d.b_us), d.name))
    return tuple(deltas[:top])


# ---------------------------------------------------------------- msprof-analyze compare


def msprof_commands(comparison: Comparison, output_dir: str, tool: str = MSPROF) -> List[Tuple[Tuple[str, ...], str]]:
    """(``msprof-analyze compare -d B -bp A -o DIR``, DIR) per matched pair of torch_npu captures; A is the baseline."""
    commands = []
    for pair in comparison.pairs:
        if pair.a.format != "ascend" or pair.b.format != "ascend":
            continue
        where = os.path.join(output_dir, "msprof-compare-" + _folder_name(pair.label))
        commands.append(((tool, "compare", "-d", pair.b.captures[0].path, "-bp", pair.a.captures[0].path,
                          "-o", where), where))
    return commands


def _folder_name(label: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label.replace(" ", "")) or "capture"
