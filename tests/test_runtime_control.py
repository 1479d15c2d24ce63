"""Starting a capture, steps at schedule events and process exit (patchkit.runtime.control), with torch on CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from patchkit import runtime  # noqa: E402
from runtime_helpers import lines, profiler_steps, settings, trace_files  # noqa: E402
from runtime_helpers import no_profiler_left_running  # noqa: E402,F401  (a fixture)

pytestmark = pytest.mark.usefixtures("no_profiler_left_running")


REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------
# ranks


def test_unlisted_rank_writes_nothing_and_the_job_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RANK", "1")
    runtime.configure("rk", **settings(tmp_path / "rk", ranks=(0,)))
    x = torch.ones(4)
    for _ in range(6):
        x = x * 2
        runtime.step("rk")
    assert float(x[0]) == 64.0
    assert not (tmp_path / "rk").exists()
    assert "rk" in runtime._finished and runtime.report() == []
    assert lines(capsys) == []


def test_listed_rank_from_the_environment_profiles(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    runtime.configure("rk", **settings(tmp_path / "rk", ranks=(1, 3)))
    runtime.step("rk")
    runtime.step("rk")
    assert len(trace_files(tmp_path / "rk")) == 1
    assert runtime.report()[0]["rank"] == 3


def test_rank_from_torch_distributed_wins_over_the_environment(tmp_path, monkeypatch):
    import torch.distributed as dist

    monkeypatch.setenv("RANK", "5")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        runtime.configure("dr", **settings(tmp_path / "dr", ranks=(0,)))
        runtime.step("dr")
        runtime.step("dr")
    finally:
        dist.destroy_process_group()
    assert len(trace_files(tmp_path / "dr")) == 1 and runtime.report()[0]["rank"] == 0


# ---------------------------------------------------------------------------
# one capture at a time


def test_actor_and_ref_do_not_capture_at_once(tmp_path, capsys):
    runtime.configure("lp", **settings(tmp_path / "lp", active=2))
    runtime.step("lp/actor")  # the actor's capture starts (step 0)
    for _ in range(3):
        runtime.step("lp/ref")  # refused, said once
    err = lines(capsys)
    assert len([ln for ln in err if "lp/ref: not starting while lp/actor is capturing" in ln]) == 1
    runtime.step("lp/actor")
    runtime.step("lp/actor")  # actor's schedule over
    assert {r["key"]: r["state"] for r in runtime.report()} == {"lp/actor": "finished"}
    runtime.step("lp/ref")  # now it starts
    runtime.step("lp/ref")
    runtime.step("lp/ref")
    assert {r["key"]: r["state"] for r in runtime.report()} == {"lp/actor": "finished", "lp/ref": "finished"}
    names = sorted(os.path.basename(t) for t in trace_files(tmp_path / "lp"))
    assert len(names) == 2 and sum("_actor." in n for n in names) == 1 and sum("_ref." in n for n in names) == 1


def test_another_profiler_running_blocks_the_start_until_it_stops(tmp_path, capsys):
    runtime.configure("fg", **settings(tmp_path / "fg"))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        for _ in range(3):
            runtime.step("fg")
    err = lines(capsys)
    assert len(err) == 1 and "another profiler (torch.profiler) is already running" in err[0]
    runtime.step("fg")
    runtime.step("fg")
    assert len(trace_files(tmp_path / "fg")) == 1


def test_second_key_after_the_first_is_over_is_its_own_capture(tmp_path):
    runtime.configure("a", **settings(tmp_path / "a"))
    runtime.configure("b", **settings(tmp_path / "b"))
    for key in ("a", "a", "b", "b", "a", "b"):
        runtime.step(key)
    assert len(trace_files(tmp_path / "a")) == 1 and len(trace_files(tmp_path / "b")) == 1


# ---------------------------------------------------------------------------
# threads


def test_lazy_start_in_the_stepping_thread(tmp_path):
    runtime.configure("th", **settings(tmp_path / "th", wait=1, active=2))
    made_in = []

    def worker():
        for _ in range(5):
            torch.ones(3).sum()
            runtime.step("th")
        made_in.extend(r for r in runtime.report())

    t = threading.Thread(target=worker, name="overlap-thread")
    t.start()
    t.join()
    assert made_in and made_in[0]["state"] == "finished"
    (trace,) = trace_files(tmp_path / "th")
    assert profiler_steps(trace) == ["ProfilerStep#1", "ProfilerStep#2"]


def test_steps_from_another_thread_are_ignored_not_crashing(tmp_path, capsys):
    runtime.configure("own", **settings(tmp_path / "own", active=3))
    runtime.step("own")  # owned by the main thread
    t = threading.Thread(target=lambda: [runtime.step("own") for _ in range(3)], name="intruder")
    t.start()
    t.join()
    err = lines(capsys)
    assert len(err) == 2 and "step from thread intruder ignored" in err[1]
    assert runtime.report()[0]["step"] == 0
    for _ in range(3):
        runtime.step("own")
    assert runtime.report()[0]["state"] == "finished"


# ---------------------------------------------------------------------------
# what cannot start says so in one line


def test_unconfigured_recipe_is_one_line(capsys):
    for _ in range(3):
        runtime.step("nobody")
        runtime.start("nobody")
    err = lines(capsys)
    assert len(err) == 1 and "no configure('nobody', ...)" in err[0]


def test_invalid_settings_are_one_line(tmp_path, capsys):
    runtime.configure("bad", **settings(tmp_path, level="max"))
    runtime.step("bad")
    runtime.step("bad")
    err = lines(capsys)
    assert len(err) == 1 and "profiler.level 'max'" in err[0]


def test_npu_backend_without_torch_npu_runs_to_the_end(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch_npu", None)  # import torch_npu -> ImportError
    runtime.configure("np", **settings(tmp_path / "np", backend="npu", active=2))
    x = torch.ones(2)
    for _ in range(10):
        x = x + 1
        runtime.step("np")
    assert float(x[0]) == 11.0
    err = lines(capsys)
    assert len(err) == 1 and "torch_npu" in err[0] and "the job runs on" in err[0]
    assert not (tmp_path / "np").exists()


def test_configure_last_call_wins_until_the_capture_starts(tmp_path):
    runtime.configure("lw", **settings(tmp_path / "first"))
    runtime.configure("lw", **settings(tmp_path / "second"))
    runtime.step("lw")
    runtime.configure("lw", **settings(tmp_path / "third"))
    runtime.step("lw")
    assert len(trace_files(tmp_path / "second")) == 1
    assert not (tmp_path / "first").exists() and not (tmp_path / "third").exists()


# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# process exit


ATEXIT_SCRIPT = """
import sys
import patchkit.runtime as _patchkit_runtime
_patchkit_runtime.configure("ax", backend="torch", level="level0", contents=("cpu",), export_type="text", analysis=False, save_path=sys.argv[1], ranks="all", wait=0, warmup=0, active=100, repeat=1, skip_first=0, mstx=False)
import torch
x = torch.ones(4)
for _ in range(5):
    x = x * 2
    _patchkit_runtime.step("ax")
