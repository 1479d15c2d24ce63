"""`patchkit attach PID --auto` on jobs no one prepared: it watches, finds the step, writes the recipe and records
it. Each span of the trace must hold exactly one optimizer step (one forward and one backward for a micro-batch
picked; one model forward for an inference engine); the job's losses are an unattached run's; the recipe saved
records the same steps again without watching, under attach, apply and (for a package) run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import autojobs
from attach_helpers import REPO, gdb_missing, ptrace_denied, traces_in
from test_backends_stderr import KINETO

ONE_STEP = {"job-forward": 2, "job-backward": 2, "job-optimizer": 1, autojobs.OPTIMIZER: 1}
OURS = re.compile(r"\[patchkit\] ")


@pytest.fixture(autouse=True)
def traceable():
    reason = gdb_missing() or ptrace_denied()
    if reason:
        pytest.skip(reason)


def patchkit(tmp: Path, *args, code=0, env=None, timeout=300):
    environ = dict(os.environ, PYTHONPATH=str(REPO))
    environ.update(env or {})
    environ.pop("PATCHKIT_RUN", None)
    done = subprocess.run([sys.executable, "-m", "patchkit", *map(str, args)], capture_output=True, text=True,
                          env=environ, cwd=tmp, timeout=timeout)
    assert code is None or done.returncode == code, done.stderr[-4000:]
    return done


def spans(tmp: Path, recipe_id: str):
    (trace,) = traces_in(tmp / "outputs" / "patchkit" / recipe_id)
    return [counts for _, counts in autojobs.labels_per_span(trace)]


def written(done) -> Path:
    """The recipe file --auto says it wrote."""
    (name,) = re.findall(r"^wrote (\S+\.yaml):", done.stderr, re.M)
    return Path(name)


def only_ours(err: str) -> None:
    assert [ln for ln in err.splitlines() if ln and not OURS.match(ln) and not KINETO.match(ln)] == [], err


def copied_job(tmp: Path) -> Path:
    """The nested job's script in a folder of the test's own (apply edits a script recipe's file in place)."""
    for name in ("auto_nested_job.py", "auto_common.py"):
        shutil.copy(autojobs.TESTS / name, tmp / name)
    return tmp / "auto_nested_job.py"


class Started(autojobs.AutoJob):
    """A job of the test's own copy of a script."""

    def __init__(self, tmp: Path, script: Path):
        self.kind, self.log, self.stop = "nested", tmp / "j.log", tmp / "j.stop"
        self.proc = subprocess.Popen([sys.executable, str(script), "--journal", str(self.log), "--stop",
                                      str(self.stop)], cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0"))
        self.pid = self.proc.pid


def run_script(tmp: Path, script: Path, steps: int, name: str):
    log = tmp / f"{name}.log"
    done = subprocess.run([sys.executable, str(script), "--steps", str(steps), "--journal", str(log), "--stop",
                           str(tmp / f"{name}.stop")], cwd=tmp, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(ln) for ln in log.read_text().splitlines() if '"final"' in ln][-1], done.stderr


def test_the_nested_trainer_s_step_is_found_recorded_and_saved(tmp_path, jobs):
    job = autojobs.start("nested", tmp_path)
    jobs.append(job)
    job.wait_steps(3)
    done = patchkit(tmp_path, "attach", job.pid, "--auto", "--steps", "3")
    assert re.search(r"^ +1\* loop +auto_nested_job\.py:69 +for batch in loader: +in train$", done.stderr, re.M)
    assert "each holds one optimizer step" in done.stderr and "micro_step" in done.stderr
    assert spans(tmp_path, "auto-train") == [ONE_STEP] * 3
    final, err = job.finish()
    only_ours(err)
    plain, _ = run_script(tmp_path, autojobs.SCRIPTS["nested"], final["steps"], "plain")
    assert final["losses"] == plain["losses"]  # the job computed what it computes unattached
    recipe = yaml.safe_load((tmp_path / written(done)).read_text())
    assert recipe["target"] == {"script": str(autojobs.SCRIPTS["nested"])} or \
        recipe["target"]["script"].endswith("auto_nested_job.py")
    assert recipe["points"] == [{"function": "train", "at": "loop_start", "loop": {"iter": "loader"}}]
    patchkit(tmp_path, "test", written(done))


def test_the_saved_recipe_records_the_same_steps_under_attach_and_apply_and_run_says_what_to_use(tmp_path, jobs):
    script = copied_job(tmp_path)
    job = Started(tmp_path, script)
    jobs.append(job)
    job.wait_steps(3)
    done = patchkit(tmp_path, "attach", job.pid, "--auto", "--dry-run", "--save", "mine.yaml")
    assert "nothing recorded" in done.stderr and traces_in(tmp_path / "outputs" / "patchkit" / "mine") == []
    again = patchkit(tmp_path, "attach", job.pid, "mine.yaml", "--steps", "3")
    assert "watching" not in again.stderr and spans(tmp_path, "mine") == [ONE_STEP] * 3
    only_ours(job.finish()[1])
    shutil.rmtree(tmp_path / "outputs")
    patchkit(tmp_path, "apply", "mine.yaml", "schedule.active=3")
    try:
        run_script(tmp_path, script, 8, "applied")
    finally:
        patchkit(tmp_path, "revert", "mine")
    assert spans(tmp_path, "mine") == [ONE_STEP] * 3
    refused = patchkit(tmp_path, "run", "mine.yaml", "--", sys.executable, str(script), code=1)
    assert "patchkit apply mine.yaml" in refused.stderr and "patchkit attach PID mine.yaml" in refused.stderr


def test_a_micro_batch_picked_holds_one_forward_and_one_backward(tmp_path, jobs):
    job = autojobs.start("nested", tmp_path)
    jobs.append(job)
    job.wait_steps(3)
    listed = patchkit(tmp_path, "attach", job.pid, "--auto", "--dry-run")
    (place,) = re.findall(r"^ +\d+ +function +(auto_nested_job\.py:\d+) .* in micro_step$", listed.stderr, re.M)
    assert "1/2 of an optimizer step (a micro-batch: 2 per step)" in listed.stderr
    # picked by its place, which holds from this watch to the next (a number is one listing's only)
    done = patchkit(tmp_path, "attach", job.pid, "--auto", "--pick", place, "--steps", "3")
    assert re.search(rf"^pid \d+: chosen \d+: --pick {place}$", done.stderr, re.M)
    held = spans(tmp_path, "auto-micro-step")  # (the optimizer's step, between two micro-batches, falls in one)
    assert [(c["job-forward"], c["job-backward"]) for c in held] == [(1, 1)] * 3
    only_ours(job.finish()[1])


def test_an_inference_engine_s_step_is_one_forward(tmp_path, jobs):
    job = autojobs.start("engine", tmp_path)
    jobs.append(job)
    job.wait_steps(3)
    done = patchkit(tmp_path, "attach", job.pid, "--auto", "--steps", "3")
    assert "judged by each model forward" in done.stderr
    assert spans(tmp_path, written(done).stem) == [{"job-forward": 1}] * 3
    only_ours(job.finish()[1])


@pytest.mark.parametrize("kind", ["hf", "lightning"])
def test_a_framework_s_trainer_records_one_optimizer_step_a_span(kind, tmp_path, jobs):
    job = autojobs.start(kind, tmp_path, steps=100000)
    jobs.append(job)
    job.wait_steps(3, timeout=300)
    done = patchkit(tmp_path, "attach", job.pid, "--auto", "--steps", "3")
    assert [c.get(autojobs.OPTIMIZER) for c in spans(tmp_path, written(done).stem)] == [1, 1, 1], done.stderr
    assert "call-lightning-module-hook" not in written(done).name, done.stderr  # Lightning's runner of every hook
    only_ours(job.finish()[1])
    if kind == "hf":  # a package's recipe: run takes it as it is
        import frameworksenv

        shutil.rmtree(tmp_path / "outputs")
        site = frameworksenv.site_packages()
        where = subprocess.run([sys.executable, "-c", "import os, transformers; print(os.path.dirname(os.path.dirname("
                                "transformers.__file__)))"], env=dict(os.environ, PYTHONPATH=str(site)),
                               capture_output=True, text=True, check=True).stdout.strip()  # the job's transformers
        ran = patchkit(tmp_path, "run", written(done), "schedule.active=3", "--root", where, "--", sys.executable,
                       autojobs.SCRIPTS["hf"], "--steps", "8", "--journal", tmp_path / "r.log", "--stop",
                       tmp_path / "r.stop", env={"PYTHONPATH": f"{site}{os.pathsep}{REPO}", "OMP_NUM_THREADS": "1"})
        assert [c.get(autojobs.OPTIMIZER) for c in spans(tmp_path, written(done).stem)] == [1, 1, 1], ran.stderr


def test_an_idle_job_has_no_clear_step_nothing_is_written_or_changed_and_it_says_where_its_time_went(tmp_path):
    idle = tmp_path / "idle.py"
    idle.write_text("import time\n\n\ndef wait():\n    while True:\n        time.sleep(5)\n\n\nwait()\n")
    proc = subprocess.Popen([sys.executable, str(idle)], stderr=subprocess.PIPE, text=True)
    try:
        done = patchkit(tmp_path, "attach", proc.pid, "--auto", "--watch", "2", code=1)
        assert "no step is clear: no function or loop repeated 3 times in" in done.stderr
        assert re.search(r"^  100%  idle\.py:6  in wait$", done.stderr, re.M), done.stderr
        assert "error: no step to record: nothing was changed in the job\n  hint: watch longer" in done.stderr
        assert list(tmp_path.glob("*.yaml")) == [] and proc.poll() is None
    finally:
        proc.kill()
        assert proc.communicate()[1] == ""  # nothing on the job's stderr: it was only looked at
