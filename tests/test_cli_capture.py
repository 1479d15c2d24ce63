"""`patchkit capture` against a real job: the demo sample training in the background (patched in memory by
`patchkit run`, schedule.trigger=manual), asked twice at different times; each answer is a trace holding exactly
the steps asked.  A dead process is not waited for; a silent one times out; nobody to ask is an error."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchkit.runtime import requests as ondemand
from patchkit.demo import SAMPLE
from runtime_helpers import profiler_steps

REPO = Path(__file__).resolve().parent.parent


def _env(tmp_path, site=None):
    env = dict(os.environ, PATCHKIT_HOME=str(tmp_path / "home"), PATCHKIT_POLL="0.1",
               PYTHONPATH=os.pathsep.join(([str(site)] if site else []) + [str(REPO)]))
    env.pop("PATCHKIT_RUN", None)
    return env


def capture(tmp_path, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", "patchkit", "capture", *args], capture_output=True, text=True,
                          env=_env(tmp_path), timeout=timeout)


@pytest.fixture
def job(tmp_path):
    """The demo sample training for minutes (stopped after the test), waiting for `patchkit capture`."""
    site = tmp_path / "site"
    shutil.copytree(SAMPLE, site)
    proc = subprocess.Popen(
        [sys.executable, "-m", "patchkit", "run", "verl-fsdp-update", "--root", str(site), "backend=torch",
         "granularity=micro", "schedule.trigger=manual", f"profiler.save_path={tmp_path / 'traces'}", "--",
         sys.executable, "-m", "patchkit.demo.train", "--updates", "20000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(tmp_path, site), cwd=tmp_path)
    deadline = time.time() + 120
    os.environ["PATCHKIT_HOME"], saved = str(tmp_path / "home"), os.environ.get("PATCHKIT_HOME")
    try:
        while not ondemand.registered("verl-fsdp-update") and time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
    finally:
        if saved is None:
            os.environ.pop("PATCHKIT_HOME")
        else:
            os.environ["PATCHKIT_HOME"] = saved
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    yield proc
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)


def test_two_captures_at_different_times_each_hold_exactly_the_steps_asked(tmp_path, job):
    first = capture(tmp_path, "verl-fsdp-update", "--steps", "3")
    assert first.returncode == 0, first.stderr
    assert "1 of 1 process(es) recorded 3 step(s)" in first.stderr
    (line,) = first.stdout.splitlines()
    assert line.startswith(f"rank 0 verl-fsdp-update (pid {job.pid} on ") and ": steps 0-2 -> " in line
    assert profiler_steps(line.split(" -> ")[1]) == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    time.sleep(2)
    second = capture(tmp_path, "verl-fsdp-update", "--steps", "2")
    assert second.returncode == 0, second.stderr
    trace = second.stdout.strip().split(" -> ")[1]
    assert trace != line.split(" -> ")[1] and profiler_steps(trace) == ["ProfilerStep#0", "ProfilerStep#1"]
    assert job.poll() is None  # the job runs on


def test_a_dead_process_is_not_waited_for_and_a_silent_one_times_out(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(tmp_path / "home"))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ondemand.register("r", rank=1, pid=sleeper.pid)  # alive, never steps
        done = capture(tmp_path, "r", "--timeout", "1")
        assert done.returncode == 1
        assert f"rank 1 r (pid {sleeper.pid} on" in done.stderr and "no answer within 1 s" in done.stderr
        sleeper.kill()
        sleeper.wait()
        gone = capture(tmp_path, "r", "--timeout", "600", timeout=300)  # waited for, it would outlive the guard
        assert gone.returncode == 1 and "no running process of r waits for a capture here" in gone.stderr
        assert "no answer within" not in gone.stderr  # the dead one was not asked, so not waited for
    finally:
        sleeper.kill()


def test_nobody_to_ask_is_an_error_that_says_what_to_do(tmp_path):
    done = capture(tmp_path, "verl-fsdp-update", "--ranks", "0,2", "--role", "ref")
    assert done.returncode == 1
    assert "no running process of verl-fsdp-update waits for a capture here" in done.stderr
    assert "with rank 0,2 and role ref" in done.stderr and "schedule.trigger=manual" in done.stderr
    bad = capture(tmp_path, "verl-fsdp-update", "--ranks", "zero")
    assert bad.returncode == 2 and "write ranks as 0,1,3" in bad.stderr


LOOP = '''
def loop(stop, seconds=60):
    import os, time
    import torch
    import patchkit.runtime as rt
    rt.configure("k", backend="torch", level="level0", contents=("cpu",), export_type="text", analysis=False,
                 save_path=os.path.join(os.environ["PATCHKIT_HOME"], "traces"), ranks="all", mstx=False,
                 trigger="manual")
    work, end = torch.ones(8, 8), time.time() + seconds
    while time.time() < end and not os.path.exists(stop):
        work = torch.tanh(work @ work)
        rt.step("k")
        time.sleep(0.01)
    return os.environ["PATCHKIT_HOME"]
'''


def test_on_a_two_node_ray_cluster_every_node_s_process_answers(tmp_path):
    pytest.importorskip("ray", reason='Ray is not installed (pip install "patchkit-profiler[ray]")')
    import ray
    from ray.cluster_utils import Cluster
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    homes = [tmp_path / "a-home", tmp_path / "b-home"]
    small = {"object_store_memory": 80 * 1024 * 1024}
    env = [{"PATCHKIT_HOME": str(h), "PATCHKIT_POLL": "0.1"} for h in homes]
    cluster = Cluster(initialize_head=True, head_node_args={**small, "num_cpus": 1, "include_dashboard": False,
                                                            "env_vars": env[0]})
    try:
        ids = [cluster.head_node.node_id, cluster.add_node(**small, num_cpus=1, env_vars=env[1]).node_id]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        namespace = {}
        exec(LOOP, namespace)
        task = ray.remote(namespace["loop"])
        stop = str(tmp_path / "stop")
        refs = [task.options(num_cpus=1, scheduling_strategy=NodeAffinitySchedulingStrategy(i, soft=False)).remote(stop)
                for i in ids]
        deadline = time.time() + 120
        while time.time() < deadline and not all((h / ondemand.PROCESSES).is_dir() and
                                                 os.listdir(h / ondemand.PROCESSES) for h in homes):
            time.sleep(0.2)
        done = subprocess.run([sys.executable, "-m", "patchkit", "capture", "k", "--steps", "2", "--ray",
                               cluster.address], capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=300)
        open(stop, "w").close()
        assert sorted(ray.get(refs, timeout=120)) == sorted(map(str, homes))
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 of 2 process(es) recorded 2 step(s)" in done.stderr
    traces = [line.split(" -> ")[1] for line in done.stdout.splitlines()]
    assert len(traces) == 2 and {str(Path(t).parent.parent) for t in traces} == set(map(str, homes))
    assert all(profiler_steps(t) == ["ProfilerStep#0", "ProfilerStep#1"] for t in traces)


@pytest.mark.parametrize("steps", ["0", "-1", "1001", "10000000", "9" * 5000],
                         ids=["0", "-1", "1001", "10M", "5000-digits"])
def test_steps_out_of_bounds_are_a_usage_error_and_nothing_is_asked(tmp_path, monkeypatch, steps):
    from click.testing import CliRunner

    from patchkit.cli.commands import main

    monkeypatch.setenv("PATCHKIT_HOME", str(tmp_path / "home"))
    ondemand.register("r", rank=0)  # someone to ask, were the request made
    done = CliRunner().invoke(main, ["capture", "r", "--steps", steps, "--timeout", "0.1"])
    assert done.exit_code == 2, done.output
    assert "'--steps'" in done.output
    assert ("1<=x<=1000" in done.output) if len(steps) < 100 else ("is not a valid integer" in done.output)
    assert not (tmp_path / "home" / ondemand.REQUESTS).exists()


def test_the_command_line_bound_is_the_one_requests_are_held_to_and_the_help_says_why():
    from click.testing import CliRunner

    from patchkit.cli.commands import every_command, main

    (option,) = [p for p in every_command()["capture"].params if p.name == "steps"]
    assert (option.type.min, option.type.max) == (1, ondemand.MAX_STEPS)
    help_text = " ".join(CliRunner().invoke(main, ["capture", "--help"]).output.split())
    assert "at most 1000: a profiler holds every event of its window in memory" in help_text


@pytest.mark.parametrize("steps", [0, 1001, 10 ** 5000], ids=["0", "1001", "5001-digits"])
def test_the_api_refuses_steps_out_of_bounds_with_a_located_error(tmp_path, monkeypatch, steps):
    from patchkit.cli import capture as cli_capture

    monkeypatch.setenv("PATCHKIT_HOME", str(tmp_path / "home"))
    with pytest.raises(cli_capture.CaptureRequestError) as caught:
        cli_capture.capture.callback("r", steps, None, None, 0.1)  # the command's own function, past click's range
    assert caught.value.where.path == "<command line>" and "1 to 1000 steps" in caught.value.message
    assert "in the job's memory" in caught.value.hint
    assert not (tmp_path / "home" / ondemand.REQUESTS).exists()


def test_what_an_answer_holds_reaches_the_terminal_escaped(capsys):
    from patchkit.cli import capture as cli_capture

    entry = {"host": "h", "pid": 1, "key": "r\x1b]0;title\x07", "rank": 0}
    bad = cli_capture._say_node({"host": "h", "asked": [entry], "dead": [], "answers": {
        ondemand.name(entry): {"error": "disk\x1b[2J full\rrank 0: fine"}}}, 1, 1.0, False)
    good = cli_capture._say_node({"host": "h", "asked": [entry], "dead": [], "answers": {
        ondemand.name(entry): {"traces": ["/t/\x1b[31mred.json"], "first": 10 ** 5000}}}, 1, 1.0, False)
    out = capsys.readouterr()
    assert (bad, good) == (1, 0)
    assert "\x1b" not in out.err + out.out and "\r" not in out.err + out.out and "\x07" not in out.err
    assert "failed: disk\\x1b[2J full\\x0drank 0: fine" in out.err
    assert "steps <a number too long to show>-None -> /t/\\x1b[31mred.json" in out.out


def test_a_real_job_ignores_hostile_requests_and_still_answers_a_good_one(tmp_path, job):
    import json

    requests = tmp_path / "home" / ondemand.REQUESTS
    requests.mkdir(exist_ok=True)
    now = time.time() + 1
    hostile = [("evil.json", "../../x", 1), ("huge.json", "huge", 10_000_000), ("minus.json", "minus", "-1")]
    for name, rid, steps in hostile:
        (requests / name).write_text(json.dumps({"id": rid, "recipe": "verl-fsdp-update", "steps": steps, "ranks": [],
                                                 "role": "", "time": now}))
        (requests / name).chmod(0o600)
    time.sleep(1)  # ten polls of the job's watcher
    done = capture(tmp_path, "verl-fsdp-update", "--steps", "2")
    assert done.returncode == 0, done.stderr
    assert profiler_steps(done.stdout.strip().split(" -> ")[1]) == ["ProfilerStep#0", "ProfilerStep#1"]
    assert job.poll() is None
    assert not (tmp_path / "x").exists() and not (tmp_path / "home" / "x").exists()
    (answered,) = (tmp_path / "home" / ondemand.ANSWERS).iterdir()  # the good request's, and only that
    assert ondemand.valid_id(answered.name) and answered.name not in ("huge", "minus")
    job.send_signal(signal.SIGTERM)
    err = job.communicate(timeout=60)[1]
    ignored = [ln for ln in err.splitlines() if ln.startswith("[patchkit] ignoring the capture request")]
    assert sorted(ln.split("'")[1].rsplit("/", 1)[1] for ln in ignored) == ["evil.json", "huge.json", "minus.json"]


# ---------------------------------------------------------------- the bar while capture waits


def _answered(rid="verl-fsdp-update", host="h1"):
    entry = {"pid": 7, "host": host, "recipe": rid, "key": rid, "role": "", "rank": 0, "time": 0.0}
    return {"host": host, "request": "x", "asked": [entry], "answers": {ondemand.name(entry): {
        "first": 0, "last": 2, "traces": ["/t/a.pt.trace.json"], "error": None}}, "dead": [], "late": []}


def test_capture_waits_with_a_bar_of_the_answers_on_a_terminal_only(monkeypatch):
    from click.testing import CliRunner

    from patchkit.cli import progress
    from patchkit.cli.commands import main
    from progress_helpers import Terminal, drive

    def ask_and_wait(recipe, steps, ranks, role, timeout, progress=None):
        drive(progress, 1, f"waiting for 1 process(es) to record {steps} step(s)", "answers")
        return _answered(recipe)

    monkeypatch.setattr(ondemand, "ask_and_wait", ask_and_wait)
    piped = CliRunner().invoke(main, ["capture", "verl-fsdp-update", "--steps", "3"])
    assert piped.exit_code == 0 and "waiting" not in piped.stderr and "%" not in piped.stderr
    real = progress.stream
    monkeypatch.setattr(progress, "stream", lambda: Terminal(real()))
    shown = CliRunner().invoke(main, ["capture", "verl-fsdp-update", "--steps", "3"])
    assert shown.exit_code == 0 and shown.stdout == piped.stdout
    assert "waiting for 1 process(es) to record 3 step(s)" in shown.stderr and "1/1" in shown.stderr
    assert shown.stderr.endswith(piped.stderr)


def test_capture_ray_tells_its_progress_each_node_that_answered(monkeypatch):
    import contextlib

    from patchkit.cluster import capture as cluster_capture, gather, ray as cluster_ray
    from progress_helpers import Recorder

    nodes = [{"node_id": "a" * 56, "ip": "10.0.0.1"}, {"node_id": "b" * 56, "ip": "10.0.0.2"}]
    monkeypatch.setattr(cluster_ray, "connect", lambda address: contextlib.nullcontext(None))
    monkeypatch.setattr(cluster_ray, "alive_nodes", lambda ray: nodes)
    monkeypatch.setattr(gather, "_pinned", lambda ray, fn, node_id: type("T", (), {
        "remote": staticmethod(lambda *args: _answered(host=node_id[:1]))}))
    monkeypatch.setattr(gather, "_get", lambda ray, ref, what: ref)
    recorder = Recorder()
    results = cluster_capture.ask_every_node("auto", "verl-fsdp-update", 2, [], "", 5, recorder)
    assert [r["host"] for r in results] == ["a", "b"]
    assert recorder.summary() == [("waiting for 2 node(s)", "nodes", 2, 2)]
    assert recorder.stages[0]["items"] == ["node 10.0.0.1", "node 10.0.0.2"]
