"""Points in module-level functions: `function: NAME` instead of `class:` + `method:`."""

from __future__ import annotations

import ast
import json
import textwrap

import pytest
import yaml
from click.testing import CliRunner

import patchkit
from patchkit.engine.examples import example_points
from patchkit.cli.commands import main
from patchkit.engine.lines import header_lines
from patchkit.engine.codemod import strip, transform
from patchkit.core.errors import RecipeError
from patchkit.recipe import schema as recipe_schema
from patchkit.core.model import AlreadyApplied, Applied, CannotApply
from patchkit.recipe.load import load_recipe

BASE = """\
id: {id}
description: test recipe
target: {{package: pkg, files: [pkg/mod.py]}}
backend: torch
"""


def settings(tmp_path, points: str, extra: str = "", rid: str = "t"):
    path = tmp_path / f"{rid}.yaml"
    path.write_text(BASE.format(id=rid) + extra + "points:\n" + textwrap.indent(textwrap.dedent(points), "  "))
    return load_recipe(path)


SOURCE = '''\
"""Training in plain functions."""
import os


class Trainer:
    def train(self, batches):
        for batch in batches:
            self.optimizer.step()


def train(batches, optimizer):
    """Train."""
    loss = None
    for step, batch in enumerate(batches):
        loss = optimizer.compute(batch)
        optimizer.step()
    return loss


async def fetch(client):
    await client.get()


def serve(model):
    def handle(request):
        reply = model.forward(request)
        return reply
    return handle
'''


def body_of(text: str, name: str):
    """The lines of the module-level function ``name`` in ``text`` (the def line first)."""
    node = next(n for n in ast.parse(text).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name)
    return text.splitlines()[node.lineno - 1:node.end_lineno]


STEP = '_patchkit_runtime.step("t")  # patchkit:t'

# (point, function, the function's lines after the patch)
POSITIONS = [
    ("{function: train, at: method_start}", "train", [
        "def train(batches, optimizer):", '    """Train."""', "    " + STEP, "    loss = None"]),
    ("{function: fetch, at: method_end}", "fetch", [
        "async def fetch(client):", "    await client.get()", "    " + STEP]),
    ("{function: train, at: after_call, call: optimizer.step}", "train", [
        "        optimizer.step()", "        " + STEP, "    return loss"]),
    ("{function: train, at: before_call, call: optimizer.step}", "train", [
        "        loss = optimizer.compute(batch)", "        " + STEP, "        optimizer.step()"]),
    ("{function: train, at: before_loop, loop: {iter: batches}}", "train", [
        "    loss = None", "    " + STEP, "    for step, batch in enumerate(batches):"]),
    ("{function: train, at: loop_start, loop: {target: batch}}", "train", [
        "    for step, batch in enumerate(batches):", "        " + STEP, "        loss = optimizer.compute(batch)"]),
    ("{function: train, at: loop_end, loop: {calls: optimizer.step}}", "train", [
        "        optimizer.step()", "        " + STEP, "    return loss"]),
    ("{function: serve, nested: handle, at: method_start}", "serve", [
        "    def handle(request):", "        " + STEP, "        reply = model.forward(request)"]),
    ("{function: train, at: on_exit}", "train", [
        '@_patchkit_runtime.on_exit("t")  # patchkit:t', "def train(batches, optimizer):"]),
]


@pytest.mark.parametrize("point,name,expected", POSITIONS, ids=[p[0] for p in POSITIONS])
def test_every_position_works_in_a_module_level_function(tmp_path, point, name, expected):
    s = settings(tmp_path, f"- {point}\n")
    result = transform(SOURCE, s)
    assert isinstance(result, Applied), result
    header = header_lines(s)
    assert len(result.insertions) == len(header) + 1 and all("patchkit" in i.text for i in result.insertions)
    text = result.text
    lines = body_of(text, name)
    if expected[0].startswith("@"):  # the decorator sits right above the def
        lines = text.splitlines()[text.splitlines().index(lines[0]) - 1:]
    assert any(lines[i:i + len(expected)] == expected for i in range(len(lines))), text
    trainer = [ln for ln in text.splitlines() if ln.startswith("        ") and "self.optimizer" in ln]
    assert trainer == ["            self.optimizer.step()"]  # the method of the same name is left alone
    compile(text, "m.py", "exec")
    assert strip(text) == SOURCE
    assert isinstance(transform(text, settings(tmp_path, f"- {point}\n")), AlreadyApplied)


