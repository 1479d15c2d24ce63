"""``at: before_loop``: the line before the loop ``loop:`` selects.

A loop is chosen by its iterable (``enumerate``/``zip`` unwrapped), by a name
in its target, as the innermost loop that calls a function, or as a ``while``
loop whose condition calls one; a recipe may list several selectors, and the
first that finds the expected number wins (:mod:`patchkit.engine.points.loops`).
"""

from __future__ import annotations

from patchkit.recipe.pointkind import LOOP, Example, PointKind

_LOOP = "class A:\n    def run(self, batches):\n        for i, mb in enumerate(batches):\n            self.work(mb)\n"


class BeforeLoop(PointKind):
    name = "before_loop"
    summary = "the line before the loop `loop:` selects"
    place = LOOP
    VALID = (
        Example(_LOOP, {"at": "before_loop", "loop": {"iter": "batches"}, "action": "start"},
                after="class A:\n    def run(self, batches):\n        "
                      '_patchkit_runtime.start("k")  # patchkit:k\n'
                      "        for i, mb in enumerate(batches):\n            self.work(mb)\n"),
    )
    INVALID = (
        Example(_LOOP, {"at": "before_loop", "loop": {"iter": "other"}}, reason="no loop over other in A.run"),
    )

    def find(self, scan, loop):
        return [scan.before(loop)]
