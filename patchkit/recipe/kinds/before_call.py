"""``at: before_call``: the line before the statement whose value is the call ``call:`` names (the statements
``after_call`` takes: :mod:`.after_call`)."""

from __future__ import annotations

from patchkit.recipe.pointkind import CALL, Example, PointKind

_WORK = "class A:\n    def run(self):\n        with self.timer():\n            out = self.work()\n        return out\n"


class BeforeCall(PointKind):
    name = "before_call"
    summary = "the line before the statement whose value is the call `call:` names"
    place = CALL
    what = "before {call}"
    VALID = (
        Example(_WORK, {"at": "before_call", "call": "self.work", "action": "start"},
                after="class A:\n    def run(self):\n        with self.timer():\n"
                      '            _patchkit_runtime.start("k")  # patchkit:k\n            out = self.work()\n'
                      "        return out\n"),
    )
    INVALID = (
        Example("class A:\n    def run(self):\n        self.work()\n        self.work()\n",
                {"at": "before_call", "call": "self.work"}, reason="found 2 statements calling self.work"),
    )

    def find(self, scan, statement):
        return [scan.before(statement)]
