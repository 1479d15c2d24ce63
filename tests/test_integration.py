"""The whole product at once: `patchkit apply` on the bundled verl-shaped sample, then real training.

These run the generated code for real in a subprocess: the torch backend on
CPU, and the npu backend against the CPU stand-in for torch_npu (several
releases, strict mode) and with no torch_npu at all.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import patchkit
from patchkit.demo.runner import SAMPLE

from doubles import npu_double_env

REPO = Path(__file__).resolve().parent.parent


def patched(tmp_path, recipe, *overrides):
    site = tmp_path / "site"
    shutil.copytree(SAMPLE, site, ignore=shutil.ignore_patterns("__pycache__"))
    outcomes = patchkit.apply(patchkit.load(recipe, list(overrides)), str(site))
    assert [o.state for o in outcomes] == ["patched"]
    return site


def train(site, tmp_path, env=None, updates=4):
    env = dict(env or os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(site), env.get("PYTHONPATH", "")] if p)
    env.pop("PATCHKIT_STRICT", None)
    done = subprocess.run([sys.executable, "-m", "patchkit.demo.train", "--updates", str(updates)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "demo: 4 updates" in done.stdout
    return done


def torch_steps(folder):
    traces = sorted(glob.glob(str(folder / "*.pt.trace.json")))
    steps = []
    for trace in traces:
        with open(trace) as handle:
            names = {e.get("name", "") for e in json.load(handle)["traceEvents"]}
        steps.append(sorted((n for n in names if n.startswith("ProfilerStep#")), key=lambda n: int(n.split("#")[1])))
    return steps


def test_update_policy_window_of_three_mini_batches_gives_one_trace_of_three_steps(tmp_path):
    out = tmp_path / "traces"
    site = patched(tmp_path, "verl-fsdp-update", "backend=torch", "schedule.wait=1", "schedule.warmup=1",
                   "schedule.active=3", "schedule.repeat=1", f"profiler.save_path={out}")
    done = train(site, tmp_path)
    assert torch_steps(out) == [["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]]
    assert "[patchkit] verl-fsdp-update: recording steps 2-4" in done.stderr


def test_unlisted_rank_writes_nothing_and_the_job_runs_normally(tmp_path):
    out = tmp_path / "traces"
    site = patched(tmp_path, "verl-fsdp-update", "backend=torch", "profiler.ranks=[0]", f"profiler.save_path={out}")
    done = train(site, tmp_path, env=dict(os.environ, RANK="1"))
    assert not out.exists()
    assert "[patchkit]" not in done.stderr


def test_logprob_role_ref_captures_the_reference_model_only(tmp_path):
    out = tmp_path / "traces"
    site = patched(tmp_path, "verl-fsdp-logprob", "role=ref", "backend=torch", "schedule.active=3",
                   f"profiler.save_path={out}")
    done = train(site, tmp_path)
    traces = glob.glob(str(out / "*.pt.trace.json"))
    assert len(traces) == 1 and "_ref." in os.path.basename(traces[0])
    assert torch_steps(out) == [["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]]
    assert "verl-fsdp-logprob/actor" not in done.stderr


def test_npu_backend_without_torch_npu_runs_to_the_end(tmp_path):
    site = patched(tmp_path, "verl-fsdp-update", f"profiler.save_path={tmp_path / 'npu'}")
    done = train(site, tmp_path)
    assert "torch_npu" in done.stderr and done.stderr.count("[patchkit]") == 1
    assert not (tmp_path / "npu").exists()


@pytest.mark.parametrize("version", ["2.3.1.post2", "2.5.1", "2.7.1", "2.10.0", "2.14.0"])
def test_npu_backend_against_the_torch_npu_stand_in(tmp_path, version):
    out = tmp_path / "npu_traces"
    site = patched(tmp_path, "verl-fsdp-update", "granularity=micro", "schedule.wait=1", "schedule.warmup=1",
                   "schedule.active=2", f"profiler.save_path={out}", "profiler.export_type=db")
    env = npu_double_env(version, strict=True)
    done = train(site, tmp_path, env=env)
    folders = sorted(out.glob("*_ascend_pt"))
    assert len(folders) == 1, done.stdout + done.stderr
    info = json.loads(next(folders[0].glob("profiler_info*.json")).read_text())
    schedule = info["config"]["common_config"]["schedule"]
    assert {k: schedule[k] for k in ("wait", "warmup", "active", "repeat")} == {"wait": 1, "warmup": 1, "active": 2, "repeat": 1}
    assert list(folders[0].glob("ASCEND_PROFILER_OUTPUT/*.db")), "analysis wrote the Db export"
    assert "DoubleStrictError" not in done.stderr and "[ERROR]" not in done.stdout
