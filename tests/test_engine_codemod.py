"""The engine: byte-exact, insert-only, idempotent, reversible, and precise when it cannot apply."""

from __future__ import annotations

import ast
import json
import textwrap

import pytest
from hypothesis import given
from hypothesis import settings as explore
from hypothesis import strategies as st

from patchkit.engine.lines import header_lines
from patchkit.engine.codemod import applied_ids, split_lines, strip, transform
from patchkit.core.model import AlreadyApplied, Applied, CannotApply
from patchkit.recipe.load import load_recipe

BASE = """\
id: {id}
description: test recipe
target: {{package: pkg, files: [pkg/mod.py]}}
backend: torch
"""


def settings(tmp_path, points: str, extra: str = "", overrides=(), rid: str = "t"):
    path = tmp_path / f"{rid}.yaml"
    path.write_text(BASE.format(id=rid) + extra + "points:\n" + textwrap.indent(textwrap.dedent(points), "  "))
    return load_recipe(path, overrides)


STEP_AFTER = """\
- {class: A, method: run, at: after_call, call: self.work}
"""

SOURCE = '''\
"""Module docstring."""
from __future__ import annotations

import os


class A:
    def run(self, xs):
        for x in xs:
            self.work(x)  # the work
        return xs
'''


def inserted(old: str, new: str):
    """The lines of ``new`` that are not in ``old``, checking ``old`` is kept in order."""
    old_lines, new_lines = split_lines(old), split_lines(new)
    it = iter(new_lines)
    extra = []
    for line in old_lines:
        for candidate in it:
            if candidate == line:
                break
            extra.append(candidate)
        else:
            raise AssertionError(f"original line lost or changed: {line!r}")
    extra.extend(it)
    return extra


def test_insertion_keeps_every_original_line_and_marks_every_new_one(tmp_path):
    result = transform(SOURCE, settings(tmp_path, STEP_AFTER))
    assert isinstance(result, Applied)
    added = inserted(SOURCE, result.text)
    assert len(added) == len(header_lines(settings(tmp_path, STEP_AFTER))) + 1 and all("patchkit" in line for line in added)
    assert added[0].startswith("try:  # patchkit:t")
    assert added[1].startswith("    import patchkit.runtime as _patchkit_runtime")
    lines = result.text.splitlines()
    assert lines.index(added[0].rstrip("\n")) == 3  # after the docstring, the __future__ import and the blank line
    assert "            _patchkit_runtime.step(\"t\")  # patchkit:t" in lines
    compile(result.text, "x.py", "exec")


def test_applying_twice_changes_nothing_and_strip_gives_the_input_back(tmp_path):
    s = settings(tmp_path, STEP_AFTER)
    once = transform(SOURCE, s)
    again = transform(once.text, s)
    assert isinstance(again, AlreadyApplied) and again.text == once.text
    assert strip(once.text, "t") == SOURCE
    assert applied_ids(once.text) == ["t"]


def test_reapplying_with_other_settings_replaces_the_old_lines(tmp_path):
    once = transform(SOURCE, settings(tmp_path, STEP_AFTER))
    other = transform(once.text, settings(tmp_path, STEP_AFTER, overrides=["schedule.active=7"]))
    assert isinstance(other, Applied)
    assert "active=7" in other.text and "active=1" not in other.text
    assert strip(other.text) == SOURCE


@pytest.mark.parametrize("newline", ["\r\n", "\r", "\n"])
def test_line_endings_are_kept(tmp_path, newline):
    src = SOURCE.replace("\n", newline)
    result = transform(src, settings(tmp_path, STEP_AFTER))
    assert isinstance(result, Applied)
    assert strip(result.text) == src
    body = result.text.replace(newline, "")
    assert "\n" not in body and "\r" not in body  # no foreign line ending crept in


def test_tabs_comments_and_odd_spacing_survive(tmp_path):
    src = "class A:\n\tdef run(self, xs):\n\t\tfor x in xs:   # loop\n\t\t\tself.work(x)   ;  y = 1\n\t\t# trailing\n\t\treturn  xs\n"
    result = transform(src, settings(tmp_path, STEP_AFTER))
    assert isinstance(result, Applied)
    assert strip(result.text) == src
    assert "\t\t\t_patchkit_runtime.step(\"t\")  # patchkit:t\n" in result.text