def test_a_function_point_does_not_take_a_method_of_the_same_name_nor_the_other_way(tmp_path):
    as_function = transform(SOURCE, settings(tmp_path, "- {function: train, at: after_call, call: optimizer.step}\n"))
    as_method = transform(SOURCE, settings(tmp_path, "- {class: Trainer, method: train, at: after_call, call: self.optimizer.step}\n"))
    assert isinstance(as_function, Applied) and isinstance(as_method, Applied)
    assert [i.index for i in as_function.insertions][-1] == 16  # after `optimizer.step()` of train()
    assert [i.index for i in as_method.insertions][-1] == 8  # after `self.optimizer.step()` of Trainer.train


def test_function_point_failures_say_function(tmp_path):
    ends = transform(SOURCE, settings(tmp_path, "- {function: train, at: method_end}\n"))
    assert isinstance(ends, CannotApply)
    assert ends.reason.startswith("train ends with a return at line 17; the end of the function is never reached")
    async_exit = transform(SOURCE, settings(tmp_path, "- {function: fetch, at: on_exit}\n"))
    assert isinstance(async_exit, CannotApply)
    assert async_exit.reason.startswith("fetch is async; on_exit wraps plain functions only, in the point at ")
    loop = transform(SOURCE, settings(tmp_path, "- {function: train, at: loop_end, loop: {iter: nothing}}\n"))
    assert isinstance(loop, CannotApply) and loop.reason.startswith("no loop over nothing in train, in the point at ")
    assert loop.line == 11


def test_two_functions_of_one_name_are_refused_with_their_lines(tmp_path):
    src = "def f():\n    pass\n\n\ndef f():\n    pass\n"
    result = transform(src, settings(tmp_path, "- {function: f, at: method_start}\n"))
    assert isinstance(result, CannotApply)
    assert result.reason.startswith("the file defines f 2 times at the top level, at lines 1, 5") and result.line == 5


def test_on_exit_on_the_first_statement_of_the_file_goes_below_the_header(tmp_path):
    src = "@cache\ndef f(x):\n    return x\n"
    result = transform(src, settings(tmp_path, "- {function: f, at: on_exit}\n"))
    assert isinstance(result, Applied)
    lines = result.text.splitlines()
    header = header_lines(settings(tmp_path, "- {function: f, at: on_exit}\n"))
    assert lines[:len(header)] == header
    assert lines[len(header):] == ["@cache", '@_patchkit_runtime.on_exit("t")  # patchkit:t', "def f(x):", "    return x"]


class _Runtime:
    """A stand-in for patchkit.runtime that records the steps."""

    def __init__(self):
        self.calls = []

    def configure(self, *a, **k):
        pass

    def start(self, key, guard=None):
        if guard is None or guard():
            self.calls.append(("start", key))

    def step(self, key, guard=None):
        if guard is None or guard():  # the guard, a lambda, reads the function's own names where the line is
            self.calls.append(("step", key))

    def on_exit(self, key, guard=None):
        def deco(fn):
            def wrapper(*args, **kwargs):
                try:
                    return fn(*args, **kwargs)
                finally:
                    if guard is None or guard(*args, **kwargs):
                        self.calls.append(("exit", key))
            return wrapper
        return deco


def test_guards_in_function_points_see_the_functions_own_names(tmp_path):
    src = textwrap.dedent('''\
        def train(batches, optimizer):
            for step, batch in enumerate(batches):
                optimizer.step(batch)


        def evaluate(model, data, *, dry_run: bool = False) -> float:
            return model(data)
        ''')
    s = settings(tmp_path, """\
        - {function: train, at: after_call, call: optimizer.step, guard: step % 2 == 0}
        - {function: evaluate, at: on_exit, guard: not dry_run}
        """, extra="guard: len(batches if 'batches' in dir() else [1]) > 0\n")
    result = transform(src, s)
    assert isinstance(result, Applied), result
    deco = next(ln for ln in result.text.splitlines() if ln.startswith("@"))
    assert "self" not in deco and "lambda model, data, *, dry_run=False:" in deco
    runtime = _Runtime()
    namespace = {"_patchkit_runtime": runtime}
    header = set(header_lines(s))
    code = "\n".join(ln for ln in result.text.splitlines() if ln not in header)
    exec(compile(code, "m.py", "exec"), namespace)
    namespace["train"](["a", "b", "c", "d", "e"], type("Opt", (), {"step": lambda self, b: None})())
    assert runtime.calls == [("step", "t")] * 3  # steps 0, 2 and 4
    runtime.calls.clear()
    assert namespace["evaluate"](len, "abc") == 3
    namespace["evaluate"](len, "abc", dry_run=True)
    assert runtime.calls == [("exit", "t")]