print("job done", float(x[0]))
"""


def test_open_window_is_flushed_at_process_exit(tmp_path):
    save = tmp_path / "ax"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("PATCHKIT_STRICT", None)
    out = subprocess.run([sys.executable, "-c", ATEXIT_SCRIPT, str(save)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "job done 32.0" in out.stdout
    (trace,) = trace_files(save)
    assert profiler_steps(trace) == [f"ProfilerStep#{i}" for i in range(5)]
    err = [ln for ln in out.stderr.splitlines() if ln.startswith("[patchkit]")]
    assert len(err) == 2 and "recording steps 0-99" in err[0]
    assert "window closed after step 4 at process exit" in err[1] and trace in err[1]


# a full disk while the trace is written: tests/test_runtime_full_disk.py


# ---------------------------------------------------------------------------
# close (patchkit attach's detach)


def test_close_finishes_a_running_window_at_its_next_step_in_its_own_thread(tmp_path):
    runtime.configure("cl", **settings(tmp_path / "cl", steps=tuple(range(50)), active=1))
    for _ in range(3):
        runtime.step("cl")
    closed = []
    other = threading.Thread(target=lambda: closed.append(runtime.close("cl", "patchkit detach")))
    other.start()
    other.join()
    assert closed == [["cl"]] and "cl" in runtime._captures  # not stopped from another thread
    runtime.step("cl")  # ends step 2: the window closes there, flushed
    (r,) = runtime.report()
    assert r["state"] == "finished" and r["recorded"] == [(0, 2)] and len(r["traces"]) == 1
    runtime.step("cl")  # finished: nothing more
    assert runtime.report()[0]["recorded"] == [(0, 2)]


def test_close_before_the_start_keeps_the_recipe_from_starting(tmp_path, capsys):
    runtime.configure("cl", **settings(tmp_path / "cl"))
    assert runtime.close("cl", "patchkit detach") == []
    runtime.start("cl")
    runtime.step("cl")
    assert runtime.report() == [] and not (tmp_path / "cl").exists() and "cl" in runtime._finished
    runtime.forget("cl")  # attached again: it may start
    runtime.step("cl")
    runtime.step("cl")
    assert runtime.report()[0]["recorded"] == [(0, 0)]
