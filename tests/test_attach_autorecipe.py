"""attach.autorecipe: the step `attach --auto` found, written as a recipe from the job's own files, read as a
stranger's: only the job's script or a module on its path, no link, no file every user may write; the recipe it
writes is `patchkit new`'s, for the package (or the script) the job runs, and it passes `patchkit test`."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from types import SimpleNamespace as NS

import pytest
import yaml

from patchkit.attach import autorecipe
from patchkit.attach.jobpath import JobPath
from patchkit.attach.process import AttachError

TRAIN = textwrap.dedent('''\
    import time


    def micro_step(model, micro):
        return model(micro)


    class Trainer:
        def fit(self, loader, opt):
            for epoch in range(3):
                for batch in loader:
                    for micro in batch:
                        micro_step(self.model, micro)
                    opt.step()

        @staticmethod
        def helper():
            def inner():
                return 1
            return inner
    ''')


@pytest.fixture
def job(tmp_path):
    site = tmp_path / "site"
    (site / "mylab" / "training").mkdir(parents=True)
    (site / "mylab" / "__init__.py").write_text("")
    (site / "mylab" / "training" / "__init__.py").write_text("")
    (site / "mylab" / "training" / "loop.py").write_text(TRAIN)
    meta = site / "mylab-1.2.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: mylab\nVersion: 1.2.0\n")
    (meta / "top_level.txt").write_text("mylab\n")
    script = tmp_path / "run" / "train.py"
    script.parent.mkdir()
    script.write_text(TRAIN)
    return NS(site=site, script=script, path=JobPath((str(site),), str(script), str(script.parent)),
              file=str(site / "mylab" / "training" / "loop.py"))


def loop(file, qualname, line):
    return NS(kind="loop", file=file, qualname=qualname, line=line)


def test_only_the_script_or_a_module_on_the_job_s_path_is_taken(job, tmp_path):
    assert autorecipe.place(job.path, job.file) == autorecipe.Place(str(job.site), "mylab/training/loop.py", "mylab")
    assert autorecipe.place(job.path, str(job.script)) == autorecipe.Place(str(job.script.parent), "train.py", "")
    for said in ("/etc/shadow", "/etc/passwd.py", "<string>", "train.py", str(job.site / "toplevel.py")):
        assert autorecipe.place(job.path, said) is None, said
    assert autorecipe.source(job.path, os.geteuid(), job.file) == TRAIN
    assert autorecipe.source(job.path, os.geteuid(), "/etc/shadow") is None


def test_a_link_or_a_file_every_user_may_write_is_not_read(job, tmp_path):
    secret = tmp_path / "secret.py"
    secret.write_text("x = 'root only'\n")
    os.unlink(job.file)
    os.symlink(secret, job.file)
    assert autorecipe.source(job.path, os.geteuid(), job.file) is None
    with pytest.raises(AttachError):
        autorecipe.copy_in(job.path, os.geteuid(), job.file, str(tmp_path / "copy"))
    os.unlink(job.file)
    Path(job.file).write_text(TRAIN)
    os.chmod(job.file, 0o666)
    assert autorecipe.source(job.path, os.geteuid(), job.file) is None


def test_python_3_10_code_names_get_their_class_from_the_file():
    assert autorecipe.qualname_at(TRAIN, 9, "fit") == "Trainer.fit"
    assert autorecipe.qualname_at(TRAIN, 16, "helper") == "Trainer.helper"  # its decorator's line
    assert autorecipe.qualname_at(TRAIN, 18, "inner") == "Trainer.helper.<locals>.inner"
    assert autorecipe.qualname_at(TRAIN, 4, "micro_step") == "micro_step"
    assert autorecipe.qualname_at("def (", 1, "f") == "f" and autorecipe.qualname_at(TRAIN, 99, "g") == "g"
    assert autorecipe.recipe_name("Trainer.helper.<locals>.inner") == "Trainer.helper.inner"


def test_the_recipe_id_is_numbered_past_the_files_there(tmp_path):
    assert autorecipe.recipe_id("Trainer._inner_training_loop", str(tmp_path)) == "auto-trainer-inner-training-loop"
    (tmp_path / "auto-train.yaml").write_text("")
    assert autorecipe.recipe_id("train", str(tmp_path)) == "auto-train-2"


def test_a_loop_of_a_package_s_module_becomes_a_loop_start_step(job, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    written = autorecipe.write(loop(job.file, "Trainer.fit", 11), job.path, os.geteuid(), None, "torch")
    recipe = yaml.safe_load(written.path.read_text())
    assert written.path.name == "auto-trainer-fit.yaml" and recipe["id"] == "auto-trainer-fit"
    assert recipe["target"]["package"] == "mylab" and recipe["target"]["files"] == ["mylab/training/loop.py"]
    assert recipe["target"]["versions"] == "==1.2.0" and recipe["backend"] == "torch"
    (point,) = recipe["points"]
    assert point == {"class": "Trainer", "method": "fit", "at": "loop_start", "loop": {"iter": "loader"}}
    text = written.path.read_text()
    assert "patchkit-auto-" not in text  # no trace of the private copy
    assert text.startswith("# Written by `patchkit attach --auto` from mylab 1.2.0.")


def test_a_function_of_the_job_s_script_becomes_a_method_start_step_naming_the_script(job, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fn = NS(kind="function", file=str(job.script), qualname="micro_step", line=4)
    written = autorecipe.write(fn, job.path, os.geteuid(), str(tmp_path / "mine.yaml"), "torch")
    recipe = yaml.safe_load(written.path.read_text())
    assert recipe["target"]["script"] == "run/train.py"
    assert recipe["points"] == [{"function": "micro_step", "at": "method_start"}]


def test_no_recipe_for_a_file_the_job_did_not_import_and_nothing_written(job, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AttachError, match="did not import"):
        autorecipe.write(loop("/etc/shadow.py", "f", 1), job.path, os.geteuid(), None, "torch")
    with pytest.raises(AttachError, match="no loop at line 5"):
        autorecipe.write(loop(job.file, "micro_step", 5), job.path, os.geteuid(), None, "torch")
    assert list(tmp_path.glob("*.yaml")) == []
