"""Labelled ranges: around the statement that calls a function (``around_call``), or around a whole method
(``method``).  The runtime opens and closes the range only while a capture window of the recipe is open; a
range an exception skips the end of is closed by the runtime (see patchkit.runtime.ranges)."""

from __future__ import annotations

from typing import List

from patchkit.core.model import Point
from patchkit.engine.points import Decorate, NotFound, Scan, Site, expect
from patchkit.engine.points.registry import finds



@finds("around_call")
def around_call(scan: Scan, point: Point) -> List[Site]:
    found = expect(point, [s for s in scan.statements if s.call == point.call], "statement",
                   f"calling {point.call}", scan)
    return [site for s in found for site in (Site(s.block, s.index, s.owner, "open"),
                                              Site(s.block, s.index + 1, s.owner, "close"))]


@finds("method")
def whole_method(scan: Scan, point: Point) -> List[Decorate]:
    if scan.func.asynchronous is not None:
        raise NotFound(f"{scan.qualname} is async; a range wraps plain {scan.kind}s only", scan.line(scan.func))
    if scan.yields:
        raise NotFound(f"{scan.qualname} is a generator (yield {scan.at_lines(scan.yields)}); a range around it "
                       "would close when the generator is created", scan.line(scan.yields[0]))
    return [Decorate(scan.func)]