def test_two_recipes_on_one_file_come_out_independently(tmp_path):
    a = settings(tmp_path, STEP_AFTER, rid="a")
    b = settings(tmp_path, "- {class: A, method: run, at: method_start, action: start}\n", rid="b")
    both = transform(transform(SOURCE, a).text, b).text
    assert set(applied_ids(both)) == {"a", "b"}
    assert strip(both, "a") == transform(SOURCE, b).text
    assert strip(strip(both, "b"), "a") == SOURCE


@pytest.mark.parametrize("at,expected", [
    ("method_start", 1),  # before the loop: the first body line
    ("method_end", None),
])
def test_method_positions(tmp_path, at, expected):
    src = 'class A:\n    def run(self):\n        """Doc."""\n        a = 1\n        b = 2\n'
    result = transform(src, settings(tmp_path, f"- {{class: A, method: run, at: {at}}}\n"))
    lines = result.text.splitlines()[2:]
    body = [ln.strip() for ln in lines[lines.index("    def run(self):") + 1:]]
    if at == "method_start":
        assert body == ['"""Doc."""', '_patchkit_runtime.step("t")  # patchkit:t', "a = 1", "b = 2"]
    else:
        assert body == ['"""Doc."""', "a = 1", "b = 2", '_patchkit_runtime.step("t")  # patchkit:t']


def test_method_end_after_a_return_is_refused(tmp_path):
    src = "class A:\n    def run(self):\n        x = 1\n        return x\n"
    result = transform(src, settings(tmp_path, "- {class: A, method: run, at: method_end}\n"))
    assert isinstance(result, CannotApply)
    assert "ends with a return at line 4" in result.reason and "on_exit" in result.reason
    assert result.line == 4


def test_ambiguous_loop_names_both_lines(tmp_path):
    src = "class A:\n    def run(self):\n        for m in micro_batches:\n            f(m)\n        for m in micro_batches:\n            g(m)\n"
    result = transform(src, settings(tmp_path, "- {class: A, method: run, at: loop_end, loop: {iter: micro_batches}}\n"))
    assert isinstance(result, CannotApply)
    assert result.reason.startswith("found 2 loops over micro_batches in A.run, at lines 3 and 5")


def test_loop_selectors(tmp_path):
    src = textwrap.dedent('''\
        class A:
            def run(self, data):
                for _ in range(3):
                    for batch_idx, data in enumerate(dataloader):
                        for data in micro_batches:
                            loss.backward()
                        self._optimizer_step()
        ''')

    def where(loop):
        r = transform(src, settings(tmp_path, f"- {{class: A, method: run, at: loop_start, loop: {loop}}}\n"))
        assert isinstance(r, Applied), r
        lines = r.text.splitlines()
        return lines[[i for i, ln in enumerate(lines) if "step(" in ln][0] - 1].strip()

    assert where("{iter: micro_batches}") == "for data in micro_batches:"
    assert where("{iter: dataloader}") == "for batch_idx, data in enumerate(dataloader):"
    assert where("{target: batch_idx}") == "for batch_idx, data in enumerate(dataloader):"
    assert where("{calls: self._optimizer_step}") == "for batch_idx, data in enumerate(dataloader):"
    assert where("{calls: loss.backward}") == "for data in micro_batches:"
    assert where("[{target: micro_batch}, {iter: micro_batches}]") == "for data in micro_batches:"


def test_a_continue_in_the_loop_refuses_loop_end(tmp_path):
    src = "class A:\n    def run(self):\n        for m in mbs:\n            if m:\n                continue\n            f(m)\n"
    result = transform(src, settings(tmp_path, "- {class: A, method: run, at: loop_end, loop: {iter: mbs}}\n"))
    assert isinstance(result, CannotApply) and "continue at line 5" in result.reason


