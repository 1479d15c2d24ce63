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
from patchkit.engine.points.registry import finds




@finds("before_call", "after_call")
def next_to_call(scan: Scan, point: Point) -> List[Site]:
    found = expect(point, [s for s in scan.statements if s.call == point.call], "statement",
                   f"calling {point.call}", scan)
    shift = 1 if point.at == "after_call" else 0
    return [Site(s.block, s.index + shift, s.owner) for s in found]
