"""Proven on the real code: real verl releases, patched by patchkit, train on CPU and the traces hold the right steps.

Each test installs a whole verl wheel into a folder of its own, applies a
built-in recipe to it with ``patchkit apply --root`` (or profiles it with
``patchkit run``, no file edited), and runs verl's own classes on a tiny
random model under ``torchrun`` (2 ranks, gloo, CPU): ``DataParallelPPOActor``
``update_policy`` and ``compute_log_prob`` and ``DataParallelPPOCritic``
``update_critic`` (tests/verl_drive.py), the FSDP engine's ``train_batch``
(tests/verl_drive_engine.py).  One update is 3 mini-batches of 3
micro-batches.  It then checks, from the manifests and traces:

- each rank recorded exactly the steps the schedule asked for, and each
  ``ProfilerStep#`` span holds the model's own work for that step (the
  forward and backward of one micro-batch, or of a whole mini-batch and its
  optimizer step), none of it outside the spans;
- the numbers verl returns (losses, grad norms, log-probs) are identical
  with the recipe applied, applied outside its window, and not applied;
- after ``revert`` every file of the wheel is byte-identical to its RECORD.

The environments (tests/verlenv.py) are built once into a cache outside the
repository.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import realverl
import verlenv

# two releases of verl-fsdp-update's range (>=0.3,<=0.7.1), run for real: 0.4.1 and the newest (0.3 is proven on
# its placement alone, tests/test_real_targets.py)
DP = ["0.4.1", "0.7.1"]
NEWEST_DP = DP[-1]
ENGINE = ["0.8.0", "0.9.1"]  # the engine is the only training path from 0.8 on
JOBS = "actor-update,actor-logprob,critic-update"
ENGINE_JOBS = "engine-actor,engine-critic"
TORCH = ["backend=torch", "schedule.warmup=0", "schedule.repeat=1"]
MICRO = {"forward": 1, "backward": 1, "optimizer": 0}  # one training micro-batch
MINI = {"forward": 3, "backward": 3, "optimizer": 1}  # 3 micro-batches and the optimizer step
LOGPROB = {"forward": 1, "backward": 0, "optimizer": 0}  # one forward-only micro-batch
NOTHING = {"forward": 0, "backward": 0, "optimizer": 0}

_BASELINES: dict = {}


def baseline(version: str, driver: str, jobs: str, factory) -> dict:
    """The numbers of the unpatched release (one run per release and driver for the session)."""
    key = (version, driver, jobs)
    if key not in _BASELINES:
        base = factory.mktemp("baseline-%s-%s" % (driver, version))
        site = verlenv.install(version, base / "site")
        realverl.run(realverl.command(driver, jobs, base / "out"), realverl.environ(version, base / "home", site),
                     base)
        _BASELINES[key] = realverl.numbers(base / "out")
        assert sorted(_BASELINES[key]) == [0, 1]
    return _BASELINES[key]


class Job:
    """One release installed under ``tmp``, patched or not, run by its own environment."""

    def __init__(self, tmp: Path, version: str, driver: str = "dp", jobs: str = JOBS):
        self.tmp, self.version, self.driver, self.jobs = tmp, version, driver, jobs
        self.home, self.traces, self.out = tmp / "home", tmp / "traces", tmp / "out"
        self.site = verlenv.install(version, tmp / "site")

    def patchkit(self, *args: str, code: int = 0) -> subprocess.CompletedProcess:
        return realverl.patchkit(self.home, *args, code=code)

    def apply(self, recipe: str, *overrides: str) -> None:
        self.patchkit("apply", recipe, "--root", str(self.site), *TORCH, *overrides,
                      "profiler.save_path=%s" % self.traces)

    def command(self, **kw) -> list:
        return realverl.command(self.driver, self.jobs, self.out, **kw)

    def run(self, prefix=(), **kw) -> subprocess.CompletedProcess:
        return realverl.run([*prefix, *self.command(**kw)], self.environ(), self.tmp)

    def environ(self, extra=None) -> dict:
        return realverl.environ(self.version, self.home, self.site, extra)

    def captures(self):
        return realverl.manifests(self.traces)

    def steps(self):
        """(rank, role, steps recorded) of every capture."""
        return [(m["rank"], m["role"], m["steps"]) for m in self.captures()]

    def work(self):
        """What each step span of each capture holds, by (rank, role)."""
        return {(m["rank"], m["role"]): realverl.work(self.traces, m) for m in self.captures()}

    def reverted_to_the_wheel(self, recipe: str) -> list:
        self.patchkit("revert", recipe, "--root", str(self.site))
        return verlenv.record_mismatches(self.version, self.site)

    def proves(self, recipe: str, captures, steps, held: dict, factory) -> None:
        """What a patched run must show: a capture for each (rank, role) of ``captures`` holding exactly
        ``steps``, ``held`` in each step's span and nothing outside them, the numbers of the unpatched
        release, and after ``revert`` the wheel's bytes."""
        assert self.steps() == [(rank, role, steps) for rank, role in captures]
        assert self.work() == each_span(self.work(), steps, held)
        assert realverl.numbers(self.out) == baseline(self.version, self.driver, self.jobs, factory)
        assert self.reverted_to_the_wheel(recipe) == []


