"""Helpers shared by the runtime test modules (test_runtime*.py): settings, stderr lines, traces, stand-in backends."""

from __future__ import annotations

import glob
import itertools
import json
import os
import sys
import warnings

import pytest

from patchkit.runtime import backends


def settings(save_path, **kw):
    s = dict(backend="torch", level="level0", contents=("cpu",), export_type="text", analysis=False,
             save_path=str(save_path), ranks="all", wait=0, warmup=0, active=1, repeat=1, skip_first=0, mstx=False)
    s.update(kw)
    return s


def lines(capsys):
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("[patchkit]")]


def trace_files(folder):
    return sorted(glob.glob(os.path.join(str(folder), "*.pt.trace.json")))


def profiler_steps(trace):
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    return sorted((e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")),
                  key=lambda n: int(n.split("#")[1]))


@pytest.fixture
def no_profiler_left_running(clean_runtime):
    """patchkit.runtime forgotten around the test, and no torch profiler left running by it."""
    import torch

    yield clean_runtime
    clean_runtime.reset()
    assert not torch.autograd.profiler._is_profiler_enabled, "a test left a torch profiler running"


def torch_actions(n, **sched):
    """What torch.profiler.schedule(**sched) returns for steps 0..n-1, as ints."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn = torch.profiler.schedule(**sched)
    return [int(fn(i).value) for i in range(n)]


SCHEDULES = [dict(wait=w, warmup=u, active=a, repeat=r, skip_first=s)
             for w, u, a, r, s in itertools.product((0, 1, 3), (0, 1, 2), (1, 2, 3), (0, 1, 2), (0, 1, 4))]


class Recorder(backends.Backend):
    """A backend whose code only notes what the runtime asks of it (in ``log``: its code imports it by name)."""

    def __init__(self):
        self.log = []
        self.sections = backends.SECTIONS  # the sections its code has (set before a capture starts)

    def probe(self):
        return {"version": "rec"}

    def plan(self, s, features, key):
        sections = {name: f"import _pk_recorder_log\n_pk_recorder_log.log.append(({name!r}, step))\n"
                    for name in self.sections}
        return backends.Plan(sections=sections, trace_dir=None)


@pytest.fixture
def recorder(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # its windows' manifests go to the (relative) save path: not into the checkout
    rec = Recorder()
    monkeypatch.setitem(sys.modules, "_pk_recorder_log", rec)
    monkeypatch.setitem(backends._REGISTRY, "recorder", rec)
    return rec


class Broken(backends.Backend):
    """A backend whose profiler fails at ``where``."""

    def __init__(self, where):
        self.where = where

    def probe(self):
        if self.where == "probe":
            raise ImportError("No module named 'vendor_profiler'")
        return {}

    def plan(self, s, features, key):
        sections = {"create": "x = 1\n", "begin": "pass\n", "advance": "pass\n", "end": "pass\n"}
        sections[self.where] = "raise RuntimeError('device 7 is gone')\n"
        return backends.Plan(sections=sections)



def on_stand_in(script, tmp_path, version="2.14.0", strict=True, with_torch=False):
    """Run ``script`` (argv[1]: ``tmp_path``) against the torch_npu stand-in of ``version``; its PATCHKIT-RESULT."""
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(repo / "tests" / "doubles"), str(repo)]),
               TORCH_NPU_DOUBLE_VERSION=version, TORCH_NPU_DOUBLE_STRICT="1" if strict else "0",
               TORCH_NPU_DOUBLE_TORCH="1" if with_torch else "0")
    env.pop("RANK", None)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(next(ln for ln in done.stdout.splitlines() if ln.startswith("PATCHKIT-RESULT "))[16:])
