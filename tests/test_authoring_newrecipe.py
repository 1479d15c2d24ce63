"""`patchkit new` as an API: a recipe that works as written, or an error and nothing on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from patchkit.core.errors import AnchorError, RecipeError, TargetError
from patchkit.engine.examples import run_examples
from patchkit.recipe.load import load_recipe
from patchkit.authoring.newrecipe import write_new

OWN = Path(__file__).resolve().parent / "own_code" / "installed"
FIT = "tinytrain.loop:Trainer.fit"


def new(tmp_path, *specs, rid="mine", start_from=None, backend=None, output=None):
    return write_new(rid, specs, start_from, str(OWN), str(output or tmp_path / f"{rid}.yaml"), backend)


def test_the_recipe_names_package_files_version_and_the_points_and_its_example_passes(tmp_path):
    written = new(tmp_path, f"{FIT} at: before_loop loop: {{target: epoch}} action: start",
                  "tinytrain.loop:evaluate at: loop_end loop: batches")
    text = written.path.read_text()
    assert text.startswith("# Written by `patchkit new` from tiny-train 1.2.0.\n")
    assert "  versions: ==1.2.0  # proven on the version installed where this was written (tiny-train 1.2.0)" in text
    settings = load_recipe(written.path)
    r = settings.recipe
    assert (r.target.package, r.target.distribution, r.target.files) == ("tinytrain", "tiny-train", ("tinytrain/loop.py",))
    assert [(p.cls, p.method, p.at, p.action) for p in r.points] == [("Trainer", "fit", "before_loop", "start"),
                                                                      (None, "evaluate", "loop_end", "step")]
    assert r.backend == "npu" and r.schedule.active == 1 and r.profiler.save_path == "./outputs/patchkit/mine"
    assert [e.name for e in r.examples] == ["Trainer.fit as in tiny-train 1.2.0", "evaluate as in tiny-train 1.2.0"]
    assert all(o.ok for o in run_examples(settings))
    assert written.versions == "==1.2.0" and written.described[1] == "evaluate: at: loop_end loop: {iter: batches}"


def test_from_a_built_in_recipe_takes_its_settings_and_notes(tmp_path):
    written = new(tmp_path, f"{FIT} at: loop_start loop: {{iter: batches}}", start_from="vllm-decode", backend="torch")
    data = yaml.safe_load(written.path.read_text())
    built_in = yaml.safe_load((Path(__file__).resolve().parent.parent / "recipes" / "vllm-decode.yaml").read_text())
    assert data["backend"] == "torch" and data["notes"] == built_in["notes"]
    assert data["schedule"] == {k: built_in["schedule"].get(k, 0 if k != "repeat" else 1)
                                for k in ("wait", "warmup", "active", "repeat", "skip_first")}
    assert "starting from the settings of vllm-decode" in written.path.read_text().splitlines()[0]


def test_an_existing_file_is_never_replaced(tmp_path):
    (tmp_path / "mine.yaml").write_text("mine\n")
    with pytest.raises(RecipeError, match="exists; patchkit new never replaces a file"):
        new(tmp_path, f"{FIT} at: method_start")
    assert (tmp_path / "mine.yaml").read_text() == "mine\n"


@pytest.mark.parametrize("spec, error, words", [
    (f"{FIT} at: after_call call: self.foward", AnchorError, "did you mean `call: self.forward` (line 24)"),
    (f"{FIT} at: loop_end loop: {{iter: batches}}", AnchorError, "continue at line 23"),
    (f"{FIT} at: loop_edn loop: batches", RecipeError, "did you mean loop_end?"),
    (f"{FIT}", RecipeError, "names no point after the target"),
    ("tinytrain.loop:Trainer.fitt at: method_start", AnchorError, "did you mean `Trainer.fit` (line 18)"),
    ("tinytrain.loops:Trainer.fit at: method_start", TargetError, "no tinytrain/loops.py"),
])
def test_a_point_that_does_not_fit_names_the_point_and_writes_nothing(tmp_path, spec, error, words):
    with pytest.raises(error) as caught:
        new(tmp_path, spec)
    assert words in caught.value.message + caught.value.hint
    if error is not TargetError and "names no point" not in words:
        assert f"--point {spec!r}" in caught.value.message or "loop.py" in str(caught.value.where)
    assert list(tmp_path.iterdir()) == []


def test_the_file_name_is_the_id(tmp_path):
    with pytest.raises(RecipeError, match="is not mine.yaml"):
        new(tmp_path, f"{FIT} at: method_start", output=tmp_path / "other.yaml")
    with pytest.raises(RecipeError, match="not a valid recipe id"):
        new(tmp_path, f"{FIT} at: method_start", rid="My Recipe")
    assert list(tmp_path.iterdir()) == []


def test_a_folder_it_cannot_write_in_is_a_clean_error_and_nothing_is_written(tmp_path, monkeypatch):
    import tempfile

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(RecipeError, match="cannot write mine.yaml in .*: Permission denied") as caught:
        new(tmp_path, f"{FIT} at: method_start")
    assert "-o DIR/NAME.yaml" in caught.value.hint and list(tmp_path.iterdir()) == []


def test_without_hard_links_the_file_is_still_created_only_if_it_is_not_there(tmp_path, monkeypatch):
    import os

    def no_links(*args, **kwargs):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    written = new(tmp_path, f"{FIT} at: method_start")
    assert load_recipe(written.path).recipe.id == "mine" and [p.name for p in tmp_path.iterdir()] == ["mine.yaml"]


def test_one_name_in_two_files_is_refused_before_anything_is_written(tmp_path):
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("")
    for module, loop in (("core", "batches"), ("other", "items")):
        (site / "pkg" / f"{module}.py").write_text(
            f"class A:\n    def run(self, {loop}):\n        for b in {loop}:\n            self.work(b)\n")
    with pytest.raises(RecipeError, match="the points name A in pkg/core.py and in pkg/other.py"):
        write_new("two", ["pkg.core:A.run at: loop_end loop: batches", "pkg.other:A.run at: loop_end loop: items"],
                  None, str(site), str(tmp_path / "two.yaml"), None)
    assert not (tmp_path / "two.yaml").exists()


def test_a_script_s_recipe_names_it_from_the_recipe_s_folder_or_absolute_and_needs_no_root(tmp_path, monkeypatch):
    from patchkit.authoring.newrecipe import write_new

    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "train.py").write_text("class Tiny:\n    def step(self, i):\n        return i\n")
    point = "jobs/train.py::Tiny.step at: method_start"
    written = write_new("beside", [point], None, None, None, "torch")
    assert (written.root, written.versions, written.ref.package) == ("", "", "")
    assert "  script: jobs/train.py  #" in (tmp_path / "beside.yaml").read_text()
    (tmp_path / "out").mkdir()
    written = write_new("away", [point], None, None, "out/away.yaml", "torch")  # '..' is refused: absolute
    assert f"  script: {tmp_path / 'jobs' / 'train.py'}  #" in (tmp_path / "out" / "away.yaml").read_text()
    import patchkit

    assert patchkit.plan(patchkit.load("out/away.yaml")).files[0].path == tmp_path / "jobs" / "train.py"


def test_a_package_beside_the_command_is_named_with_root_in_the_next_commands(tmp_path, monkeypatch):
    from patchkit.authoring.newrecipe import write_new

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mylab").mkdir()
    (tmp_path / "mylab" / "__init__.py").write_text("")
    (tmp_path / "mylab" / "trainer.py").write_text("class T:\n    def step(self, i):\n        return i\n")
    written = write_new("here", ["mylab/trainer.py::T.step at: method_start"], None, None, None, "torch")
    assert written.root == "."
    written = write_new("given", ["mylab/trainer.py::T.step at: method_start"], None, str(tmp_path), None, "torch")
    assert written.root == str(tmp_path)
