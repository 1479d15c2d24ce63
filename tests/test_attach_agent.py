"""attach.agent, run in this process as the job would run it: every check before any change, the window, and the job's
own code back when the window closes, on detach, when the channel goes, or when the profiler fails; and the same
swap and restore under each other CPython found here (3.10, 3.12, 3.13)."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import attach_helpers as helpers
from patchkit.attach import payload
from patchkit.runtime.attach import agent
from patchkit.runtime.attach.agent import RUNTIME
from script_helpers import script_recipe

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def job(tmp_path, monkeypatch, clean_runtime):
    """pkjob imported in this process from a fresh site; its Trainer; forgotten afterwards."""
    site = helpers.site(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    for name in [m for m in sys.modules if m == "pkjob" or m.startswith("pkjob.")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # a compiled copy, as most jobs have one
    train = importlib.import_module("pkjob.train")
    yield train, site
    for name in [m for m in sys.modules if m == "pkjob" or m.startswith("pkjob.")]:
        del sys.modules[name]
    agent.ACTIVE.clear()


def spec_for(tmp_path, site, mode="logged", steps=2, overrides=()):
    s = payload.settings(str(helpers.recipe(tmp_path, mode)), list(overrides), None, steps)
    spec = payload.request(s, steps, str(site))
    out = tempfile.mkdtemp(dir=tmp_path)
    return dict(spec, id="t", channel=out, runtime_from="")


def status(spec):
    with open(os.path.join(spec["channel"], "status.json")) as f:
        return json.load(f)


def wait_state(spec, *states, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        try:
            s = status(spec)
            if s["state"] in states:
                return s
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    raise AssertionError(f"no state {states}: {status(spec)}")


def inner_of(train):
    return vars(train.Trainer)["step_logged"].__closure__[0].cell_contents


def test_the_window_is_recorded_and_the_original_code_object_comes_back(job, tmp_path):
    train, site = job
    spec = spec_for(tmp_path, site, steps=2)
    inner, original = inner_of(job[0]), inner_of(job[0]).__code__
    trainer = train.Trainer(0, 0.0)
    agent.attach(spec)
    s = status(spec)
    assert s["state"] == "attached" and s["targets"] == ["pkjob.train:Trainer.step_logged"] and s["functions"] == 1
    assert inner.__code__ is not original and vars(train)[RUNTIME].__name__ == "patchkit.runtime"
    for i in range(4):
        trainer.step_logged(i)
    s = wait_state(spec, "restored")
    assert s["captures"][0]["recorded"] == [[0, 1]] and s["original_code"] and s["why"] == "the window closed"
    (trace,) = s["captures"][0]["traces"]
    assert [label for _, label in helpers.recorded_labels(trace)] == [[0], [1]]
    s = wait_state(spec, "restored")
    while not s.get("clean"):
        s = wait_state(spec, "restored")
    assert inner.__code__ is original and RUNTIME not in vars(train) and not agent.ACTIVE


@pytest.mark.parametrize("spoil,says", [
    (lambda train, site: sys.modules.pop("pkjob.train"), "has not imported pkjob.train"),
    (lambda train, site: setattr(train, RUNTIME, object()), "runs with patchkit's lines already"),
    (lambda train, site: (site / "pkjob" / "train.py").write_text(
        (site / "pkjob" / "train.py").read_text().replace("self.done += 1", "self.done += 2")), "changed on disk"),
    (lambda train, site: (site / "pkjob" / "train.py").write_text(
        (site / "pkjob" / "train.py").read_text() + "\n# edited\n"), "changed on disk"),
])
def test_each_refusal_changes_nothing(job, tmp_path, spoil, says):
    train, site = job
    inner, original = inner_of(train), inner_of(train).__code__
    time.sleep(1.1)  # a file written again gets another time than the compiled copy records
    spoil(train, site)
    spec = spec_for(tmp_path, site)
    agent.attach(spec)
    s = status(spec)
    assert s["state"] == "refused" and says in s["error"], s
    assert inner.__code__ is original and not agent.ACTIVE
    assert vars(train).get(RUNTIME) is None or says.startswith("runs with")


def test_a_second_attach_of_the_recipe_is_refused_and_a_failure_inside_changes_nothing(job, tmp_path, capsys):
    train, site = job
    inner, original = inner_of(train), inner_of(train).__code__
    bad = dict(spec_for(tmp_path, site), header="raise RuntimeError('boom')\n")
    agent.attach(bad)
    assert status(bad)["state"] == "failed" and "boom" in status(bad)["error"]
    assert inner.__code__ is original and RUNTIME not in vars(train)
    assert "the job runs on with its own code" in capsys.readouterr().err
    first = spec_for(tmp_path, site)
    agent.attach(first)
    second = spec_for(tmp_path, site)
    agent.attach(second)
    assert status(second)["state"] == "refused" and "attached already" in status(second)["error"]
    shutil.rmtree(first["channel"])  # the attaching command ended: the job's own code comes back
    end = time.time() + 30  # the agent's watcher sees it within a poll; a loaded machine may take longer
    while (inner.__code__ is not original or RUNTIME in vars(train)) and time.time() < end:
        time.sleep(0.05)
    assert inner.__code__ is original and RUNTIME not in vars(train)


def test_detach_mid_window_closes_it_at_the_next_step_and_keeps_its_trace(job, tmp_path):
    train, site = job
    spec = spec_for(tmp_path, site, steps=50)
    inner, original = inner_of(train), inner_of(train).__code__
    trainer = train.Trainer(0, 0.0)
    agent.attach(spec)
    for i in range(3):
        trainer.step_logged(i)
    wait_state(spec, "recording")
    Path(spec["channel"], "detach").touch()
    wait_state(spec, "closing")
    trainer.step_logged(3)  # the step that closes the window, in the thread that owns the profiler
    s = wait_state(spec, "restored")
    assert s["captures"][0]["recorded"] == [[0, 3]] and s["why"] == "detached"
    assert s["captures"][0]["traces"] and inner.__code__ is original


def test_a_rank_not_listed_records_nothing_and_gets_its_code_back_at_its_first_call(job, tmp_path):
    train, site = job
    spec = spec_for(tmp_path, site, overrides=["profiler.ranks=[3]"])
    inner, original = inner_of(train), inner_of(train).__code__
    agent.attach(spec)
    train.Trainer(0, 0.0).step_logged(0)
    s = wait_state(spec, "restored")
    assert s["captures"] == [] and inner.__code__ is original


def test_a_profiler_that_fails_to_start_leaves_the_job_running_its_own_code(job, tmp_path, capsys, monkeypatch):
    train, site = job
    spec = spec_for(tmp_path, site)
    inner, original = inner_of(train), inner_of(train).__code__
    from patchkit.runtime import backends

    monkeypatch.setattr(backends, "build", lambda *a: (_ for _ in ()).throw(RuntimeError("no profiler here")))
    agent.attach(spec)
    trainer = train.Trainer(0, 0.0)
    trainer.step_logged(0)
    trainer.step_logged(1)
    s = wait_state(spec, "restored")
    assert inner.__code__ is original and trainer.done == 2 and s["original_code"] is True
    assert s["why"] == "the capture ended with an error before any window"
    assert "no profiler here" in capsys.readouterr().err


CHILD = """\
import json, sys, time
import pkjob.train as train
from patchkit.runtime.attach import agent
inner = vars(train.Trainer)["step_logged"].__closure__[0].cell_contents
original = inner.__code__
agent.attach(json.load(open(sys.argv[1])))
swapped = inner.__code__ is not original
t = train.Trainer()
for i in range(3):
    t.step_logged(i)