def test_calls_inside_with_blocks_and_nested_functions(tmp_path):
    src = textwrap.dedent('''\
        class Worker:
            def execute_model(self, out):
                def helper():
                    self.model_runner.execute_model(1)
                with self.annotate_profile(out):
                    output = self.model_runner.execute_model(
                        out)
                    if output:
                        return output
                return None
        ''')
    result = transform(src, settings(tmp_path, "- {class: Worker, method: execute_model, at: after_call, call: self.model_runner.execute_model}\n"))
    assert isinstance(result, Applied), result
    lines = result.text.splitlines()
    i = lines.index("                out)")
    assert lines[i + 1] == '            _patchkit_runtime.step("t")  # patchkit:t'


def test_on_exit_steps_on_every_exit_and_keeps_the_guard_in_the_method_scope(tmp_path):
    src = textwrap.dedent('''\
        class Runner:
            @staticmethod
            def helper():
                return 1

            def forward(self, batch, mode: str = "decode", *rest, flag=False, **kw) -> int:
                if mode == "decode":
                    return self.decode(batch)
                if mode == "boom":
                    raise ValueError(mode)
                return self.extend(batch)
        ''')
    s = settings(tmp_path, "- {class: Runner, method: forward, at: on_exit}\n", extra="guard: not self.is_draft_worker\n")
    result = transform(src, s)
    assert isinstance(result, Applied), result
    calls = []

    class Runtime:
        @staticmethod
        def configure(*a, **k):
            pass

        @staticmethod
        def on_exit(key, guard=None):
            def deco(fn):
                def wrapper(*args, **kwargs):
                    try:
                        return fn(*args, **kwargs)
                    finally:
                        if guard is None or guard(*args, **kwargs):
                            calls.append(key)
                return wrapper
            return deco

    namespace = {"_patchkit_runtime": Runtime}
    header = set(header_lines(s))
    code = "\n".join(ln for ln in result.text.splitlines() if ln not in header)
    exec(compile(code, "m.py", "exec"), namespace)
    runner = namespace["Runner"]()
    runner.is_draft_worker = False
    runner.decode = lambda b: ("decode", calls.copy())
    runner.extend = lambda b: ("extend", calls.copy())
    assert runner.forward(1) == ("decode", [])  # the step comes after the work in the return expression
    assert calls == ["t"]
    runner.forward(1, "extend")
    with pytest.raises(ValueError):
        runner.forward(1, "boom")
    assert calls == ["t", "t", "t"]
    runner.is_draft_worker = True
    runner.forward(1)
    assert calls == ["t", "t", "t"]


def test_on_exit_refuses_generators(tmp_path):
    src = "class R:\n    def forward(self):\n        yield 1\n"
    result = transform(src, settings(tmp_path, "- {class: R, method: forward, at: on_exit}\n"))
    assert isinstance(result, CannotApply) and "generator" in result.reason


def test_hostile_values_stay_literals(tmp_path):
    evil = "x\"); __import__('os').system('touch pwned'); (\"\n\\u2028\u00e9 '''"
    s = settings(tmp_path, STEP_AFTER, overrides=["profiler.save_path=" + json.dumps(evil), "backend=torch"])
    result = transform("# -*- coding: latin-1 -*-\n" + SOURCE, s)
    assert isinstance(result, Applied)
    configure = next(ln for ln in result.text.splitlines() if ".configure(" in ln)
    call = ast.parse(configure).body[0].value
    values = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    assert values["save_path"] == evil
    assert configure.isascii()
    result.text.encode("latin-1")


def test_a_role_option_becomes_a_guard_or_a_runtime_choice(tmp_path):
    extra = textwrap.dedent("""\
        options: {role: {choices: [actor, ref, all], default: all}}
        roles: {actor: self.opt is not None, ref: self.opt is None}
        """)
    ref = transform(SOURCE, settings(tmp_path, STEP_AFTER, extra=extra, overrides=["role=ref"]))
    assert '_patchkit_runtime.step("t/ref", lambda: self.opt is None)  # patchkit:t' in ref.text
    both = transform(SOURCE, settings(tmp_path, STEP_AFTER, extra=extra))
    assert '_patchkit_runtime.step(lambda: "t/actor" if (self.opt is not None) else "t/ref" if (self.opt is None) else None)' in both.text


