"""attach.livepoints: which of the recipe's inserted statements a call already running takes from a line trace:
blocks inserted before a statement of the file, at its indentation, inside the target function; not a block at
the end of a body (it precedes no statement there), not one in another function."""

from __future__ import annotations

import textwrap

from patchkit.attach.livepoints import span, triggers

ORIGINAL = textwrap.dedent('''\
    class Trainer:
        def fit(self, loader):
            for epoch in range(3):
                for batch in loader:
                    for micro in batch:
                        self.step(micro)
                    self.opt.step()

    def other():
        return 1
    ''')

INSTRUMENTED = textwrap.dedent('''\
    class Trainer:
        def fit(self, loader):
            for epoch in range(3):
                for batch in loader:
                    _patchkit_runtime.step("r")  # patchkit:r
                    for micro in batch:
                        self.step(micro)
                    self.opt.step()
                    _patchkit_runtime.step("r2")  # patchkit:r2

    def other():
        _patchkit_runtime.start("r3")  # patchkit:r3
        return 1
    ''')


def test_a_block_before_a_statement_is_a_trigger_at_that_statement_s_lines():
    assert triggers(ORIGINAL, INSTRUMENTED, ("Trainer", "fit", None)) == [
        (5, 6, '_patchkit_runtime.step("r")  # patchkit:r\n')]


def test_a_block_at_the_end_of_a_body_or_in_another_function_is_none():
    assert triggers(ORIGINAL, INSTRUMENTED, ("Trainer", "fit", None))[-1][0] == 5  # r2 precedes no statement
    assert triggers(ORIGINAL, INSTRUMENTED, (None, "other", None)) == [(10, 10, '_patchkit_runtime.start("r3")  '
                                                                        '# patchkit:r3\n')]
    assert triggers(ORIGINAL, INSTRUMENTED, (None, "missing", None)) == []
    assert triggers("def (", INSTRUMENTED, (None, "other", None)) == []


def test_a_changed_line_is_no_trigger():
    changed = INSTRUMENTED.replace("                self.opt.step()", "                self.opt.step()  # x")
    assert [t[0] for t in triggers(ORIGINAL, changed, ("Trainer", "fit", None))] == [5]


def test_the_span_of_a_method_and_a_nested_function():
    import ast

    tree = ast.parse("class A:\n    def f(self):\n        def g():\n            return 2\n        return g\n")
    assert span(tree, ("A", "f", None)) == (3, 5) and span(tree, ("A", "f", "g")) == (4, 4)
    assert span(tree, ("B", "f", None)) is None
