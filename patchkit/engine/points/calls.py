"""Points next to the statement that calls a given function: ``after_call`` and ``before_call``.

The statement may sit at any depth in the method (inside ``with``, ``if``,
loops), never inside a nested function; the line goes into the same block.
The call must be the statement's value (``x = f()``, ``f()``, ``x: T = f()``,
``x += f()``, possibly awaited), so a call buried in an argument is not an anchor.
Statements written on one line (``a; f()``) are one line of the block: the new
line goes before or after that whole line.
"""

from __future__ import annotations

from typing import List

from patchkit.core.model import Point
from patchkit.engine.points import Scan, Site, expect
from patchkit.engine.points.registry import Example, kind


_WORK = "class A:\n    def run(self):\n        with self.timer():\n            out = self.work()\n        return out\n"


@kind("before_call", "the line before the statement whose value is the call `call:` names", needs=("call",),
      what="before {call}", valid=[
    Example(_WORK, {"at": "before_call", "call": "self.work", "action": "start"},
            after="class A:\n    def run(self):\n        with self.timer():\n"
                  '            _patchkit_runtime.start("k")  # patchkit:k\n            out = self.work()\n'
                  "        return out\n"),
], invalid=[
    Example("class A:\n    def run(self):\n        self.work()\n        self.work()\n",
            {"at": "before_call", "call": "self.work"}, reason="found 2 statements calling self.work"),
])
@kind("after_call", "the line after the statement whose value is the call `call:` names", needs=("call",),
      what="after {call}", valid=[
    Example(_WORK, {"at": "after_call", "call": "self.work"},
            after="class A:\n    def run(self):\n        with self.timer():\n            out = self.work()\n"
                  '            _patchkit_runtime.step("k")  # patchkit:k\n        return out\n'),
], invalid=[
    Example(_WORK, {"at": "after_call", "call": "self.other"}, reason="no statement calling self.other in A.run"),
    Example("class A:\n    def run(self):\n        return g(self.work())\n", {"at": "after_call", "call": "self.work"},
            reason="no statement calling self.work"),
])
def next_to_call(scan: Scan, point: Point) -> List[Site]:
    found = expect(point, [s for s in scan.statements if s.call == point.call], "statement",
                   f"calling {point.call}", scan)
    shift = 1 if point.at == "after_call" else 0
    return [Site(s.block, s.index + shift, s.owner) for s in found]
