"""``at: around_call``: a labelled range opened right before the statement whose value is the call ``call:``
names and closed right after it.  The runtime opens and closes it only while a capture window of the recipe is
open; a range an exception skips the end of is closed by the runtime (:mod:`patchkit.runtime.ranges`)."""

from __future__ import annotations

from patchkit.recipe.pointkind import CALL, Example, PointKind

_WORK = "class A:\n    def run(self):\n        out = self.work()\n        return out\n"


class AroundCall(PointKind):
    name = "around_call"
    summary = ("a range opened right before the statement whose value is the call `call:` names, and closed right "
               "after it")
    place = CALL
    actions = ("range",)
    what = "around {call}"
    VALID = (
        Example(_WORK, {"at": "around_call", "call": "self.work", "action": "range", "name": "work"},
                after="class A:\n    def run(self):\n"
                      '        _patchkit_runtime.range_start("k", "work")  # patchkit:k\n'
                      "        out = self.work()\n"
                      '        _patchkit_runtime.range_end("k", "work")  # patchkit:k\n'
                      "        return out\n"),
    )
    INVALID = (
        Example(_WORK, {"at": "around_call", "call": "self.rest", "action": "range", "name": "work"},
                reason="no statement calling self.rest"),
    )

    def find(self, scan, statement):
        return [scan.before(statement, "open"), scan.after(statement, "close")]
