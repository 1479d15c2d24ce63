"""`patchkit attach` on a job started as `python train.py`: the recipe's target is the script, its class lives in the
job's `__main__`; the next N steps recorded, the losses those of an unattached run, the job's own code back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import attach_helpers as helpers
from attach_helpers import Running, attach

pytestmark = pytest.mark.skipif(bool(helpers.gdb_missing() or helpers.ptrace_denied()),
                                reason=helpers.gdb_missing() or helpers.ptrace_denied() or "")

TRAIN = textwrap.dedent("""\
    import json, os, sys, time

    import torch


    class Tiny:
        def __init__(self):
            torch.manual_seed(0)
            self.model = torch.nn.Linear(8, 1)
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)
            self.x, self.y = torch.randn(16, 8), torch.randn(16, 1)

        def training_step(self, i):
            with torch.profiler.record_function(f"job-step-{i}"):
                loss = torch.nn.functional.mse_loss(self.model(self.x), self.y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                return float(loss)


    if __name__ == "__main__":
        log, stop, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
        t, code, losses = Tiny(), Tiny.training_step.__code__, []
        with open(log, "a") as out:
            for i in range(steps):
                if os.path.exists(stop):
                    break
                start = time.time()
                losses.append(t.training_step(i))
                out.write(json.dumps({"step": i, "start": start, "end": time.time()}) + "\\n")
                out.flush()
                time.sleep(0.03)
            out.write(json.dumps({"final": True, "steps": len(losses), "losses": losses,
                                  "original": Tiny.training_step.__code__ is code,
                                  "left": [n for n in globals() if "patchkit" in n]}) + "\\n")
    """)
RECIPE = textwrap.dedent("""\
    id: ts
    description: one step per call of Tiny.training_step, in a script
    target:
      script: train.py
    backend: torch
    profiler:
      contents: [cpu]
      save_path: {save}
    points:
      - class: Tiny
        method: training_step
        at: method_start
    """)
STEPS = 160


class Script(Running):
    """``python <folder>/train.py``, started without patchkit (its environment cannot import it)."""

    def __init__(self, tmp: Path, script: Path, name: str):
        self.log, self.stop = tmp / f"{name}.log", tmp / f"{name}.stop"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PATCHKIT_RUN")}
        self.proc = subprocess.Popen([sys.executable, str(script), str(self.log), str(self.stop), str(STEPS)],
                                     cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.pid = self.proc.pid

    def final(self):
        _, err = self.proc.communicate(timeout=300)
        return next(ln for ln in self.lines() if "final" in ln), err


@pytest.fixture
def started():
    jobs = []
    yield jobs
    for job in jobs:
        job.kill()


def test_a_python_train_py_job_s_class_is_attached_in_its_main(tmp_path, started):
    job_dir, recipes = tmp_path / "job", tmp_path / "recipes"
    job_dir.mkdir()
    recipes.mkdir()
    (job_dir / "train.py").write_text(TRAIN)
    recipe = recipes / "ts.yaml"  # the recipe's own folder holds no train.py: --root names the job's
    recipe.write_text(RECIPE.format(save=tmp_path / "traces"))
    plain = Script(tmp_path, job_dir / "train.py", "plain")
    job = Script(tmp_path, job_dir / "train.py", "job")
    started += [plain, job]
    job.wait_steps(20)
    done = attach(tmp_path, [job.pid, recipe, "--root", job_dir, "--steps", 3, "--json"])
    assert done.returncode == 0, done.stderr
    (status,) = json.loads(done.stdout)
    assert status["state"] == "restored" and status["original_code"] and status["why"] == "the window closed"
    assert status["targets"] == ["__main__:Tiny.training_step"]
    (capture,) = status["captures"]
    (trace,) = capture["traces"]
    spans = helpers.recorded_labels(trace)
    assert [j for j, _ in spans] == [0, 1, 2] and all(len(labels) == 1 for _, labels in spans), spans
    k = spans[0][1][0]
    assert [labels[0] for _, labels in spans] == [k, k + 1, k + 2]
    final, err = job.final()
    unattached, _ = plain.final()
    assert final["steps"] == unattached["steps"] == STEPS and final["losses"] == unattached["losses"]
    assert final["original"] is True and final["left"] == []
    assert "Traceback" not in err

    other = tmp_path / "other"  # a recipe planned on another copy of the script: refused in the job, nothing changed
    other.mkdir()
    (other / "train.py").write_text(TRAIN)
    job = Script(tmp_path, job_dir / "train.py", "again")
    started.append(job)
    job.wait_steps(5)
    done = attach(tmp_path, [job.pid, recipe, "--root", other, "--steps", 3])
    assert done.returncode == 1
    assert f"the job runs {job_dir / 'train.py'} as its script (__main__), not {other / 'train.py'}" in done.stderr
    job.stop.touch()
    final, _ = job.final()
    assert final["original"] is True and final["left"] == []


def test_without_root_the_script_the_job_runs_is_planned_on(tmp_path, started):
    job_dir, recipes = tmp_path / "job", tmp_path / "recipes"
    job_dir.mkdir()
    recipes.mkdir()
    (job_dir / "train.py").write_text(TRAIN)
    recipe = recipes / "ts.yaml"  # its folder holds no train.py: the job says which one it runs
    recipe.write_text(RECIPE.format(save=tmp_path / "traces"))
    job = Script(tmp_path, job_dir / "train.py", "job")
    started.append(job)
    job.wait_steps(10)
    done = attach(tmp_path, [job.pid, recipe, "--steps", 2, "--json"])
    assert done.returncode == 0, done.stderr
    (status,) = json.loads(done.stdout)
    assert status["state"] == "restored" and status["original_code"]
    assert [j for j, _ in helpers.recorded_labels(status["captures"][0]["traces"][0])] == [0, 1]
    job.stop.touch()
    final, err = job.final()
    assert final["original"] is True and final["left"] == [] and "Traceback" not in err
