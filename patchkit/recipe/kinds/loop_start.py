"""``at: loop_start``: the first line of the body of the loop ``loop:`` selects (selectors: :mod:`.before_loop`)."""

from __future__ import annotations

from patchkit.recipe.pointkind import LOOP, Example, PointKind

_LOOP = "class A:\n    def run(self, batches):\n        for i, mb in enumerate(batches):\n            self.work(mb)\n"


class LoopStart(PointKind):
    name = "loop_start"
    summary = "the first line of the body of the loop `loop:` selects"
    place = LOOP
    VALID = (
        Example(_LOOP, {"at": "loop_start", "loop": {"target": "mb"}},
                after="class A:\n    def run(self, batches):\n        for i, mb in enumerate(batches):\n"
                      '            _patchkit_runtime.step("k")  # patchkit:k\n            self.work(mb)\n'),
    )
    INVALID = (
        Example(_LOOP, {"at": "loop_start", "loop": {"calls": "self.rest"}},
                reason="no loop innermost calling self.rest"),
    )

    def find(self, scan, loop):
        return [scan.body_start(loop.node)]
