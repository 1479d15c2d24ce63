"""Labelled ranges: around the statement that calls a function (``around_call``), or around a whole method
(``method``).  The runtime opens and closes the range only while a capture window of the recipe is open; a
range an exception skips the end of is closed by the runtime (see patchkit.runtime.ranges)."""

from __future__ import annotations

from typing import List

from patchkit.core.model import Point
from patchkit.engine.points import Decorate, NotFound, Scan, Site, expect
from patchkit.engine.points.registry import Example, kind

_WORK = "class A:\n    def run(self):\n        out = self.work()\n        return out\n"
_RANGE = {"action": "range", "name": "work"}


@kind("around_call", "a range opened right before the statement whose value is the call `call:` names, and "
      "closed right after it", needs=("call",), actions=("range",), what="around {call}", valid=[
    Example(_WORK, {"at": "around_call", "call": "self.work", **_RANGE},
            after="class A:\n    def run(self):\n"
                  '        _patchkit_runtime.range_start("k", "work")  # patchkit:k\n'
                  "        out = self.work()\n"
                  '        _patchkit_runtime.range_end("k", "work")  # patchkit:k\n'
                  "        return out\n"),
], invalid=[
    Example(_WORK, {"at": "around_call", "call": "self.rest", **_RANGE}, reason="no statement calling self.rest"),
])
def around_call(scan: Scan, point: Point) -> List[Site]:
    found = expect(point, [s for s in scan.statements if s.call == point.call], "statement",
                   f"calling {point.call}", scan)
    return [site for s in found for site in (Site(s.block, s.index, s.owner, "open"),
                                              Site(s.block, s.index + 1, s.owner, "close"))]


@kind("method", "a range around every call of the method: a decorator that closes it on every way out",
      actions=("range",), what="around the whole", valid=[
    Example(_WORK, {"at": "method", **_RANGE},
            after='class A:\n    @_patchkit_runtime.ranged("k", "work")  # patchkit:k\n'
                  "    def run(self):\n        out = self.work()\n        return out\n"),
], invalid=[
    Example("class A:\n    async def run(self):\n        return 1\n", {"at": "method", **_RANGE}, reason="is async"),
    Example("class A:\n    def run(self):\n        yield 1\n", {"at": "method", **_RANGE}, reason="is a generator"),
])
def whole_method(scan: Scan, point: Point) -> List[Decorate]:
    if scan.func.asynchronous is not None:
        raise NotFound(f"{scan.qualname} is async; a range wraps plain {scan.kind}s only", scan.line(scan.func))
    if scan.yields:
        raise NotFound(f"{scan.qualname} is a generator (yield {scan.at_lines(scan.yields)}); a range around it "
                       "would close when the generator is created", scan.line(scan.yields[0]))
    return [Decorate(scan.func)]