@pytest.mark.parametrize("src,needle", [
    ("class B:\n    def run(self):\n        pass\n", "no class A at the top level"),
    ("class A:\n    def other(self):\n        pass\n", "class A has no method run"),
    ("class A:\n    def run(self): self.work()\n", "A.run is written on one line"),
    ("class A:\n    def run(self):\n        return self.work()\n", "no statement calling self.work"),
    ("class A:\n    def run(self:\n", "does not parse"),
])
def test_precise_reasons(tmp_path, src, needle):
    result = transform(src, settings(tmp_path, STEP_AFTER))
    assert isinstance(result, CannotApply)
    assert needle in result.reason


def test_one_line_method_is_refused_for_line_insertions(tmp_path):
    src = "class A:\n    def run(self): self.work()\n"
    result = transform(src, settings(tmp_path, "- {class: A, method: run, at: method_start}\n"))
    assert isinstance(result, CannotApply) and "one line" in result.reason


def test_count_any_takes_every_match(tmp_path):
    src = "class A:\n    def run(self):\n        self.work(1)\n        self.work(2)\n"
    result = transform(src, settings(tmp_path, "- {class: A, method: run, at: after_call, call: self.work, count: any}\n"))
    assert result.text.count('step("t")') == 2
    exact = transform(src, settings(tmp_path, "- {class: A, method: run, at: after_call, call: self.work, count: 2}\n"))
    assert exact.text == result.text
    refused = transform(src, settings(tmp_path, STEP_AFTER))
    assert "found 2 statements calling self.work in A.run, at lines 3 and 4" in refused.reason


def test_module_without_statements_and_without_final_newline(tmp_path):
    s = settings(tmp_path, STEP_AFTER)
    refused = transform('"""doc"""\nclass A:\n    def run(self):\n        self.work()', s)
    assert isinstance(refused, CannotApply) and "does not end with a newline" in refused.reason
    src = '"""doc"""\nclass A:\n    def run(self):\n        self.work()\n        return 1'
    result = transform(src, s)
    assert isinstance(result, Applied)
    assert strip(result.text) == src and result.text.endswith("return 1")
    only_docstring = transform('"""doc"""', s)
    assert isinstance(only_docstring, CannotApply)


def test_points_in_a_nested_function_and_loops_chosen_by_their_while_condition(tmp_path):
    src = textwrap.dedent('''\
        class Engine:
            def run(self, batch, forward_only=False):
                while self.all_consumed(stage, indexes, is_generate=True) > 0:
                    data = self.fetch()
                    self.work(data)

                def forward_step(batch_iter, model):
                    """Megatron calls this once per micro-batch."""
                    output = model(batch_iter)
                    return output

                for x in range(3):
                    pass
                return self.forward_backward_func(forward_step_func=forward_step)
        ''')
    nested = transform(src, settings(tmp_path, "- {class: Engine, method: run, nested: forward_step, at: method_start, guard: not forward_only}\n"))
    assert isinstance(nested, Applied), nested
    lines = nested.text.splitlines()
    i = lines.index('            """Megatron calls this once per micro-batch."""')
    assert lines[i + 1] == '            _patchkit_runtime.step("t", lambda: not forward_only)  # patchkit:t'
    looped = transform(src, settings(tmp_path, "- {class: Engine, method: run, at: loop_end, loop: {while: self.all_consumed}}\n"))
    lines = looped.text.splitlines()
    assert lines[lines.index("            self.work(data)") + 1] == '            _patchkit_runtime.step("t")  # patchkit:t'
    missing = transform(src, settings(tmp_path, "- {class: Engine, method: run, nested: backward_step, at: method_start}\n"))
    assert isinstance(missing, CannotApply) and "Engine.run defines no nested function backward_step" in missing.reason
    no_while = transform(src, settings(tmp_path, "- {class: Engine, method: run, at: loop_end, loop: {while: self.fetch}}\n"))
    assert isinstance(no_while, CannotApply) and "(while) whose condition calls self.fetch" in no_while.reason


