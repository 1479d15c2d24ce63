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

from patchkit import ondemand
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
        start = time.time()
        done = capture(tmp_path, "r", "--timeout", "1")
        assert done.returncode == 1 and time.time() - start < 30
        assert f"rank 1 r (pid {sleeper.pid} on" in done.stderr and "no answer within 1 s" in done.stderr
        sleeper.kill()
        sleeper.wait()
        gone = capture(tmp_path, "r", "--timeout", "30")
        assert gone.returncode == 1 and "no running process of r waits for a capture here" in gone.stderr
        assert time.time() - start < 30  # the dead one was not waited for
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
