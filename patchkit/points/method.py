"""Points on the method itself: its start, its end, and every way out of it."""

from __future__ import annotations

from typing import List

import libcst as cst

from ..model import Point
from . import Decorate, NotFound, Scan, Site, register

_ENDS = (cst.Return, cst.Raise)


def _body(scan: Scan) -> cst.IndentedBlock:
    body = scan.func.body
    if not isinstance(body, cst.IndentedBlock):
        raise NotFound(f"{scan.qualname} is written on one line; patchkit only adds whole lines",
                       scan.lines(scan.func))
    return body


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


@register("method_start")
def method_start(scan: Scan, point: Point) -> List[Site]:
    body = _body(scan)
    return [Site(body, 1 if body.body and _is_docstring(body.body[0]) else 0)]


@register("method_end")
def method_end(scan: Scan, point: Point) -> List[Site]:
    body = _body(scan)
    last = body.body[-1]
    if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], _ENDS):
        raise NotFound(f"{scan.qualname} ends with a {type(last.body[-1]).__name__.lower()} "
                       f"at line {scan.lines(last)}; the end of the method is never reached there "
                       "(use `at: on_exit` to step on every way out)", scan.lines(last))
    return [Site(body, len(body.body))]


@register("on_exit")
def on_exit(scan: Scan, point: Point) -> List[Decorate]:
    _body(scan)
    if scan.func.asynchronous is not None:
        raise NotFound(f"{scan.qualname} is async; on_exit wraps plain methods only", scan.lines(scan.func))
    if scan.yields:
        raise NotFound(f"{scan.qualname} is a generator (yield {scan.at_lines(scan.yields)}); "
                       "on_exit would step when the generator is created, not when it finishes",
                       scan.lines(scan.yields[0]))
    return [Decorate(scan.func)]
