"""Points on a loop: before it, at the start or at the end of its body.

A loop is chosen by its iterable (``enumerate``/``zip`` unwrapped), by a name
in its target, or as the innermost loop that calls a function.  A recipe
may list several selectors; the first that finds the expected number wins.
"""

from __future__ import annotations

from typing import List

import libcst as cst
from libcst.helpers import get_full_name_for_node

from ..model import LoopSelector, Point
from . import Loop, NotFound, Scan, Site, expect, register


def _iterables(loop: cst.CSTNode) -> List[str]:
    if not isinstance(loop, cst.For):
        return []
    it = loop.iter
    if isinstance(it, cst.Call) and get_full_name_for_node(it.func) in ("enumerate", "zip"):
        return [n for n in (get_full_name_for_node(a.value) for a in it.args) if n]
    name = get_full_name_for_node(it)
    return [name] if name else []


def _targets(node: cst.CSTNode) -> List[str]:
    if isinstance(node, cst.For):
        node = node.target
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for e in node.elements for n in _targets(e.value)]
    return []


def _calling(scan: Scan, callee: str) -> List[cst.CSTNode]:
    """Innermost loops that contain a call to ``callee``."""
    loops = []
    for name, _call, enclosing in scan.calls:
        if name == callee and enclosing and enclosing[-1] not in loops:
            loops.append(enclosing[-1])
    return loops


def select(scan: Scan, selector: LoopSelector) -> List[Loop]:
    found = scan.loops
    if selector.iter:
        found = [lp for lp in found if selector.iter in _iterables(lp.node)]
    if selector.target:
        found = [lp for lp in found if selector.target in _targets(lp.node)]
    if selector.calls:
        wanted = _calling(scan, selector.calls)
        found = [lp for lp in found if any(lp.node is w for w in wanted)]
    return found


def _choose(scan: Scan, point: Point) -> List[Loop]:
    failures = []
    for selector in point.loop:
        try:
            return expect(point, select(scan, selector), "loop", selector.describe(), scan)
        except NotFound as exc:
            failures.append(exc)
    if len(failures) == 1:
        raise failures[0]
    raise NotFound("; ".join(f.reason for f in failures), failures[0].line)


def _body(scan: Scan, loop: Loop) -> cst.IndentedBlock:
    body = loop.node.body
    if not isinstance(body, cst.IndentedBlock):
        raise NotFound(f"the loop at line {scan.lines(loop.node)} is written on one line; "
                       "patchkit only adds whole lines", scan.lines(loop.node))
    return body


@register("before_loop")
def before_loop(scan: Scan, point: Point) -> List[Site]:
    return [Site(lp.block, lp.index) for lp in _choose(scan, point)]


@register("loop_start")
def loop_start(scan: Scan, point: Point) -> List[Site]:
    return [Site(_body(scan, lp), 0) for lp in _choose(scan, point)]


@register("loop_end")
def loop_end(scan: Scan, point: Point) -> List[Site]:
    sites = []
    for lp in _choose(scan, point):
        body = _body(scan, lp)
        skips = [c for c, enclosing in scan.continues if enclosing and enclosing[-1] is lp.node]
        if skips:
            raise NotFound(f"the loop at line {scan.lines(lp.node)} has a continue {scan.at_lines(skips)}; "
                           "a step at the end of its body would be skipped (use loop_start)",
                           scan.lines(skips[0]))
        last = body.body[-1]
        if isinstance(last, cst.SimpleStatementLine) and isinstance(
            last.body[-1], (cst.Return, cst.Raise, cst.Break, cst.Continue)
        ):
            raise NotFound(f"the loop at line {scan.lines(lp.node)} ends with a "
                           f"{type(last.body[-1]).__name__.lower()}; the end of its body is never reached",
                           scan.lines(last))
        sites.append(Site(body, len(body.body)))
    return sites
