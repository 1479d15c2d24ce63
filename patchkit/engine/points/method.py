"""Points on the method (or module-level function) itself: its start, its end, and every way out of it."""

from __future__ import annotations

from typing import List

import libcst as cst

from patchkit.core.model import Point
from patchkit.engine.points import Decorate, NotFound, Scan, Site
from patchkit.engine.points.registry import finds


def last_statement(block: cst.BaseSuite) -> cst.CSTNode:
    """The last statement of a block: the last small statement of its last line (``a; return b``: the return)."""
    last = block.body[-1]
    return last.body[-1] if isinstance(last, cst.SimpleStatementLine) else last


@finds("method_start")
def method_start(scan: Scan, point: Point) -> List[Site]:
    return [Site(scan.func.body, 0 if scan.func.get_docstring(clean=False) is None else 1, scan.func)]


@finds("method_end")
def method_end(scan: Scan, point: Point) -> List[Site]:
    last = last_statement(scan.func.body)
    if isinstance(last, (cst.Return, cst.Raise)):
        raise NotFound(f"{scan.qualname} ends with a {type(last).__name__.lower()} at line {scan.line(last)}; "
                       f"the end of the {scan.kind} is never reached there (use `at: on_exit` to step on every way out)",
                       scan.line(last))
    return [Site(scan.func.body, len(scan.func.body.body), scan.func)]


@finds("on_exit")
def on_exit(scan: Scan, point: Point) -> List[Decorate]:
    if scan.func.asynchronous is not None:
        raise NotFound(f"{scan.qualname} is async; on_exit wraps plain {scan.kind}s only", scan.line(scan.func))
    if scan.yields:
        raise NotFound(f"{scan.qualname} is a generator (yield {scan.at_lines(scan.yields)}); "
                       "on_exit would step when the generator is created, not when it finishes",
                       scan.line(scan.yields[0]))
    return [Decorate(scan.func)]
