"""``at: after_call``: the line after the statement whose value is the call ``call:`` names.

The statement may sit at any depth of the function (inside ``with``, ``if``,
loops), never inside a nested function; its value is the call (``x = f()``,
``f()``, ``x: T = f()``, ``x += f()``, maybe awaited), so a call buried in an
argument is no anchor.  Statements on one line (``f(); a``) are one line of
the block: the new line goes after that whole line.
"""

from __future__ import annotations

from patchkit.recipe.pointkind import CALL, Example, PointKind

_WORK = "class A:\n    def run(self):\n        with self.timer():\n            out = self.work()\n        return out\n"


class AfterCall(PointKind):
    name = "after_call"
    summary = "the line after the statement whose value is the call `call:` names"
    place = CALL
    what = "after {call}"
    VALID = (
        Example(_WORK, {"at": "after_call", "call": "self.work"},
                after="class A:\n    def run(self):\n        with self.timer():\n            out = self.work()\n"
                      '            _patchkit_runtime.step("k")  # patchkit:k\n        return out\n'),
    )
    INVALID = (
        Example(_WORK, {"at": "after_call", "call": "self.other"}, reason="no statement calling self.other in A.run"),
        Example("class A:\n    def run(self):\n        return g(self.work())\n",
                {"at": "after_call", "call": "self.work"}, reason="no statement calling self.work"),
    )

    def find(self, scan, statement):
        return [scan.after(statement)]
