"""Points on the method (or module-level function) itself: its start, its end, and every way out of it."""

from __future__ import annotations

from typing import List

import libcst as cst

from patchkit.core.model import Point
from patchkit.engine.points import Decorate, NotFound, Scan, Site
from patchkit.engine.points.registry import Example, kind


def last_statement(block: cst.BaseSuite) -> cst.CSTNode:
    """The last statement of a block: the last small statement of its last line (``a; return b``: the return)."""
    last = block.body[-1]
    return last.body[-1] if isinstance(last, cst.SimpleStatementLine) else last


@kind("method_start", "the first line of the method's body (after its docstring)", valid=[
    Example('class A:\n    def run(self):\n        """Doc."""\n        return 1\n',
            {"at": "method_start", "action": "start"},
            after='class A:\n    def run(self):\n        """Doc."""\n'
                  '        _patchkit_runtime.start("k")  # patchkit:k\n        return 1\n'),
], invalid=[
    Example("class A:\n    def other(self):\n        pass\n", {"at": "method_start"}, reason="no method run"),
])
def method_start(scan: Scan, point: Point) -> List[Site]:
    return [Site(scan.func.body, 0 if scan.func.get_docstring(clean=False) is None else 1, scan.func)]


@kind("method_end", "after the last statement of the method's body, when the end can be reached", valid=[
    Example("class A:\n    def run(self):\n        self.work()\n", {"at": "method_end"},
            after='class A:\n    def run(self):\n        self.work()\n        _patchkit_runtime.step("k")  # patchkit:k\n'),
], invalid=[
    Example("class A:\n    def run(self):\n        return self.work()\n", {"at": "method_end"},
            reason="ends with a return at line 3"),
])
def method_end(scan: Scan, point: Point) -> List[Site]:
    last = last_statement(scan.func.body)
    if isinstance(last, (cst.Return, cst.Raise)):
        raise NotFound(f"{scan.qualname} ends with a {type(last).__name__.lower()} at line {scan.line(last)}; "
                       f"the end of the {scan.kind} is never reached there (use `at: on_exit` to step on every way out)",
                       scan.line(last))
    return [Site(scan.func.body, len(scan.func.body.body), scan.func)]


@kind("on_exit", "a decorator that steps on every way out of the method (return or exception)",
      actions=("step",), valid=[
    Example("class A:\n    def run(self, x):\n        return self.work(x)\n", {"at": "on_exit"},
            after='class A:\n    @_patchkit_runtime.on_exit("k")  # patchkit:k\n'
                  '    def run(self, x):\n        return self.work(x)\n'),
], invalid=[
    Example("class A:\n    def run(self):\n        yield 1\n", {"at": "on_exit"}, reason="is a generator"),
    Example("class A:\n    async def run(self):\n        return 1\n", {"at": "on_exit"}, reason="is async"),
])
def on_exit(scan: Scan, point: Point) -> List[Decorate]:
    if scan.func.asynchronous is not None:
        raise NotFound(f"{scan.qualname} is async; on_exit wraps plain {scan.kind}s only", scan.line(scan.func))
    if scan.yields:
        raise NotFound(f"{scan.qualname} is a generator (yield {scan.at_lines(scan.yields)}); "
                       "on_exit would step when the generator is created, not when it finishes",
                       scan.line(scan.yields[0]))
    return [Decorate(scan.func)]
