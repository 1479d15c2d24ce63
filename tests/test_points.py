"""The finders on libcst's tree: what a scan holds, where new statements go, what the codemod enters.

Where a statement goes is told by where libcst puts the nodes: the comments
and blank lines above a statement belong to it, so a new statement before
it takes them over and sits right above its first line.
"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from patchkit.engine import codemod as engine
from patchkit.engine.codemod import strip, transform
from patchkit.core.model import Applied, CannotApply, LoopSelector
from patchkit.engine.points import Positions, Scan
from patchkit.engine.points.lookup import Missing, find_function
from patchkit.recipe.load import load_recipe

BASE = """\
id: t
description: test recipe
target: {package: pkg, files: [pkg/mod.py]}
backend: torch
points:
"""
STEP = '_patchkit_runtime.step("t")  # patchkit:t'


def settings(tmp_path, points: str, extra: str = ""):
    path = tmp_path / "t.yaml"
    path.write_text(BASE.replace("points:\n", extra + "points:\n") + textwrap.indent(textwrap.dedent(points), "  "))
    return load_recipe(path)


def body(text: str):
    """The lines after the module header, without their endings."""
    lines = text.splitlines()
    return lines[[i for i, ln in enumerate(lines) if ln.startswith("_patchkit_runtime.configure(")][0] + 1:]


def scan_of(src: str, cls="A", method="run", nested=None) -> Scan:
    module = cst.parse_module(src)
    positions = Positions(module)
    func, _ = find_function(module, cls, method, nested, positions)
    return Scan(func, cls, method, positions)


SOURCE = textwrap.dedent('''\
    class A:
        def run(self, batches):
            x = self.prepare(); self.work(x)
            for batch in batches:
                if batch:
                    continue
                with self.ctx():
                    y = self.work(batch)
            def helper():
                self.work(0)
                for z in range(3):
                    pass
            return helper
    ''')


def test_a_scan_holds_the_statements_and_loops_in_source_order_with_their_blocks():
    scan = scan_of(SOURCE)
    assert [type(s.node).__name__ for s in scan.statements] == ["Assign", "Expr", "If", "Continue", "With", "Assign",
                                                                  "Return"]
    assert [s.call for s in scan.statements] == ["self.prepare", "self.work", None, None, None, "self.work", None]
    a, b = scan.statements[:2]
    assert a.block is b.block is scan.func.body and a.index == b.index == 0  # `a; b` is one line of the block
    assert len(scan.loops) == 1 and scan.loops[0].owner is scan.func  # the loop in helper() is not this function's
    (cont, enclosing), = scan.continues
    assert enclosing == (scan.loops[0].node,)
    assert [type(s.owner).__name__ for s in scan.statements[3:6]] == ["If", "For", "With"]


def test_calls_and_yields_are_gathered_only_when_a_finder_asks():
    scan = scan_of(SOURCE)
    assert scan._expressions is None
    names = [(name, len(loops)) for name, _call, loops in scan.calls]
    assert names == [("self.prepare", 0), ("self.work", 0), ("self.ctx", 1), ("self.work", 1)]  # not helper()'s
    assert scan.yields == []


def test_positions_are_resolved_only_when_a_message_needs_a_line(tmp_path, monkeypatch):
    resolved = []
    real = cst.MetadataWrapper.resolve

    def counting(self, provider):
        resolved.append(provider)
        return real(self, provider)

    monkeypatch.setattr(cst.MetadataWrapper, "resolve", counting)
    ok = transform(SOURCE, settings(tmp_path, "- {class: A, method: run, at: loop_start, loop: {iter: batches}}\n"))
    assert isinstance(ok, Applied) and resolved == []
    refused = transform(SOURCE, settings(tmp_path, "- {class: A, method: run, at: after_call, call: self.work}\n"))
    assert isinstance(refused, CannotApply) and len(resolved) == 1
    assert refused.reason == ("found 2 statements calling self.work in A.run, at lines 3 and 8; the recipe expects 1, "
                              f"in the point at {tmp_path / 't.yaml'}:6:5")
    assert refused.line == 3


def test_the_codemod_enters_only_what_can_hold_a_change(tmp_path, monkeypatch):
    src = SOURCE + textwrap.dedent('''\

        class B:
            def run(self):
                self.work(1)


        def run(batches):
            return [b for b in batches]
        ''')
    entered = []
    real = engine._Edit.on_visit

    def on_visit(self, node):
        go = real(self, node)
        if go:
            entered.append(type(node).__name__)
        return go

    monkeypatch.setattr(engine._Edit, "on_visit", on_visit)
    result = transform(src, settings(tmp_path, "- {class: A, method: run, at: loop_start, loop: {iter: batches}}\n"))
    assert isinstance(result, Applied)
    assert entered.count("ClassDef") == 1 and entered.count("FunctionDef") == 2  # A, A.run and the def inside it
    assert not set(entered) - {"Module", "ClassDef", "FunctionDef", "IndentedBlock", "For", "If", "With"}


@pytest.mark.parametrize("point,before,after", [
    # comments and blank lines above a statement stay above the new line
    ("{class: A, method: run, at: before_call, call: self.work}",
     ["        x = 1", "", "        # about the work", "        self.work()"],
     ["        x = 1", "", "        # about the work", "        " + STEP, "        self.work()"]),
    ("{class: A, method: run, at: method_start}",
     ["    def run(self):  # why", "        # first", "        x = 1"],
     ["    def run(self):  # why", "        # first", "        " + STEP, "        x = 1"]),
    # `a; b` is one line: before a call in it is before the line, after it is after the line
    ("{class: A, method: run, at: before_call, call: self.work}",
     ["        x = 1; self.work()"], ["        " + STEP, "        x = 1; self.work()"]),
    ("{class: A, method: run, at: after_call, call: self.work}",
     ["        self.work(); x = 1", "        y = 2"], ["        self.work(); x = 1", "        " + STEP, "        y = 2"]),
    # a comment that ends a nested block belongs to it: the end of the loop comes after it
    ("{class: A, method: run, at: loop_end, loop: {iter: mbs}}",
     ["        for m in mbs:", "            if m:", "                f(m)", "                # deeper", "        return"],
     ["        for m in mbs:", "            if m:", "                f(m)", "                # deeper", "            " + STEP,
      "        return"]),
    # the decorator is the innermost one, right above the def, below comments between decorators and def
    ("{class: A, method: run, at: on_exit}",
     ["    @staticmethod", "    # note", "    def run():", "        pass"],
     ["    @staticmethod", "    # note", '    @_patchkit_runtime.on_exit("t")  # patchkit:t', "    def run():",
      "        pass"]),
])
def test_where_new_lines_go_around_comments_and_one_line_statements(tmp_path, point, before, after):
    src = "class A:\n" + ("    def run(self):\n" if not before[0].lstrip().startswith(("def", "@")) else "") \
        + "\n".join(before) + "\n"
    result = transform(src, settings(tmp_path, f"- {point}\n"))
    assert isinstance(result, Applied), result
    lines = body(result.text)
    assert lines[-len(after):] == after
    assert strip(result.text) == src


def test_the_header_goes_after_the_last_comments_of_a_module_without_statements(tmp_path):
    src = '"""Only a docstring."""\n# and a comment\n\n'
    result = transform(src, settings(tmp_path, "- {class: A, method: run, at: method_start}\n"), points=[])
    assert isinstance(result, Applied)
    assert result.text.startswith(src) and result.text[len(src):].startswith("try:  # patchkit:t\n")
    assert [i.index for i in result.insertions] == [3] * len(result.insertions)


def test_lookup_finds_nested_functions_in_any_block_but_not_inside_another_scope():
    src = textwrap.dedent('''\
        class A:
            def run(self):
                if x:
                    def inner():
                        def deeper():
                            pass
                class Local:
                    def hidden(self):
                        pass
        ''')
    module = cst.parse_module(src)
    positions = Positions(module)
    func, holders = find_function(module, "A", "run", "inner", positions)
    assert func.name.value == "inner" and [type(h).__name__ for h in holders] == ["ClassDef", "FunctionDef"]
    for name in ("deeper", "hidden"):
        with pytest.raises(Missing) as info:
            find_function(module, "A", "run", name, positions)
        assert info.value.reason == f"A.run defines no nested function {name}" and info.value.line == 2


def test_loop_selectors_read_libcst_nodes():
    src = textwrap.dedent('''\
        class A:
            def run(self):
                for i, (a, *rest) in zip(xs, *more, strict=flag):
                    pass
                while self.more(n) > 0:
                    pass
        ''')
    from patchkit.engine.points.loops import select

    scan = scan_of(src)
    assert [len(select(scan, LoopSelector(iter=name))) for name in ("zip", "xs", "more", "flag")] == [0, 1, 0, 0]
    assert [len(select(scan, LoopSelector(target=name))) for name in ("i", "a", "rest")] == [1, 1, 1]
    assert len(select(scan, LoopSelector(while_="self.more"))) == 1
    assert len(select(scan, LoopSelector(calls="self.more"))) == 1  # the condition is inside the while loop
