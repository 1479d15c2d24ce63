"""The inserted statements are libcst nodes: what they print, and how they fit into any target module."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from patchkit.engine import codegen
from patchkit.engine.codegen import code, exit_decorator_node, header_lines, header_statements, point_statement
from patchkit.engine.codemod import transform
from patchkit.core.model import Applied, CannotApply
from patchkit.recipe.load import load_recipe

BASE = """\
id: t
description: test recipe
target: {package: pkg, files: [pkg/mod.py]}
backend: torch
"""
ROLES = """\
options: {role: {choices: [actor, ref, all], default: all}}
roles: {actor: self.opt is not None, ref: self.opt is None}
"""


def loaded(tmp_path, point: str, extra: str = "", overrides=()):
    path = tmp_path / "t.yaml"
    path.write_text(BASE + extra + "points:\n  - " + point + "\n")
    s = load_recipe(path, overrides)
    return s, s.active_points()[0]


@pytest.mark.parametrize("point,extra,overrides,expected", [
    ("{class: A, method: run, at: method_start, action: start}", "", (),
     '_patchkit_runtime.start("t")  # patchkit:t'),
    ("{class: A, method: run, at: method_start, guard: self.rank == 0}", "guard: not self.draft\n", (),
     '_patchkit_runtime.step("t", lambda: (not self.draft) and (self.rank == 0))  # patchkit:t'),
    ("{class: A, method: run, at: method_start}", ROLES, ("role=ref",),
     '_patchkit_runtime.step("t/ref", lambda: self.opt is None)  # patchkit:t'),
    ("{class: A, method: run, at: method_start}", ROLES, (),
     '_patchkit_runtime.step(lambda: "t/actor" if (self.opt is not None) else "t/ref" if (self.opt is None) else None)'
     '  # patchkit:t'),
    ("{class: A, method: run, at: method_start, action: refuse, guard: self.own, reason: \"it's on\"}", ROLES, (),
     '_patchkit_runtime.refuse("t", "it\'s on", lambda: self.own)  # patchkit:t'),
])
def test_a_point_statement_is_a_node_that_prints_one_marked_line(tmp_path, point, extra, overrides, expected):
    s, p = loaded(tmp_path, point, extra, overrides)
    node = point_statement(s, p)
    assert isinstance(node, (cst.SimpleStatementLine, cst.If))
    assert code(node) == expected == codegen.call_statement(s, p)


def test_the_header_statements_print_header_lines_in_any_module(tmp_path):
    """Four spaces in the header's blocks and the file's own line ending, whatever the file uses."""
    s, _ = loaded(tmp_path, "{class: A, method: run, at: method_start}")
    tabbed = cst.parse_module("class A:\r\n\tdef run(self):\r\n\t\tpass\r\n")
    module = tabbed.with_changes(body=[*header_statements(s), *tabbed.body])
    assert module.code.split("\r\n")[:len(header_lines(s))] == header_lines(s)
    assert "\n" not in module.code.replace("\r\n", "")


def decorator(tmp_path, src: str, extra: str = "guard: not self.draft\n") -> str:
    """The on_exit line for ``A.run`` of ``src``."""
    s, p = loaded(tmp_path, "{class: A, method: run, at: on_exit}", extra)
    func = cst.parse_module(src).body[0].body.body[0]
    return code(exit_decorator_node(s, p, func))


@pytest.mark.parametrize("signature,lam", [
    ("self, batch: Batch, mode: str = 'decode', *rest: int, flag: bool=False, **kw: Any",
     "lambda self, batch, mode='decode', *rest, flag=False, **kw"),
    ("self, a, /, b=2, *, c", "lambda self, a, /, b=2, *, c"),
    ("self,\n        items=[  # the defaults\n            1,\n            2,\n        ],\n        n=(1 +\\\n 2),\n    ",
     "lambda self, items=[ 1, 2, ], n=(1 + 2)"),
])
def test_on_exit_lambdas_take_the_targets_parameters_on_one_line(tmp_path, signature, lam):
    src = f"class A:\n    def run({signature}) -> int:\n        return 1\n"
    line = decorator(tmp_path, src)
    assert line == f'@_patchkit_runtime.on_exit("t", {lam}: not self.draft)  # patchkit:t'
    compile(f"def _():\n    {line}\n    def f(): pass\n", "<decorator>", "exec")


def test_a_role_key_on_exit_is_a_lambda_of_the_same_parameters(tmp_path):
    line = decorator(tmp_path, "class A:\n    def run(self, x):\n        return x\n", ROLES)
    assert line == ('@_patchkit_runtime.on_exit(lambda self, x: "t/actor" if (self.opt is not None) else "t/ref" '
                    'if (self.opt is None) else None)  # patchkit:t')


def test_a_default_that_spans_lines_is_refused_with_the_parameter_named(tmp_path):
    src = 'class A:\n    def run(self, sep="""\n"""):\n        return 1\n'
    s, _ = loaded(tmp_path, "{class: A, method: run, at: on_exit}", "guard: not self.draft\n")
    result = transform(src, s)
    assert isinstance(result, CannotApply) and result.line == 2
    assert result.reason == ("the line for `step on_exit in A.run` cannot be written: on_exit repeats the parameters "
                             "in a one-line lambda, but the default value of parameter sep spans lines")
    without_guard, _ = loaded(tmp_path, "{class: A, method: run, at: on_exit}")
    assert isinstance(transform(src, without_guard), Applied)  # no lambda, nothing to repeat


def test_the_file_written_is_the_modules_code_with_the_nodes_in(tmp_path):
    src = textwrap.dedent('''\
        class A:
            def run(self, xs):
                for x in xs:
                    self.work(x)
        ''')
    s, _ = loaded(tmp_path, "{class: A, method: run, at: loop_end, loop: {iter: xs}}")
    result = transform(src, s)
    assert isinstance(result, Applied)
    expected = "".join(ln + "\n" for ln in header_lines(s)) + src + '            _patchkit_runtime.step("t")  # patchkit:t\n'
    assert result.text == expected
    assert [i.index for i in result.insertions] == [0] * len(header_lines(s)) + [4]


def test_a_line_libcst_cannot_read_is_a_clean_refusal_not_a_crash(tmp_path, monkeypatch):
    s, _ = loaded(tmp_path, "{class: A, method: run, at: method_start, guard: self.unread}")

    def unreadable(text, *args, **kwargs):
        raise cst.ParserSyntaxError("not supported here", lines=[text], raw_line=1, raw_column=0)

    codegen._parse.cache_clear()
    monkeypatch.setattr(cst, "parse_statement", unreadable)
    result = transform("class A:\n    def run(self):\n        pass\n", s)
    assert isinstance(result, CannotApply) and result.line == 2
    assert result.reason.startswith("the line for `step method_start in A.run` cannot be written: libcst cannot "
                                    "read the line '_patchkit_runtime.step(\"t\", lambda: self.unread)")


def test_a_guard_libcst_cannot_read_is_a_clean_refusal_not_a_crash(tmp_path, monkeypatch):
    s, _ = loaded(tmp_path, "{class: A, method: run, at: method_start, guard: self.ready}")

    def unreadable(text, *args, **kwargs):
        raise cst.ParserSyntaxError("not supported here", lines=[text], raw_line=1, raw_column=0)

    monkeypatch.setattr(cst, "parse_expression", unreadable)
    result = transform("class A:\n    def run(self):\n        pass\n", s)
    assert isinstance(result, CannotApply) and result.line == 2
    assert result.reason == ("the line for `step method_start in A.run` cannot be written: "
                             "libcst cannot read the expression 'self.ready' (not supported here)")
