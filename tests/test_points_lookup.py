"""A point whose class, method or function is not there: both places, and the nearest names."""

from __future__ import annotations

import shutil
import textwrap

import pytest
from click.testing import CliRunner

import patchkit
from patchkit.cli.commands import main
from patchkit.engine.codemod import transform
from patchkit.core.errors import AnchorError
from patchkit.core.model import CannotApply
from patchkit.recipe.catalogue import builtin_dir
from patchkit.recipe.load import load_recipe

import realwheels
from conftest import snapshot

BASE = """\
id: t
description: test recipe
target: {package: pkg, files: [pkg/mod.py]}
backend: torch
points:
"""

SOURCE = textwrap.dedent('''\
    class Worker:
        def execute_model(self, batch):
            self.model_runner.execute_model(batch)

        def execute_dummy_batch(self):
            def inner_step():
                pass
            inner_step()


    class WorkerBase:
        pass


    def train(batches):
        for batch in batches:
            step(batch)


    def train_epoch(batches):
        train(batches)
    ''')


def lookup(tmp_path, point: str) -> CannotApply:
    path = tmp_path / "t.yaml"
    path.write_text(BASE + point)
    result = transform(SOURCE, load_recipe(path))
    assert isinstance(result, CannotApply), result
    return result


@pytest.mark.parametrize("point,reason,line,hint", [
    ("  - {class: Worker, method: execute_modle, at: method_start}\n",
     "class Worker has no method execute_modle", 1, "did you mean `method: execute_model` (line 2)? correct the point"),
    ("  - {class: Wroker, method: execute_model, at: method_start}\n",
     "no class Wroker at the top level of the file", None, "did you mean `class: Worker` (line 1) or `class: WorkerBase` (line 11)?"),
    ("  - {function: trian, at: method_start}\n",
     "no function trian at the top level of the file", None, "did you mean `function: train`"),
    ("  - {class: Worker, method: execute_dummy_batch, nested: inner_stp, at: method_start}\n",
     "Worker.execute_dummy_batch defines no nested function inner_stp", 5, "did you mean `nested: inner_step` (line 6)?"),
    ("  - {function: execute_model, at: method_start}\n",
     "no function execute_model at the top level of the file", None,
     "execute_model is a method of class Worker here: write `class: Worker` and `method: execute_model`"),
    ("  - {class: Worker, method: train, at: method_start}\n",
     "class Worker has no method train", 1, "train is a module-level function here: write `function: train`"),
])
def test_a_missing_name_says_where_the_recipe_names_it_and_the_nearest_names(tmp_path, point, reason, line, hint):
    result = lookup(tmp_path, point)
    assert result.reason == f"{reason}, named by the recipe at {tmp_path / 't.yaml'}:6:5"
    assert result.line == line and hint in result.hint


def test_every_point_naming_the_missing_method_is_listed_once(tmp_path):
    result = lookup(tmp_path, "  - {class: Worker, method: run, at: method_start, action: start}\n"
                              "  - {class: Worker, method: run, at: method_end}\n"
                              "  - {class: Worker, method: execute_model, at: method_start}\n")
    path = tmp_path / "t.yaml"
    assert result.reason == f"class Worker has no method run, named by the recipe at {path}:6:5 and {path}:7:5"
    assert result.hint == ("the methods of Worker: `method: execute_model` (line 2), `method: execute_dummy_batch` "
                           "(line 5); `patchkit points` lists every place")  # nothing close: those there


def test_the_hint_of_a_missing_name_reaches_the_error(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(SOURCE)
    path = tmp_path / "t.yaml"
    path.write_text(BASE + "  - {class: Worker, method: execute_modle, at: method_start}\n")
    with pytest.raises(AnchorError) as info:
        patchkit.plan(load_recipe(path), str(tmp_path))
    assert info.value.where.path == str(tmp_path / "pkg" / "mod.py") and info.value.where.line == 1
    assert f"named by the recipe at {path}:6:5" in info.value.message
    assert info.value.hint.startswith("did you mean `method: execute_model`")


@pytest.mark.parametrize("rid,dist,version,typo,fix,more", [
    ("verl-fsdp-update", "verl", "0.4.1", "method: update_polcy", "method: update_policy", " (verl 0.4.1;"),
    # 0.9.1 ships two candidate files; the second fails the same way and is not spelt out twice
    ("vllm-ascend-decode", "vllm-ascend", "0.9.1", "method: execute_modle", "method: execute_model",
     "; worker.py: the same (vllm-ascend 0.9.1;"),
])
def test_a_typo_in_a_copied_recipe_names_both_files_on_a_real_wheel(tmp_path, rid, dist, version, typo, fix, more):
    root = tmp_path / "root"
    shutil.copytree(realwheels.release_root(dist, version), root)
    before = snapshot(root)
    original = (builtin_dir() / f"{rid}.yaml").read_text()
    text = original.replace(f"    {fix}\n", f"    {typo}\n", 1)
    assert text != original
    recipe = tmp_path / f"{rid}.yaml"
    recipe.write_text(text)
    line = text[:text.index(typo)].count("\n")  # the point's first key is on the line above the typo
    target = (root / patchkit.load(rid).recipe.target.files[0]).resolve()

    out = CliRunner().invoke(main, ["diff", str(recipe), "--root", str(root)])
    assert out.exit_code == 1
    message = out.output
    assert message.startswith(f"error: {target}:")
    assert f"named by the recipe at {recipe}:{line}:5{more}" in message
    assert f"hint: did you mean `{fix}`" in message
    assert "Traceback" not in message
    assert snapshot(root) == before