for _ in range(200):
    if inner.__code__ is original and "_patchkit_runtime" not in vars(train):
        break
    time.sleep(0.05)
print(json.dumps({"swapped": swapped, "back": inner.__code__ is original, "losses": t.losses,
                  "left": "_patchkit_runtime" in vars(train)}))
"""


@pytest.mark.parametrize("version", helpers.OTHER_VERSIONS)
def test_the_swap_and_its_undo_hold_on_each_other_cpython(tmp_path, version):
    python = helpers.other_pythons().get(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine (pyenv's, or python{version} on PATH)")
    site = helpers.site(tmp_path)
    helpers.plain(site)
    spec = spec_for(tmp_path, site)  # the window would need torch: its start fails, said once, and the code goes back
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    done = subprocess.run([python, "-c", CHILD, str(tmp_path / "spec.json")], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out == {"swapped": True, "back": True, "losses": [0.0, 0.5, 1.0], "left": False}, done.stderr


def test_traces_are_said_with_the_job_s_own_folder(job, tmp_path, monkeypatch):
    train, site = job
    monkeypatch.chdir(tmp_path)
    spec = spec_for(tmp_path, site, steps=1, overrides=["profiler.save_path=rel/traces"])
    agent.attach(spec)
    train.Trainer(0, 0.0).step_logged(0)
    (trace,) = wait_state(spec, "restored")["captures"][0]["traces"]
    assert trace.startswith(str(tmp_path / "rel" / "traces") + os.sep)  # the attaching command runs elsewhere


def test_the_job_s_own_ctrl_c_during_the_swap_is_given_back_and_nothing_stays_changed(tmp_path):
    site = helpers.site(tmp_path)
    helpers.plain(site)
    spec = dict(spec_for(tmp_path, site), header="raise KeyboardInterrupt\n")
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    child = ("import json, sys, time\nimport pkjob.train as train\nfrom patchkit.runtime.attach import agent\n"
             "inner = vars(train.Trainer)['step_logged'].__closure__[0].cell_contents\noriginal = inner.__code__\n"
             "agent.attach(json.load(open(sys.argv[1])))\ntry:\n    time.sleep(2)\n    print('lost')\n"
             "except KeyboardInterrupt:\n    print('given back', inner.__code__ is original)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    done = subprocess.run([sys.executable, "-c", child, str(tmp_path / "spec.json")], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.stdout.strip() == "given back True", done.stderr


def decorating_spec(tmp_path, site, points, steps=2, rid="pkjob-exit"):
    path = tmp_path / f"{rid}.yaml"
    path.write_text(helpers.RECIPE.format(rid=rid, scope="the decorated function", save=tmp_path / "traces",
                                          points=points))
    s = payload.settings(str(path), [], None, steps)
    return dict(payload.request(s, steps, str(site)), id="t", channel=tempfile.mkdtemp(dir=tmp_path), runtime_from="")


EXIT = "  - class: Trainer\n    method: step_logged\n    at: on_exit"


def test_an_on_exit_goes_under_the_method_s_own_decorator_and_everything_comes_back(job, tmp_path):
    train, site = job
    spec = decorating_spec(tmp_path, site, EXIT)
    held = vars(train.Trainer)["step_logged"]
    cell = held.__closure__[0]
    inner, original = cell.cell_contents, cell.cell_contents.__code__
    trainer = train.Trainer(0, 0.0)
    agent.attach(spec)
    s = status(spec)
    assert s["state"] == "attached" and s["targets"] == ["pkjob.train:Trainer.step_logged"] and s["functions"] == 1
    assert vars(train.Trainer)["step_logged"] is held and cell.cell_contents.__wrapped__ is inner
    for i in range(4):
        trainer.step_logged(i)
    s = wait_state(spec, "restored")
    assert s["captures"][0]["recorded"] == [[0, 1]] and s["original_code"] and s["why"] == "the window closed"
    (trace,) = s["captures"][0]["traces"]
    assert helpers.recorded_labels(trace) == [(0, [0]), (1, [1])]  # each step ends as its call returns
    while not s.get("clean"):
        s = wait_state(spec, "restored")
    assert cell.cell_contents is inner and inner.__code__ is original and vars(train.Trainer)["step_logged"] is held
    assert RUNTIME not in vars(train) and trainer.done == 4 and not agent.ACTIVE


def test_a_decorated_attribute_replaced_meanwhile_is_left_there_and_said(job, tmp_path):
    train, site = job
    spec = decorating_spec(tmp_path, site, "  - class: Trainer\n    method: work\n    at: on_exit", steps=1)
    held = vars(train.Trainer)["work"]
    agent.attach(spec)
    assert vars(train.Trainer)["work"] is not held and vars(train.Trainer)["work"].__wrapped__ is held
    mine = lambda self, i: 0.0  # noqa: E731 - the job's own code replaces the method meanwhile
    train.Trainer.work = mine
    Path(spec["channel"], "detach").touch()
    s = wait_state(spec, "restored")
    assert not s["original_code"] and "Trainer.work was replaced in the job meanwhile" in s["why"]
    assert vars(train.Trainer)["work"] is mine


def test_a_module_function_is_decorated_unless_another_module_holds_it_too(job, tmp_path, monkeypatch):
    train, site = job
    points = "  - function: closure_loop\n    at: on_exit"
    importer = type(sys)("pkjob_importer")
    importer.closure_loop = train.closure_loop  # from pkjob.train import closure_loop
    monkeypatch.setitem(sys.modules, importer.__name__, importer)
    held = train.closure_loop
    refused = decorating_spec(tmp_path, site, points, steps=1)
    agent.attach(refused)
    s = status(refused)
    assert s["state"] == "refused" and "held by pkjob_importer too" in s["error"]
    assert train.closure_loop is held and RUNTIME not in vars(train)
    del sys.modules[importer.__name__]
    spec = decorating_spec(tmp_path, site, points, steps=1)
    agent.attach(spec)
    assert train.closure_loop is not held
    train.closure_loop(train.Trainer(0, 0.0), 2, lambda i, step: step(i))
    s = wait_state(spec, "restored")
    assert s["captures"][0]["recorded"] == [[0, 0]] and s["original_code"] and train.closure_loop is held


def test_a_range_around_the_method_and_a_swapped_point_inside_work_together(job, tmp_path):
    train, site = job
    points = EXIT + ("\n  - class: Trainer\n    method: step_logged\n    at: method\n    action: range\n    name: whole"
                     "\n  - class: Trainer\n    method: work\n    at: method_start\n    action: mark\n    name: work")
    spec = decorating_spec(tmp_path, site, points, rid="pkjob-both")
    work, original = vars(train.Trainer)["work"], vars(train.Trainer)["work"].__code__
    agent.attach(spec)
    assert work.__code__ is not original and status(spec)["functions"] == 2
    trainer = train.Trainer(0, 0.0)
    for i in range(3):
        trainer.step_logged(i)
    s = wait_state(spec, "restored")
    (trace,) = s["captures"][0]["traces"]
    with open(trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if "dur" in e]
    steps = sorted((e for e in events if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    ranges = [e for e in events if e["name"] == "whole"]
    assert len(steps) == 2 and len(ranges) == 2
    for span, whole in zip(steps, sorted(ranges, key=lambda e: e["ts"])):
        assert span["ts"] <= whole["ts"] and whole["ts"] + whole["dur"] <= span["ts"] + span["dur"]
    assert work.__code__ is original and s["original_code"]


def test_a_target_running_when_the_code_goes_in_is_named_its_call_keeps_its_own_code(job, tmp_path):
    train, site = job
    points = "  - function: closure_loop\n    at: loop_end\n    loop: {target: i}"
    spec = decorating_spec(tmp_path, site, points, steps=2, rid="pkjob-loop")
    original = train.closure_loop.__code__

    def on_step(i, step):
        if i == 0:
            agent.attach(spec)  # from inside closure_loop's own loop, as a job that runs it for its whole life
        step(i)

    train.closure_loop(train.Trainer(0, 0.0), 3, on_step)
    s = status(spec)
    assert s["state"] == "attached" and s["running"] == ["closure_loop"] and s["captures"] == []
    assert train.closure_loop.__code__ is not original, "the next call takes the instrumented code"
    train.closure_loop(train.Trainer(0, 0.0), 3, lambda i, step: step(i))
    s = wait_state(spec, "restored")
    assert s["captures"][0]["recorded"] == [[0, 1]] and train.closure_loop.__code__ is original
    idle = spec_for(tmp_path, site, steps=1)
    agent.attach(idle)
    assert status(idle)["running"] == []
    train.Trainer(0, 0.0).step_logged(0)
    assert wait_state(idle, "restored")["original_code"]


SCRIPT_JOB = """\
import json, os, sys, time

