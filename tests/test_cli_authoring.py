"""`patchkit points` and `patchkit new`, as a user runs them: on a package of one's own and on real releases."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchkit.cli.commands import main

import realwheels

OWN = Path(__file__).resolve().parent / "own_code" / "installed"
LOGPROB = "verl.workers.actor.dp_actor:DataParallelPPOActor.compute_log_prob"
EXECUTE = "vllm.v1.worker.gpu_worker:Worker.execute_model"


def run(*args, code=0):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result


def test_points_prints_each_place_with_the_file_s_line_and_the_recipe_point():
    out = run("points", "tinytrain.loop:Trainer.fit", "--root", OWN).stdout.splitlines()
    assert out[0].startswith("Trainer.fit in tinytrain/loop.py  (tiny-train 1.2.0, ")
    assert out[1] == "a point in it: class: Trainer method: fit and one of the points below"
    assert out[2] == "(before_loop: also loop_start; after_call: also before_call, around_call; --all lists each)"
    assert "--all lists each" not in run("points", "tinytrain.loop:Trainer.fit", "--root", OWN, "--all").stdout
    rows = {ln.split()[0]: ln for ln in out[3:] if ln.strip() and ln.split()[0].isdigit()}
    assert rows["21"].endswith("for batch in batches:                                 at: before_loop loop: {iter: batches}")
    assert rows["24"].split()[-2:] == ["call:", "self.forward"]
    assert any("(end of the loop at line 20)" in ln and ln.endswith("at: loop_end loop: {target: epoch}") for ln in out)
    assert any("(end of the loop at line 21)" in ln and "continue at line 23" in ln for ln in out)


def test_points_all_and_json_give_every_spelling():
    every = run("points", "tinytrain.loop:evaluate", "--root", OWN, "--all").stdout
    assert "at: around_call call: abs action: range name: abs" in every and "at: loop_start loop: {iter: batches}" in every
    data = json.loads(run("points", "tinytrain.loop:evaluate", "--root", OWN, "--json").stdout)
    assert (data["relpath"], data["distribution"], data["version"], data["scope"]) == \
        ("tinytrain/loop.py", "tiny-train", "1.2.0", {"function": "evaluate"})
    loop = next(e for e in data["entries"] if e["kind"] == "loop")
    assert loop["line"] == 33 and loop["points"][0] == {"at": "before_loop", "loop": {"iter": "batches"}}
    assert loop["spelled"] == ["at: before_loop loop: {iter: batches}", "at: loop_start loop: {iter: batches}"]


def test_points_reads_a_file_path_under_root_and_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PATCHKIT_ROOT", raising=False)
    out = run("points", "tinytrain/loop.py::Trainer.fit", "--root", OWN).stdout
    assert out.startswith("Trainer.fit in tinytrain/loop.py  (tiny-train 1.2.0, ")
    missing = run("points", "tinytrain/lop.py::Trainer.fit", "--root", OWN, code=1).stderr
    assert f"no file tinytrain/lop.py under --root {OWN} (looked for {OWN / 'tinytrain' / 'lop.py'})" in missing


def test_points_on_real_releases():
    out = run("points", LOGPROB, "--root", realwheels.release_root("verl", "0.7.1")).stdout
    assert "   475      for micro_batch in micro_batches:" in out
    assert "at: loop_end loop: {iter: micro_batches}" in out
    out = run("points", EXECUTE, "--root", realwheels.release_root("vllm", "0.33.0")).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("  1360"))
    assert line.endswith("at: after_call call: self.model_runner.execute_model")


def test_points_errors_name_the_file_and_the_closest_names():
    result = run("points", "tinytrain.loop:Trainer.fitt", "--root", OWN, code=1)
    assert "loop.py:4:1: class Trainer has no method fitt" in result.stderr
    assert "hint: did you mean `Trainer.fit` (line 18)? write it in the target in place of `Trainer.fitt`" in \
        result.stderr
    result = run("points", "tinytrain.loop:Trainr.fit", "--root", OWN, code=1)  # a misspelt class
    assert "loop.py: no class or function Trainr at the top level of the file" in result.stderr
    assert "hint: did you mean `Trainer.fit` (line 18)? write it in the target in place of `Trainr.fit`" in \
        result.stderr
    assert "function:" not in result.stderr and "recipe" not in result.stderr  # no recipe here to correct
    result = run("points", "tinytrain.lop:Trainer.fit", "--root", OWN, code=1)
    assert "no tinytrain/lop.py" in result.stderr
    assert "module:Class.method" in run("points", "tinytrain.loop", code=1).stderr


# (release or None for the user's own package, target, the code of the line the step goes at, the case the driver
# runs, the steps it records with schedule.wait=1 schedule.active=2)
WALKS = [
    (None, "tinytrain.loop:Trainer.fit", "for batch in batches:", "--all", 1, "tinytrain", [[1, 2]]),
    (("verl", "0.7.1"), LOGPROB, "(end of the loop at line 475)", "", 0, "verl-logprob", [[1, 2]]),
    (("vllm", "0.33.0"), EXECUTE, "output = self.model_runner.execute_model(", "", 0, "vllm-execute", [[1, 2]]),
]


@pytest.mark.parametrize("release, target, code, flag, which, case, recorded", WALKS, ids=[w[5] for w in WALKS])
def test_points_then_new_then_apply_records_the_steps_with_no_hand_edit(tmp_path, monkeypatch, release, target,
                                                                        code, flag, which, case, recorded):
    root = tmp_path / "root"
    shutil.copytree(realwheels.release_root(*release) if release else OWN, root)
    outline = run("points", target, "--root", root, *([flag] if flag else [])).stdout.splitlines()
    at = next(i for i, ln in enumerate(outline) if code in ln)
    point = (outline[at] if which == 0 else outline[at + which]).split("  ")[-1].strip()
    assert point.startswith("at: ")
    monkeypatch.chdir(tmp_path)
    made = run("new", "mine", "--root", root, "--point", f"{target} {point}")
    assert "wrote mine.yaml: 1 point in " in made.stderr
    assert run("test", "./mine.yaml").stdout == "1 passed, 0 failed\n"
    run("validate", "mine.yaml")
    out = tmp_path / "traces"
    run("apply", "./mine.yaml", "--root", root, "backend=torch", "schedule.wait=1", "schedule.active=2",
        f"profiler.save_path={out}")
    done = subprocess.run([sys.executable, str(Path(__file__).parent / "drive_applied.py"), str(root), case],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert [(r["key"], r["recorded"], r["error"]) for r in report] == [("mine", recorded, None)]
    assert len(report[0]["traces"]) == 1 and Path(report[0]["traces"][0]).parent == out
    run("revert", "mine")
    assert "patchkit" not in (root / made.stderr.split("(")[1].split(",")[0]).read_text()


def test_new_s_help_names_every_key_a_point_takes():
    from patchkit.cli.authoring import POINT_HELP
    from patchkit.authoring.spec import KEYS

    assert all(f" {key}" in POINT_HELP for key in KEYS)


REPO = Path(__file__).resolve().parent.parent
SCRIPT = ("class Tiny:\n    def training_step(self, i):\n        return i * 2\n\n\n"
          "if __name__ == '__main__':\n    print(sum(Tiny().training_step(i) for i in range(3)))\n")


def console(args, cwd):
    """The `patchkit` command as the console script runs it: `-P`, so the current folder is not on sys.path."""
    import os
    import shlex

    argv = shlex.split(args) if isinstance(args, str) else [str(a) for a in args]
    assert argv[0] == "patchkit", argv
    return subprocess.run([sys.executable, "-P", "-m", "patchkit", *argv[1:]], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))


def next_commands(stderr: str):
    """Every `patchkit ...` command `new` printed as a next step, in order."""
    import re

    return [c.strip() for c in re.findall(r"(patchkit (?:test|diff|apply|revert) [^;\n]+)", stderr)]


def each_next_command_works(made, cwd, patched: Path, before: str):
    commands = next_commands(made.stderr)
    assert [c.split()[1] for c in commands] == ["test", "diff", "apply", "revert"], made.stderr
    for command in commands:
        done = console(command, cwd)
        assert done.returncode == 0, f"{command}: {done.stderr}"
        if command.split()[1] == "apply":
            assert "# patchkit:" in patched.read_text()
    assert patched.read_text() == before  # reverted, byte for byte
    return commands


@pytest.mark.skipif(sys.version_info < (3, 11), reason="python -P (the console script's sys.path) is 3.11+")
def test_every_next_command_new_prints_works_as_printed(tmp_path):
    """A package under --root, a package found only beside the command (a checkout in the current folder), a script
    beside the recipe, a script elsewhere (an absolute path), and a script found under --root."""
    site = tmp_path / "site"
    shutil.copytree(OWN, site)
    loop = site / "tinytrain" / "loop.py"
    made = console(["patchkit", "new", "own", "--root", "site", "--point",
                    "tinytrain.loop:Trainer.fit at: before_loop loop: {iter: batches}"], tmp_path)
    assert made.returncode == 0, made.stderr
    assert each_next_command_works(made, tmp_path, loop, loop.read_text())[1] == "patchkit diff ./own.yaml --root site"

    work = tmp_path / "work"
    (work / "mylab").mkdir(parents=True)
    (work / "mylab" / "__init__.py").write_text("")
    (work / "mylab" / "trainer.py").write_text(SCRIPT.replace("Tiny", "Trainer"))
    made = console(["patchkit", "new", "mylab-step", "--point", "mylab/trainer.py::Trainer.training_step at: "
                    "method_start"], work)
    assert made.returncode == 0, made.stderr
    commands = each_next_command_works(made, work, work / "mylab" / "trainer.py", SCRIPT.replace("Tiny", "Trainer"))
    assert commands[2] == "patchkit apply ./mylab-step.yaml --root ."
    assert console("patchkit diff ./mylab-step.yaml", work).returncode == 1  # without it: not in this environment

    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "train.py").write_text(SCRIPT)
    made = console(["patchkit", "new", "ts", "--point", "train.py::Tiny.training_step at: method_start"], jobs)
    assert made.returncode == 0, made.stderr
    assert "wrote ts.yaml: 1 point in Tiny.training_step (the script " in made.stderr
    assert "  script: train.py  # the job's script" in (jobs / "ts.yaml").read_text()
    commands = each_next_command_works(made, jobs, jobs / "train.py", SCRIPT)
    assert commands == ["patchkit test ./ts.yaml", "patchkit diff ./ts.yaml", "patchkit apply ./ts.yaml",
                        "patchkit revert ts"]

    (tmp_path / "recipes").mkdir()
    made = console(["patchkit", "new", "elsewhere", "-o", "../recipes/elsewhere.yaml", "--point",
                    "train.py::Tiny.training_step at: on_exit"], jobs)
    assert made.returncode == 0, made.stderr
    assert f"  script: {jobs / 'train.py'}  #" in (tmp_path / "recipes" / "elsewhere.yaml").read_text()
    each_next_command_works(made, jobs, jobs / "train.py", SCRIPT)

    made = console(["patchkit", "new", "under-root", "--root", "jobs", "--point",
                    "train.py::Tiny.training_step at: method_start"], tmp_path)
    assert made.returncode == 0, made.stderr
    assert "  script: jobs/train.py  #" in (tmp_path / "under-root.yaml").read_text()
    each_next_command_works(made, tmp_path, jobs / "train.py", SCRIPT)


def test_new_on_a_script_writes_nothing_for_points_in_two_places_or_a_top_level_module(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "other.py").write_text(SCRIPT)
    result = run("new", "two", "--point", "train.py::Tiny.training_step at: method_start",
                 "--point", "other.py::Tiny.training_step at: method_start", code=1)
    assert f"the points are in the script {tmp_path / 'train.py'} and the script {tmp_path / 'other.py'}; a recipe " \
           "patches one package or one script" in result.stderr
    result = run("new", "mod", "--root", tmp_path, "--point", "train:Tiny.training_step at: method_start", code=1)
    assert "is the module train, in no package: a recipe patches a package's file or a script" in result.stderr
    assert "if the job runs it (python train.py), name it as train.py::Tiny.training_step" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.py", "train.py"]
