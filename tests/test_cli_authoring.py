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