def test_show_describes_function_points_and_builds_the_decorator_without_self(tmp_path):
    settings(tmp_path, """\
        - {function: train, at: after_call, call: optimizer.step}
        - {function: evaluate, at: on_exit, guard: not dry_run}
        - {class: Trainer, method: evaluate, at: on_exit, guard: not self.dry_run}
        """)
    out = CliRunner().invoke(main, ["show", str(tmp_path / "t.yaml")])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert "step after optimizer.step in function train:" in lines
    at = lines.index("step on_exit in function evaluate:")
    assert lines[at + 1] == '    @_patchkit_runtime.on_exit("t", lambda *args, **kwargs: not dry_run)  # patchkit:t'
    at = lines.index("step on_exit in Trainer.evaluate:")
    assert lines[at + 1] == '    @_patchkit_runtime.on_exit("t", lambda self, *args, **kwargs: not self.dry_run)  # patchkit:t'


def test_example_points_picks_function_points_an_example_defines(tmp_path):
    s = settings(tmp_path, """\
        - {function: train, at: method_start}
        - {class: Trainer, method: train, at: method_start}
        - {function: fetch, at: method_end}
        """)
    assert [p.scope for p in example_points(s, "def train():\n    pass\n")] == ["train"]
    assert [p.scope for p in example_points(s, "class Trainer:\n    def train(self):\n        pass\n")] == ["Trainer.train"]
    assert [p.scope for p in example_points(s, "async def fetch():\n    pass\ndef train():\n    pass\n")] == ["train", "fetch"]
    assert example_points(s, "def other():\n    pass\n") is None


# ---------------------------------------------------------------- a recipe file with its own examples

RECIPE = '''\
id: plain-loop
description: steps in a training loop written as plain functions
target: {package: pkg, files: [pkg/train.py]}
backend: torch
options:
  granularity: {choices: [batch, epoch], default: batch}
points:
  - {function: train, at: method_start, action: start}
  - {function: train, at: after_call, call: train_step, when: {granularity: batch}}
  - {function: train, at: loop_end, loop: {iter: epochs}, when: {granularity: epoch}}
  - {function: train_step, at: after_call, call: optimizer.step, guard: step % 2 == 0}
  - {function: evaluate, at: on_exit, guard: not dry_run}
  - {function: serve, nested: handle, at: before_call, call: model.forward}
  - {function: fetch, at: method_end}
examples:
  - name: a step after each training step
    before: |
      def train_step(optimizer, step):
          optimizer.step()


      def train(epochs, batches, optimizer):
          for epoch in epochs:
              for step, batch in enumerate(batches):
                  train_step(optimizer, step)
    after: |
      def train_step(optimizer, step):
          optimizer.step()
          _patchkit_runtime.step("plain-loop", lambda: step % 2 == 0)  # patchkit:plain-loop


      def train(epochs, batches, optimizer):
          _patchkit_runtime.start("plain-loop")  # patchkit:plain-loop
          for epoch in epochs:
              for step, batch in enumerate(batches):
                  train_step(optimizer, step)
                  _patchkit_runtime.step("plain-loop")  # patchkit:plain-loop
  - name: a step per epoch
    options: {granularity: epoch}
    before: |
      def train(epochs, batches, optimizer):
          for epoch in epochs:
              for step, batch in enumerate(batches):
                  train_step(optimizer, step)
    after: |
      def train(epochs, batches, optimizer):
          _patchkit_runtime.start("plain-loop")  # patchkit:plain-loop
          for epoch in epochs:
              for step, batch in enumerate(batches):
                  train_step(optimizer, step)
              _patchkit_runtime.step("plain-loop")  # patchkit:plain-loop
  - name: on_exit lambdas take the function's own parameters
    before: |
      def evaluate(model, data, *, dry_run: bool = False) -> float:
          return model.score(data)
    after: |
      @_patchkit_runtime.on_exit("plain-loop", lambda model, data, *, dry_run=False: not dry_run)  # patchkit:plain-loop
      def evaluate(model, data, *, dry_run: bool = False) -> float:
          return model.score(data)
  - name: a function nested in a function, and an async function
    before: |
      def serve(model):
          def handle(request):
              reply = model.forward(request)
              return reply
          return handle


      async def fetch(client):
          await client.get()
    after: |
      def serve(model):
          def handle(request):
              _patchkit_runtime.step("plain-loop")  # patchkit:plain-loop
              reply = model.forward(request)
              return reply
          return handle


      async def fetch(client):
          await client.get()
          _patchkit_runtime.step("plain-loop")  # patchkit:plain-loop
  - name: a method of the same name is not the function
    before: |
      class Runner:
          def train(self, epochs):
              for epoch in epochs:
                  self.train_step()
    unchanged: true
    reason: no function train at the top level of the file
'''


