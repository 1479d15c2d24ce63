"""What :mod:`.stepfind` and :mod:`.stepcalls` read of a watch of ``patchkit attach --auto``: its rows, checked.

:class:`Checked` takes any value with the fields of :class:`~patchkit.attach.watchread.Watch` and keeps each row
of its type (a row that is not one is ``None`` where rows are named by index, else left out), every call's code
and thread in range, every move's and marker's call; nothing here raises on what the watch holds.
:func:`markers` says what a step is judged by (the optimizer steps when any was seen, else the outermost model
forwards) and :func:`marks` where each marker was in each call of its chain: a frame's line known exactly at a
time between two looks.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Dict, List, Optional, Tuple

HIDDEN = frozenset({"<module>", "<lambda>", "<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"})
FORWARD = "torch/nn/modules/module.py"


def num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def rows(table: Any, kinds: str) -> List[Optional[tuple]]:
    """Each row as a tuple of the kinds given ("i" int, "f" number, "s" str), or None when it is not one."""
    def good(row: Any) -> bool:
        return isinstance(row, (tuple, list)) and len(row) == len(kinds) and all(
            isinstance(v, int) and not isinstance(v, bool) if k == "i" else num(v) if k == "f" else isinstance(v, str)
            for k, v in zip(kinds, row))
    return [tuple(row) if good(row) else None for row in (table if isinstance(table, (list, tuple)) else ())]


class Checked:
    """The watch's rows, each checked; a call's code and thread indexes in range, or the call is None."""

    def __init__(self, watch: Any):
        self.interval = watch.interval if num(watch.interval) and watch.interval > 0 else 0.0
        self.first = watch.first if num(watch.first) else 0.0
        self.span = watch.last - self.first if num(watch.last) and watch.last > self.first else 0.0
        self.last = self.first + self.span
        self.samples = watch.samples if isinstance(watch.samples, int) else 0
        self.threads = [str(t) for t in watch.threads] if isinstance(watch.threads, (list, tuple)) else []
        self.codes = rows(watch.codes, "sis")
        self.cutoff = watch.cutoff.rstrip("/") + "/" if isinstance(watch.cutoff, str) and watch.cutoff else ""
        self.calls = [c if c and 0 <= c[0] < len(self.codes) and self.codes[c[0]] and 0 <= c[1] < len(self.threads)
                      else None for c in rows(watch.calls, "iiiiff")]
        self.wraps = [w for w in rows(watch.wraps, "iffii") if w and self.call(w[0])]
        self.lines, self.leaves = ([r for r in rows(table, "iii") if r and 0 <= r[0] < len(self.codes)
                                    and self.codes[r[0]] and r[2] > 0] for table in (watch.lines, watch.leaves))
        self.markers = [m for m in rows(watch.markers, "sif") if m and self.call(m[1])]

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


def markers(w: Checked) -> Tuple[str, List[Tuple[int, float]]]:
    """What a step is judged by, and each marker as (call, time)."""
    steps = [(m[1], m[2]) for m in w.markers if m[0] == "optimizer"]
    if steps:
        return "optimizer step", steps
    forward = {i for i, c in enumerate(w.calls) if c and w.codes[c[0]][0].replace("\\", "/").endswith(FORWARD)}
    outermost = [(i, w.calls[i][4]) for i in sorted(forward) if not forward.intersection(w.chain(i)[1:])]
    return ("model forward", outermost) if outermost else ("", [])


def marks(w: Checked, times: List[Tuple[int, float]]) -> Dict[int, List[Tuple[float, int, int, float, float]]]:
    """Each call a marker's chain passes through -> [(the marker's time, the call's line then, the call under it
    in the chain, that one's first look, its last look)], by time."""
    out: Dict[int, list] = defaultdict(list)
    for call, t in times:
        chain = w.chain(call)
        for child, parent in zip(chain, chain[1:]):
            row = w.calls[child]
            out[parent].append((t, row[3], child, row[4], row[5]))
    for rows_of in out.values():
        rows_of.sort()
    return out
