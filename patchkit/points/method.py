"""Points on the method (or module-level function) itself: its start, its end, and every way out of it."""

from __future__ import annotations

import ast
from typing import List

from ..model import Point
from . import Decorate, NotFound, Scan, Site, register


def is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


@register("method_start")
def method_start(scan: Scan, point: Point) -> List[Site]:
    body = scan.func.body
    return [Site(body, 1 if is_docstring(body[0]) else 0, scan.func)]


@register("method_end")
def method_end(scan: Scan, point: Point) -> List[Site]:
    body = scan.func.body
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        raise NotFound(f"{scan.qualname} ends with a {type(last).__name__.lower()} at line {last.lineno}; "
                       f"the end of the {scan.kind} is never reached there (use `at: on_exit` to step on every way out)",
                       last.lineno)
    return [Site(body, len(body), scan.func)]


@register("on_exit")
def on_exit(scan: Scan, point: Point) -> List[Decorate]:
    if isinstance(scan.func, ast.AsyncFunctionDef):
        raise NotFound(f"{scan.qualname} is async; on_exit wraps plain {scan.kind}s only", scan.func.lineno)
    if scan.yields:
        raise NotFound(f"{scan.qualname} is a generator (yield {scan.at_lines(scan.yields)}); "
                       "on_exit would step when the generator is created, not when it finishes",
                       scan.yields[0].lineno)
    return [Decorate(scan.func)]