import torch


class Tiny:
    def __init__(self):
        self.losses = []

    def training_step(self, i):
        with torch.profiler.record_function(f"job-step-{i}"):
            self.losses.append(float(torch.tensor(i * 0.5)))


if __name__ == "__main__":
    from patchkit.runtime.attach import agent

    spec = json.load(open(sys.argv[1]))
    t, original = Tiny(), Tiny.training_step.__code__
    t.training_step(0)
    agent.attach(spec)
    swapped = Tiny.training_step.__code__ is not original
    for i in range(1, 6):
        t.training_step(i)
    for _ in range(400):
        if Tiny.training_step.__code__ is original and "_patchkit_runtime" not in globals():
            break
        time.sleep(0.05)
    print(json.dumps({"swapped": swapped, "back": Tiny.training_step.__code__ is original, "losses": t.losses,
                      "left": "_patchkit_runtime" in globals()}))
"""


def test_a_script_s_own_class_is_attached_in_its_main_and_its_code_comes_back(tmp_path):
    """`python train.py`: its class lives in __main__; the agent finds it there, checks the file, records the next
    steps, and puts the job's own code back."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "train.py").write_text(SCRIPT_JOB)
    (tmp_path / "ts.yaml").write_text(script_recipe(save=tmp_path / "traces"))
    s = payload.settings(str(tmp_path / "ts.yaml"), [], None, 2)
    spec = dict(payload.request(s, 2, str(job)), id="t", channel=tempfile.mkdtemp(dir=tmp_path), runtime_from="")
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run([sys.executable, "train.py", str(tmp_path / "spec.json")], cwd=job, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out == {"swapped": True, "back": True, "losses": [i * 0.5 for i in range(6)], "left": False}, done.stderr
    s = status(spec)
    assert s["state"] == "restored" and s["targets"] == ["__main__:Tiny.training_step"] and s["original_code"]
    assert s["captures"][0]["recorded"] == [[0, 1]]
    (trace,) = s["captures"][0]["traces"]
    assert [label for _, label in helpers.recorded_labels(trace)] == [[1], [2]]


def test_a_script_other_than_the_planned_one_is_refused_in_the_job(tmp_path):
    job, other = tmp_path / "job", tmp_path / "other"
    job.mkdir()
    other.mkdir()
    (job / "train.py").write_text(SCRIPT_JOB)
    (other / "train.py").write_text(SCRIPT_JOB)
    (tmp_path / "ts.yaml").write_text(script_recipe(save=tmp_path / "traces"))
    s = payload.settings(str(tmp_path / "ts.yaml"), [], None, 2)
    spec = dict(payload.request(s, 2, str(other)), id="t", channel=tempfile.mkdtemp(dir=tmp_path), runtime_from="")
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run([sys.executable, "train.py", str(tmp_path / "spec.json")], cwd=job, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1])["swapped"] is False
    s = status(spec)
    assert s["state"] == "refused" and s["error"] == (
        f"the job runs {job / 'train.py'} as its script (__main__), not {other / 'train.py'} that patchkit planned: "
        f"pass --root {job}"), s