def on_each_rank(*roles: str) -> list:
    """A capture on each of the two ranks for each role (``""``: the recipe has no roles)."""
    return [(rank, role) for rank in (0, 1) for role in roles]


def each_span(work: dict, steps, held: dict) -> dict:
    """What ``work`` should be: ``held`` in the span of each of ``steps``, nothing outside."""
    want = {"ProfilerStep#%d" % s: held for s in steps}
    want["outside"] = NOTHING
    return {key: want for key in work}


@pytest.mark.parametrize("version", DP)
def test_update_policy_micro_window_records_the_2nd_and_3rd_micro_batch_on_each_rank(tmp_path_factory, version):
    job = Job(tmp_path_factory.mktemp("micro"), version)
    job.apply("verl-fsdp-update", "granularity=micro", "schedule.wait=1", "schedule.active=2")
    job.run()
    job.proves("verl-fsdp-update", on_each_rank(""), [1, 2], MICRO, tmp_path_factory)


@pytest.mark.parametrize("version", DP)
def test_update_policy_mini_window_records_whole_mini_batches_with_their_optimizer_step(tmp_path_factory, version):
    job = Job(tmp_path_factory.mktemp("mini"), version)
    job.apply("verl-fsdp-update", "granularity=mini", "schedule.wait=0", "schedule.active=2")
    job.run()
    job.proves("verl-fsdp-update", on_each_rank(""), [0, 1], MINI, tmp_path_factory)


@pytest.mark.parametrize("version", DP)
def test_applied_outside_its_window_it_records_nothing_and_changes_no_number(tmp_path_factory, version):
    job = Job(tmp_path_factory.mktemp("outside"), version)
    job.apply("verl-fsdp-update", "granularity=micro", "schedule.wait=100", "schedule.active=2")
    job.run()
    job.proves("verl-fsdp-update", [], [], NOTHING, tmp_path_factory)


@pytest.mark.parametrize("version", DP)
def test_compute_log_prob_gives_the_actor_and_the_reference_model_a_capture_each(tmp_path_factory, version):
    job = Job(tmp_path_factory.mktemp("logprob"), version)
    job.apply("verl-fsdp-logprob", "role=all", "schedule.wait=1", "schedule.active=2")
    job.run()
    job.proves("verl-fsdp-logprob", on_each_rank("actor", "ref"), [1, 2], LOGPROB, tmp_path_factory)


def test_a_recipe_written_with_points_and_new_records_log_prob_micro_batches_as_written(tmp_path_factory):
    """A new user's way to code no recipe covers: `patchkit points` shows compute_log_prob's lines with their
    points, `patchkit new` writes a recipe from two of them, and it tests, applies, records and reverts as it is."""
    job = Job(tmp_path_factory.mktemp("own"), NEWEST_DP)
    target = "verl.workers.actor.dp_actor:DataParallelPPOActor.compute_log_prob"
    outline = json.loads(job.patchkit("points", target, "--root", str(job.site), "--json").stdout)
    [loop] = [e for e in outline["entries"] if e["kind"] == "loop" and "micro_batches" in e["code"]]
    [end] = [e for e in outline["entries"] if e["kind"] == "loop_end"]
    assert (loop["spelled"][0], end["spelled"][0]) == ("at: before_loop loop: {iter: micro_batches}",
                                                      "at: loop_end loop: {iter: micro_batches}")
    recipe = job.tmp / "my-logprob.yaml"
    job.patchkit("new", "my-logprob", "--root", str(job.site), "-o", str(recipe),
                 "--point", f"{target} {loop['spelled'][0]} action: start", "--point", f"{target} {end['spelled'][0]}")
    assert "==%s" % NEWEST_DP in recipe.read_text()
    assert "1 passed, 0 failed" in job.patchkit("test", str(recipe)).stdout
    job.apply(str(recipe), "schedule.wait=1", "schedule.active=2")
    job.run()
    # no roles: the actor's pass and the reference model's share one count, and the window falls in the actor's
    job.proves("my-logprob", on_each_rank(""), [1, 2], LOGPROB, tmp_path_factory)


@pytest.mark.parametrize("version", DP)
def test_update_critic_micro_window_records_the_value_model_s_micro_batches(tmp_path_factory, version):
    job = Job(tmp_path_factory.mktemp("critic"), version)
    job.apply("verl-fsdp-critic-update", "granularity=micro", "schedule.wait=1", "schedule.active=2")
    job.run()
    job.proves("verl-fsdp-critic-update", on_each_rank(""), [1, 2], MICRO, tmp_path_factory)


