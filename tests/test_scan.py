"""engine/points/scan.py: one function read once on libcst's tree: its statements, loops, calls and `continue`s,
and the names a recipe's points use for them."""

from __future__ import annotations

import libcst as cst

from patchkit.engine.points import Positions, Scan
from patchkit.engine.points.lookup import find_function
from patchkit.engine.points.scan import dotted, statement_call, word

SOURCE = '''\
class A:
    def run(self, batches):
        total = 0
        for batch in batches:
            if not batch:
                continue
            total += self.model.forward(batch)
        while self.more():
            self.step()

        def inner():
            self.hidden()
        return total
'''


def scan_of(src=SOURCE, cls="A", method="run") -> Scan:
    module = cst.parse_module(src)
    positions = Positions(module)
    func, _ = find_function(module, cls, method, None, positions)
    return Scan(func, cls, method, positions)


def test_a_scan_finds_the_loops_statements_and_continues_of_its_own_body_only():
    scan = scan_of()
    assert [scan.line(lp.node) for lp in scan.loops] == [4, 8]
    assert [scan.line(c) for c, _around in scan.continues] == [6]
    assert scan.qualname == "A.run" and scan.kind == "method"
    names = [name for name, _call, _around in scan.calls]
    assert "self.model.forward" in names and "self.step" in names and "self.more" in names
    assert "self.hidden" not in names  # a nested function's calls do not run in this one


def test_a_call_knows_the_loops_around_it_innermost_last():
    scan = scan_of()
    around = {name: [scan.line(n) for n in loops] for name, _call, loops in scan.calls}
    assert around["self.model.forward"] == [4] and around["self.step"] == [8] and around["self.more"] == [8]


def test_names_as_a_recipe_writes_them():
    call = cst.parse_expression("self.model.forward(x)")
    assert dotted(call.func) == "self.model.forward" and dotted(cst.parse_expression("f(x)(y)")) is None
    small = lambda text: cst.parse_statement(text).body[0]  # noqa: E731
    assert statement_call(small("out = self.work()\n")) == "self.work" and statement_call(small("x = 1\n")) is None
    assert statement_call(small("await self.fetch()\n")) == "self.fetch"
    assert word(cst.parse_statement("return x\n").body[0]) == "return"


def test_a_module_level_function_is_a_function_in_messages():
    scan = scan_of("def main():\n    for x in xs:\n        go(x)\n", cls=None, method="main")
    assert scan.kind == "function" and scan.qualname == "main" and len(scan.loops) == 1