def test_functions_gc_no_longer_finds_are_swapped_and_put_back_from_the_names_and_the_swap_s_record(
        job, tmp_path, monkeypatch):
    """As on free-threaded 3.13 once a second thread has run (tests/test_attach_interpreters.py does it there):
    ``gc.get_referrers`` finds none of the functions made before; the attach reaches them by their names, and the
    undo puts back those it recorded, so the runtime goes only once the job's own code is back."""
    from patchkit.runtime.attach import swap

    train, site = job
    monkeypatch.setattr(swap.gc, "get_referrers", lambda *objects: [])
    spec = spec_for(tmp_path, site, steps=2)
    inner, original = inner_of(train), inner_of(train).__code__
    trainer = train.Trainer(0, 0.0)
    agent.attach(spec)
    assert status(spec)["functions"] == 1 and inner.__code__ is not original
    for i in range(4):
        trainer.step_logged(i)
    s = wait_state(spec, "restored")
    while not s.get("clean"):
        s = wait_state(spec, "restored")
    assert s["captures"][0]["recorded"] == [[0, 1]] and s["original_code"] is True
    assert inner.__code__ is original and RUNTIME not in vars(train)
    trainer.step_logged(4)  # the job's own code, after: no NameError


ENDS = "  - class: Trainer\n    method: step_logged\n    at: method_end"


