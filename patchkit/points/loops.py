"""Points on a loop: before it, at the start or at the end of its body.

A loop is chosen by its iterable (``enumerate``/``zip`` unwrapped), by a name
in its target, or as the innermost loop that calls a function.  A recipe
may list several selectors; the first that finds the expected number wins.
"""

from __future__ import annotations

import ast
from typing import List

from ..model import LoopSelector, Point
from . import Loop, NotFound, Scan, Site, dotted, expect, register


def _iterables(loop: ast.stmt) -> List[str]:
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return []
    it = loop.iter
    if isinstance(it, ast.Call) and dotted(it.func) in ("enumerate", "zip"):
        return [n for n in (dotted(a) for a in it.args) if n]
    name = dotted(it)
    return [name] if name else []


def _targets(node: ast.AST) -> List[str]:
    if isinstance(node, (ast.For, ast.AsyncFor)):
        node = node.target
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [n for e in node.elts for n in _targets(e)]
    if isinstance(node, ast.Starred):
        return _targets(node.value)
    return []


def select(scan: Scan, selector: LoopSelector) -> List[Loop]:
    found = scan.loops
    if selector.iter:
        found = [lp for lp in found if selector.iter in _iterables(lp.node)]
    if selector.target:
        found = [lp for lp in found if selector.target in _targets(lp.node)]
    if selector.calls:
        innermost = {id(enclosing[-1]) for name, _call, enclosing in scan.calls if name == selector.calls and enclosing}
        found = [lp for lp in found if id(lp.node) in innermost]
    if selector.while_:
        found = [lp for lp in found if isinstance(lp.node, ast.While) and any(
            isinstance(n, ast.Call) and dotted(n.func) == selector.while_ for n in ast.walk(lp.node.test))]
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


@register("before_loop")
def before_loop(scan: Scan, point: Point) -> List[Site]:
    return [Site(lp.block, lp.index, lp.owner) for lp in _choose(scan, point)]


@register("loop_start")
def loop_start(scan: Scan, point: Point) -> List[Site]:
    return [Site(lp.node.body, 0, lp.node) for lp in _choose(scan, point)]


@register("loop_end")
def loop_end(scan: Scan, point: Point) -> List[Site]:
    sites = []
    for lp in _choose(scan, point):
        skips = [c for c, enclosing in scan.continues if enclosing and enclosing[-1] is lp.node]
        if skips:
            raise NotFound(f"the loop at line {lp.node.lineno} has a continue {scan.at_lines(skips)}; "
                           "a step at the end of its body would be skipped (use loop_start)", skips[0].lineno)
        last = lp.node.body[-1]
        if isinstance(last, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
            raise NotFound(f"the loop at line {lp.node.lineno} ends with a {type(last).__name__.lower()}; "
                           "the end of its body is never reached", last.lineno)
        sites.append(Site(lp.node.body, len(lp.node.body), lp.node))
    return sites
