"""examples: a recipe's own before/after examples pass only when the recipe does exactly what they say."""

from __future__ import annotations

import pytest
import yaml

from patchkit.engine import examples
from patchkit.recipe.load import load, load_recipe

HEAD = """\
id: probe
description: d
target: {package: pkg, files: [pkg/core.py]}
backend: torch
options: {where: {choices: [start, end], default: start}}
points:
  - {class: Trainer, method: step, at: method_start, when: {where: start}}
  - {class: Trainer, method: step, at: method_end, when: {where: end}}
"""

BEFORE = "class Trainer:\n    def step(self):\n        self.work()\n"
STEP = '        _patchkit_runtime.step("probe")  # patchkit:probe\n'


def recipe(tmp_path, **example):
    path = tmp_path / "probe.yaml"
    path.write_text(HEAD + yaml.safe_dump({"examples": [{"name": "x", "before": BEFORE, **example}]}))
    return load_recipe(path)


def outcome(tmp_path, **example):
    [o] = examples.run_examples(recipe(tmp_path, **example))
    return o


def test_an_example_that_holds_passes(tmp_path):
    o = outcome(tmp_path, name="a step first", after=BEFORE.replace("        self", STEP + "        self"))
    assert (o.recipe, o.example.name, o.ok, o.message) == ("probe", "a step first", True, "")


def test_an_example_with_options_runs_with_them_chosen(tmp_path):
    o = outcome(tmp_path, options={"where": "end"}, after=BEFORE + STEP)
    assert o.ok, o.message


def test_another_output_fails_with_a_diff(tmp_path):
    o = outcome(tmp_path, after=BEFORE + STEP)
    assert not o.ok and o.message.startswith("the output differs from `after`:\n--- expected\n+++ got\n")
    assert "+" + STEP + "         self.work()" in o.message


def test_an_input_that_must_stay_unchanged(tmp_path):
    other = "class Trainer:\n    def other(self):\n        pass\n"
    o = outcome(tmp_path, before=other, unchanged=True, reason="step")
    assert o.ok and "step" in o.message  # the reason the recipe gave
    o = outcome(tmp_path, before=other, unchanged=True, reason="something else entirely")
    assert not o.ok and o.message.startswith("expected the reason to mention 'something else entirely', got ")
    o = outcome(tmp_path, unchanged=True)
    assert (o.ok, o.message) == (False, "expected the input to stay unchanged, but the recipe applied")


def test_an_example_expecting_a_change_where_none_applies(tmp_path):
    o = outcome(tmp_path, before="x = 1\n", after="x = 1\n")
    assert not o.ok and o.message.startswith("expected a change, got: ")


def test_every_built_in_example_passes():
    for rid in ("verl-fsdp-update", "vllm-ascend-decode", "mindspeed-rl-update"):
        results = examples.run_examples(load(rid))
        assert results and all(r.ok for r in results), [(r.example.name, r.message) for r in results if not r.ok]


@pytest.mark.parametrize("source,expected", [
    ("class Trainer:\n    def step(self):\n        pass\n", ["Trainer.step"]),
    ("class Other:\n    pass\n", None),
    ("def (:\n", None),
    ("@dataclass\nclass Trainer:\n    async def step(self):\n        pass\n", ["Trainer.step"]),
])
def test_example_points_are_those_whose_class_the_example_defines(tmp_path, source, expected):
    settings = recipe(tmp_path, unchanged=True)
    points = examples.example_points(settings, source)
    assert (None if points is None else [f"{p.cls}.{p.method}" for p in points]) == expected


def test_the_engine_reads_code_on_libcst_s_tree_only():
    """The engine finds code with libcst (the tree the codemod writes): no module of it parses with ``ast``,
    whose tree would disagree with libcst's on what a file defines (a decorated class, an async def)."""
    import ast
    from pathlib import Path

    engine = Path(examples.__file__).resolve().parent
    parsing = []
    for path in sorted(engine.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "ast" or n.startswith("ast.") for n in names):
                parsing.append(path.relative_to(engine).as_posix())
    assert not parsing, f"engine modules that parse with ast: {parsing}"
