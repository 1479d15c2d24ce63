"""Which loops a point's ``loop:`` selects (for the kinds whose place is a loop), and a selector for each loop.

A loop is chosen by its iterable (``enumerate``/``zip`` unwrapped), by a name
in its target, or as the innermost loop that calls a function.  A recipe
may list several selectors; the first that finds the expected number wins.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from patchkit.core.model import LoopSelector, Point
from patchkit.engine.points.scan import Loop, NotFound, Scan, dotted, expect

Spec = Dict[str, Any]  # a point's mapping as a recipe writes it (``loop: {iter: batches}``)


def iterables(loop: cst.CSTNode) -> List[str]:
    if not isinstance(loop, cst.For):
        return []
    it = loop.iter
    if isinstance(it, cst.Call) and dotted(it.func) in ("enumerate", "zip"):
        return [n for n in (dotted(a.value) for a in it.args if not a.star and a.keyword is None) if n]
    name = dotted(it)
    return [name] if name else []


def loop_targets(node: cst.CSTNode) -> List[str]:
    if isinstance(node, cst.For):
        node = node.target
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for e in node.elements for n in loop_targets(e.value)]
    return []


class Callees(cst.CSTVisitor):
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
    callees = Callees()
    loop.test.visit(callees)
    return name in callees.names


def select(scan: Scan, selector: LoopSelector) -> List[Loop]:
    found = scan.loops
    if selector.iter:
        found = [lp for lp in found if selector.iter in iterables(lp.node)]
    if selector.target:
        found = [lp for lp in found if selector.target in loop_targets(lp.node)]
    if selector.calls:
        innermost = {id(enclosing[-1]) for name, _call, enclosing in scan.calls if name == selector.calls and enclosing}
        found = [lp for lp in found if id(lp.node) in innermost]
    if selector.while_:
        found = [lp for lp in found if _condition_calls(lp.node, selector.while_)]
    return found


def choose(scan: Scan, point: Point) -> List[Loop]:
    """The loops a point's ``loop:`` selects: the first of its selectors that finds the expected number."""
    failures = []
    for selector in point.loop:
        try:
            return expect(point, select(scan, selector), "loop", selector.describe(), scan)
        except NotFound as exc:
            failures.append(exc)
    if len(failures) == 1:
        raise failures[0]
    raise NotFound("; ".join(f.reason for f in failures), failures[0].line, failures[0].hint)


def loop_selector(scan: Scan, loop: Loop) -> Tuple[Spec, int]:
    """A ``loop:`` mapping that selects this loop, and how many loops it selects (1 when it picks it alone)."""
    options: List[Spec] = [{"iter": name} for name in iterables(loop.node)]
    options += [{"target": name} for name in loop_targets(loop.node)]
    options += [{"iter": i["iter"], "target": t["target"]} for i in options if "iter" in i
                for t in options if "target" in t]
    if isinstance(loop.node, cst.While):
        callees = Callees()
        loop.node.test.visit(callees)
        options += [{"while": name} for name in callees.names if name]
    options += [{"calls": name} for name, _call, around in scan.calls if around and around[-1] is loop.node]
    best: Optional[Tuple[Spec, int]] = None
    for option in options:
        found = selected(scan, option)
        if any(f.node is loop.node for f in found):
            if len(found) == 1:
                return option, 1
            best = best or (option, len(found))
    return best or ({}, 0)


def selected(scan: Scan, option: Spec) -> List[Loop]:
    """The loops a ``loop:`` mapping selects."""
    return select(scan, LoopSelector(**{("while_" if k == "while" else k): v for k, v in option.items()}))