def test_a_recipe_files_function_point_examples_pass_patchkit_test(tmp_path):
    path = tmp_path / "plain-loop.yaml"
    path.write_text(RECIPE)
    outcomes = patchkit.run_examples(load_recipe(path))
    assert [(o.example.name, o.ok, o.message if not o.ok else "") for o in outcomes] == [
        (ex.name, True, "") for ex in load_recipe(path).recipe.examples]
    assert len(outcomes) == 5
    out = CliRunner().invoke(main, ["test", str(path)])
    assert out.exit_code == 0, out.output
    assert "5 passed, 0 failed" in out.output


def test_a_wrong_expectation_in_a_function_example_fails_patchkit_test(tmp_path):
    path = tmp_path / "plain-loop.yaml"
    path.write_text(RECIPE.replace("      @_patchkit_runtime.on_exit(\"plain-loop\", lambda model, data, *, dry_run=False:",
                                   "      @_patchkit_runtime.on_exit(\"plain-loop\", lambda self, model, data, *, dry_run=False:"))
    out = CliRunner().invoke(main, ["test", str(path)])
    assert out.exit_code == 1
    assert "4 passed, 1 failed" in out.output and "on_exit lambdas take the function's own parameters" in out.output


# ---------------------------------------------------------------- recipe errors and the schema

GOOD_POINT = "  - {function: train, at: method_start}\n"


@pytest.mark.parametrize("point,line,col,message,hint", [
    ("  - {function: train, class: A, at: method_start}\n", 6, 23,
     "a point names either `function:` or `class:` with `method:`, not both", "keep only `function:`"),
    ("  - function: train\n    method: run\n    at: method_start\n", 7, 5,
     "a point names either `function:` or `class:` with `method:`, not both", "remove `function:` for a method"),
    ("  - {class: A, at: method_start}\n", 6, 6, "`class:` needs `method:`", "add `method: NAME`"),
    ("  - {method: run, at: method_start}\n", 6, 6, "`method:` needs `class:`", "write `function: NAME`"),
    ("  - {at: method_start}\n", 6, 5, "a point needs `class:` and `method:`, or `function:`", "`function: train`"),
    ("  - {function: train step, at: method_start}\n", 6, 16, "function 'train step' is not a Python name", "as it is in the source"),
])
def test_a_point_names_a_method_or_a_function_never_both_nor_neither(tmp_path, point, line, col, message, hint):
    path = tmp_path / "t.yaml"
    path.write_text(BASE.format(id="t") + "points:\n" + point)
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    err = info.value
    assert (err.where.path, err.where.line, err.where.col) == (str(path), line, col)
    assert message in err.message and hint in err.hint
    out = CliRunner().invoke(main, ["validate", str(path)])
    assert out.exit_code == 1 and f"{path}:{line}:{col}: " in out.output


def test_the_schema_takes_a_function_point_and_refuses_both_or_neither():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(recipe_schema.PATH.read_text())
    recipe = yaml.safe_load(RECIPE)
    jsonschema.validate(recipe, schema)
    for bad in ({"function": "f", "class": "A", "method": "m", "at": "method_start"},
                {"function": "f", "method": "m", "at": "method_start"},
                {"class": "A", "at": "method_start"},
                {"at": "method_start"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(dict(recipe, points=[bad]), schema)