def test_a_refuse_point_turns_the_recipe_off_when_its_guard_holds(tmp_path):
    s = settings(tmp_path, STEP_AFTER + "- {class: A, method: run, at: method_start, action: refuse, "
                 "guard: self.own_profiler_on, reason: \"the framework's own profiler is on\"}\n")
    result = transform(SOURCE, s)
    assert ('        _patchkit_runtime.refuse("t", "the framework\'s own profiler is on", lambda: self.own_profiler_on)'
            '  # patchkit:t') in result.text.splitlines()


@explore(max_examples=800, deadline=None)
@given(st.text(alphabet="ab #\t\r\n\v\f\x1c\x85\u2028"))
def test_split_lines_breaks_only_where_python_does(text):
    lines = split_lines(text)
    assert "".join(lines) == text
    for line in lines:
        body = line[:-2] if line.endswith("\r\n") else line[:-1] if line.endswith(("\r", "\n")) else line
        assert line and "\r" not in body and "\n" not in body
    assert all(line.endswith(("\r", "\n")) for line in lines[:-1])


def test_a_new_statement_that_is_not_one_marked_line_is_an_internal_error_not_a_write(tmp_path, monkeypatch):
    """The last check reads the new text against the input: anything but whole marked lines added is refused."""
    import libcst as cst

    from patchkit.engine import codegen

    real = codegen.point_statement
    with_comment = lambda s, p, part="": real(s, p).with_changes(leading_lines=[cst.EmptyLine(comment=cst.Comment("# a note"))])
    monkeypatch.setattr(codegen, "point_statement", with_comment)
    result = transform(SOURCE, settings(tmp_path, STEP_AFTER))
    assert isinstance(result, CannotApply) and result.reason.startswith("internal error: the new text changes line 11")
    assert result.line == 11  # where the unmarked line appears: before `return xs`
    unmarked = lambda s, p, part="": real(s, p).with_changes(trailing_whitespace=cst.TrailingWhitespace())
    monkeypatch.setattr(codegen, "point_statement", unmarked)
    result = transform(SOURCE, settings(tmp_path, STEP_AFTER))
    assert isinstance(result, CannotApply) and "internal error" in result.reason


def test_a_file_that_does_not_parse_gets_pythons_own_message_and_place(tmp_path):
    result = transform("class A:\n    def run(self:\n", settings(tmp_path, STEP_AFTER))
    assert isinstance(result, CannotApply)
    assert (result.reason, result.line, result.col) == ("the file does not parse as Python: '(' was never closed", 2, 12)


def test_a_file_libcst_reads_but_python_does_not_compile_is_refused_before_any_diff(tmp_path):
    result = transform("return 1\nclass A:\n    def run(self, xs):\n        self.work(xs)\n", settings(tmp_path, STEP_AFTER))
    assert isinstance(result, CannotApply)
    assert (result.reason, result.line) == ("the file does not compile as Python: 'return' outside function", 1)


def test_a_file_libcsts_round_trip_would_change_is_refused_naming_the_line(tmp_path):
    """A form feed before an indentation is valid Python that libcst prints back without the form feed."""
    src = "class A:\n    def run(self, xs):\n        self.work(xs)\n\f    def other(self):\n        pass\n"
    result = transform(src, settings(tmp_path, STEP_AFTER))
    assert isinstance(result, CannotApply) and result.line == 4
    assert result.reason.startswith("libcst does not reproduce line 4 of this file byte for byte")
    assert "patchkit show" in result.hint


def test_an_empty_file_gets_whole_header_lines(tmp_path):
    s = settings(tmp_path, STEP_AFTER)
    result = transform("", s, points=[])
    assert isinstance(result, Applied)
    assert result.text == "".join(line + "\n" for line in header_lines(s))


def test_help_list_and_status_do_not_import_libcst(tmp_path):
    import os
    import subprocess
    import sys

    code = ("import sys; from patchkit.cli.commands import main\n"
            "try:\n    main(sys.argv[1:], prog_name='patchkit')\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'libcst' or m == 'patchkit.engine.codemod'))")
    for args in (["--help"], ["list"], ["status"]):
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                              env={**os.environ, "PATCHKIT_HOME": str(tmp_path)})
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1] == "[]", (args, done.stdout[-300:])
