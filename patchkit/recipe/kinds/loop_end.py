"""``at: loop_end``: after the last line of the body of the loop ``loop:`` selects, where that end is reached
on every pass (selectors: :mod:`.before_loop`)."""

from __future__ import annotations

from patchkit.recipe.pointkind import LOOP_END, Example, PointKind, Refusal

_LOOP = "class A:\n    def run(self, batches):\n        for i, mb in enumerate(batches):\n            self.work(mb)\n"


class LoopEnd(PointKind):
    name = "loop_end"
    summary = "after the last line of the body of the loop `loop:` selects, when it is reached"
    place = LOOP_END
    refusals = (
        Refusal(lambda scan, loop: scan.continues_of(loop),
                "the loop at line {line} has a continue {at}; a step at the end of its body would be skipped "
                "(use loop_start)"),
        Refusal(lambda scan, loop: scan.ends_with(loop.node, "return", "raise", "break", "continue"),
                "the loop at line {line} ends with a {word}; the end of its body is never reached"),
    )
    VALID = (
        Example(_LOOP, {"at": "loop_end", "loop": {"calls": "self.work"}},
                after="class A:\n    def run(self, batches):\n        for i, mb in enumerate(batches):\n"
                      '            self.work(mb)\n            _patchkit_runtime.step("k")  # patchkit:k\n'),
    )
    INVALID = (
        Example("class A:\n    def run(self, batches):\n        for mb in batches:\n            if not mb:\n"
                "                continue\n            self.work(mb)\n",
                {"at": "loop_end", "loop": {"iter": "batches"}}, reason="has a continue at line 5"),
        Example("class A:\n    def run(self, batches):\n        for mb in batches:\n            with self.timer():\n"
                "                if self.work(mb):\n                    break\n                else:\n"
                "                    return mb\n",
                {"at": "loop_end", "loop": {"iter": "batches"}}, reason="ends with a break or return"),
    )

    def find(self, scan, loop):
        return [scan.body_end(loop.node)]