def test_the_runtime_stays_while_a_call_still_runs_the_recipe_s_code_and_that_call_ends_well(job, tmp_path,
                                                                                              monkeypatch):
    import threading

    train, site = job
    monkeypatch.setattr(agent, "SETTLE", 0.3)  # (5 s in a job; then, said, 600 s; then a look every 10 s)
    monkeypatch.setattr(agent, "HOLD", 0.3)
    monkeypatch.setattr(agent, "LATER", 0.1)
    spec = decorating_spec(tmp_path, site, ENDS, steps=2, rid="pkjob-ends")
    inner, original = inner_of(train), inner_of(train).__code__
    trainer, started, release, failed = train.Trainer(0, 0.0), threading.Event(), threading.Event(), []
    trainer.work = lambda i: (started.set(), release.wait(30), 0.5)[-1]

    def call():
        try:
            trainer.step_logged(0)
        except BaseException as exc:  # noqa: BLE001 - what the job would have died of
            failed.append(exc)

    agent.attach(spec)
    thread = threading.Thread(target=call)
    thread.start()
    started.wait(30)  # inside the instrumented code, before its point
    Path(spec["channel"], "detach").touch()
    s = wait_state(spec, "restored")
    while "clean" not in s:
        s = wait_state(spec, "restored")
    assert s["clean"] is False and s["original_code"] is True and inner.__code__ is original
    assert "a call still running the recipe's code" in s["why"] and f"{RUNTIME} stays until it is out" in s["why"], s
    time.sleep(0.5)
    assert vars(train)[RUNTIME].__name__ == "patchkit.runtime" and agent.ACTIVE
    release.set()
    thread.join(30)
    assert failed == [] and trainer.losses == [0.5]  # its point ran against the runtime, which records nothing now
    s = wait_state(spec, "restored")
    while not s.get("clean"):
        s = wait_state(spec, "restored")
    assert s["why"] == "detached" and RUNTIME not in vars(train) and not agent.ACTIVE  # gone once the call was out
