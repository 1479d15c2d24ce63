"""Points on a loop: before it, at the start or at the end of its body.

A loop is chosen by its iterable (``enumerate``/``zip`` unwrapped), by a name
in its target, or as the innermost loop that calls a function.  A recipe
may list several selectors; the first that finds the expected number wins.
"""

from __future__ import annotations

from typing import List

import libcst as cst

from patchkit.core.model import LoopSelector, Point
from patchkit.engine.points import Loop, NotFound, Scan, Site, dotted, expect
from patchkit.engine.points.registry import Example, kind
from patchkit.engine.points.method import last_statement


def _iterables(loop: cst.CSTNode) -> List[str]:
    if not isinstance(loop, cst.For):
        return []
    it = loop.iter
    if isinstance(it, cst.Call) and dotted(it.func) in ("enumerate", "zip"):
        return [n for n in (dotted(a.value) for a in it.args if not a.star and a.keyword is None) if n]
    name = dotted(it)
    return [name] if name else []


def _targets(node: cst.CSTNode) -> List[str]:
    if isinstance(node, cst.For):
        node = node.target
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for e in node.elements for n in _targets(e.value)]
    return []


class _Callees(cst.CSTVisitor):
    """The dotted names called anywhere in an expression."""

    def __init__(self) -> None:
        super().__init__()
        self.names: List[str] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.names.append(dotted(node.func))


def _condition_calls(loop: cst.CSTNode, name: str) -> bool:
    """A while loop whose condition calls ``name`` (at any depth of the condition)."""
    if not isinstance(loop, cst.While):
        return False
    callees = _Callees()
    loop.test.visit(callees)
    return name in callees.names


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
        found = [lp for lp in found if _condition_calls(lp.node, selector.while_)]
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


_LOOP = "class A:\n    def run(self, batches):\n        for i, mb in enumerate(batches):\n            self.work(mb)\n"
_OVER = {"iter": "batches"}
_STEP = '_patchkit_runtime.step("k")  # patchkit:k\n'


@kind("before_loop", "the line before the loop `loop:` selects", needs=("loop",), valid=[
    Example(_LOOP, {"at": "before_loop", "loop": _OVER, "action": "start"},
            after="class A:\n    def run(self, batches):\n        "
                  '_patchkit_runtime.start("k")  # patchkit:k\n'
                  "        for i, mb in enumerate(batches):\n            self.work(mb)\n"),
], invalid=[
    Example(_LOOP, {"at": "before_loop", "loop": {"iter": "other"}}, reason="no loop over other in A.run"),
])
def before_loop(scan: Scan, point: Point) -> List[Site]:
    return [Site(lp.block, lp.index, lp.owner) for lp in _choose(scan, point)]


@kind("loop_start", "the first line of the body of the loop `loop:` selects", needs=("loop",), valid=[
    Example(_LOOP, {"at": "loop_start", "loop": {"target": "mb"}},
            after="class A:\n    def run(self, batches):\n        for i, mb in enumerate(batches):\n"
                  "            " + _STEP + "            self.work(mb)\n"),
], invalid=[
    Example(_LOOP, {"at": "loop_start", "loop": {"calls": "self.rest"}}, reason="no loop innermost calling self.rest"),
])
def loop_start(scan: Scan, point: Point) -> List[Site]:
    return [Site(lp.node.body, 0, lp.node) for lp in _choose(scan, point)]


@kind("loop_end", "after the last line of the body of the loop `loop:` selects, when it is reached",
      needs=("loop",), valid=[
    Example(_LOOP, {"at": "loop_end", "loop": {"calls": "self.work"}},
            after="class A:\n    def run(self, batches):\n        for i, mb in enumerate(batches):\n"
                  "            self.work(mb)\n            " + _STEP),
], invalid=[
    Example("class A:\n    def run(self, batches):\n        for mb in batches:\n            if not mb:\n"
            "                continue\n            self.work(mb)\n", {"at": "loop_end", "loop": _OVER},
            reason="has a continue at line 5"),
])
def loop_end(scan: Scan, point: Point) -> List[Site]:
    sites = []
    for lp in _choose(scan, point):
        skips = [c for c, enclosing in scan.continues if enclosing and enclosing[-1] is lp.node]
        if skips:
            raise NotFound(f"the loop at line {scan.line(lp.node)} has a continue {scan.at_lines(skips)}; "
                           "a step at the end of its body would be skipped (use loop_start)", scan.line(skips[0]))
        last = last_statement(lp.node.body)
        if isinstance(last, (cst.Return, cst.Raise, cst.Break, cst.Continue)):
            raise NotFound(f"the loop at line {scan.line(lp.node)} ends with a {type(last).__name__.lower()}; "
                           "the end of its body is never reached", scan.line(last))
        sites.append(Site(lp.node.body, len(lp.node.body.body), lp.node))
    return sites