def test_patchkit_run_gives_the_same_steps_and_numbers_with_no_file_edited(tmp_path_factory):
    job = Job(tmp_path_factory.mktemp("run"), NEWEST_DP)
    done = job.run(prefix=[sys.executable, "-m", "patchkit", "run", "verl-fsdp-update", "--root", str(job.site),
                           *TORCH, "granularity=micro", "schedule.wait=1", "schedule.active=2",
                           "profiler.save_path=%s" % job.traces, "--"])
    assert "patching verl.workers.actor.dp_actor in memory" in done.stderr
    assert job.steps() == [(0, "", [1, 2]), (1, "", [1, 2])]
    assert job.work() == each_span(job.work(), [1, 2], MICRO)
    assert realverl.numbers(job.out) == baseline(NEWEST_DP, "dp", JOBS, tmp_path_factory)
    assert verlenv.record_mismatches(NEWEST_DP, job.site) == []


def test_capture_on_demand_records_two_micro_batches_of_a_run_in_progress(tmp_path_factory):
    job = Job(tmp_path_factory.mktemp("capture"), NEWEST_DP, jobs="actor-update")
    argv = [sys.executable, "-m", "patchkit", "run", "verl-fsdp-update", "--root", str(job.site), "backend=torch",
            "granularity=micro", "schedule.trigger=manual", "profiler.save_path=%s" % job.traces, "--",
            *job.command(updates=400, pause=0.2)]
    env = job.environ({"PATCHKIT_POLL": "0.1"})
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=job.tmp,
                            start_new_session=True)
    try:
        done = _capture_when_ready(job, proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=120)
    answers = sorted(line for line in done.stdout.splitlines() if line.startswith("rank "))
    assert [a.split(" ")[1] for a in answers] == ["0", "1"], done.stdout + done.stderr
    # Each span holds one micro-batch's forward and backward.  A window may open at any step: a span that
    # starts after the last micro-batch of a mini-batch also holds that mini-batch's optimizer step, which runs
    # between the two step lines (at most one of two spans, with 3 micro-batches a mini-batch).
    for held in job.work().values():
        assert held.pop("outside") == NOTHING
        assert sorted(held) == ["ProfilerStep#%d" % s for s in _asked_steps(answers)]
        assert [(h["forward"], h["backward"]) for h in held.values()] == [(1, 1), (1, 1)], held
        assert sum(h["optimizer"] for h in held.values()) <= 1, held


def _capture_when_ready(job: Job, proc: subprocess.Popen) -> subprocess.CompletedProcess:
    deadline = time.time() + 300
    while time.time() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-4000:]
        done = job.patchkit("capture", "verl-fsdp-update", "--steps", "2", "--timeout", "120", code=None)
        if done.returncode == 0:
            return done
        time.sleep(1)
    raise AssertionError("nobody answered `patchkit capture` in 300 s")


def _asked_steps(answers):
    (first, last), = {tuple(map(int, re.search(r": steps (\d+)-(\d+) -> ", a).groups())) for a in answers}
    assert last - first == 1
    return [first, last]


def test_a_step_line_moved_by_one_statement_is_caught_by_the_spans(tmp_path_factory):
    job = Job(tmp_path_factory.mktemp("moved"), NEWEST_DP, jobs="actor-update")
    job.apply("verl-fsdp-update", "granularity=mini", "schedule.wait=0", "schedule.active=2")
    target = job.site / "verl" / "workers" / "actor" / "dp_actor.py"
    lines = target.read_text().splitlines(keepends=True)
    (at,) = [i for i, line in enumerate(lines) if "_patchkit_runtime.step(" in line]
    assert "self._optimizer_step()" in lines[at - 1]
    lines[at - 1], lines[at] = lines[at], lines[at - 1]  # the step now comes right before the optimizer step
    target.write_text("".join(lines))
    job.run()
    assert job.steps() == [(0, "", [0, 1]), (1, "", [0, 1])]  # the count alone does not see it
    assert job.work() != each_span(job.work(), [0, 1], MINI)
    assert {held["ProfilerStep#0"]["optimizer"] for held in job.work().values()} == {0}


@pytest.mark.parametrize("version", ENGINE)
def test_engine_train_batch_gives_the_actor_and_the_critic_whole_mini_batches(tmp_path_factory, version):
    job = Job(tmp_path_factory.mktemp("engine-mini"), version, driver="engine", jobs=ENGINE_JOBS)
    job.apply("verl-engine-update", "granularity=mini", "role=all", "schedule.wait=0", "schedule.active=2")
    job.run()
    job.proves("verl-engine-update", on_each_rank("actor", "critic"), [0, 1], MINI, tmp_path_factory)


@pytest.mark.parametrize("version", ENGINE)
def test_engine_micro_window_records_the_2nd_and_3rd_training_micro_batch(tmp_path_factory, version):
    job = Job(tmp_path_factory.mktemp("engine-micro"), version, driver="engine", jobs=ENGINE_JOBS)
    job.apply("verl-engine-update", "granularity=micro", "schedule.wait=1", "schedule.active=2")
    job.run()
    job.proves("verl-engine-update", on_each_rank("actor"), [1, 2], MICRO, tmp_path_factory)
