"""What patchkit 0.2 left behind keeps working under the layer folders: the lines it inserted into targets.

A file patched by 0.2 imports ``patchkit.runtime`` and calls ``configure``, ``start``, ``step`` (and, for
other kinds of point, ``on_exit``, ``refuse``, ``ranged``, ``mark``).  The header below is 0.2's, byte for
byte as ``patchkit apply verl-fsdp-update backend=torch`` wrote it (save path aside); the module runs with
it and the trace holds the steps asked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import patchkit.runtime

REPO = Path(__file__).resolve().parent.parent

HEADER_0_2 = '''try:  # patchkit:verl-fsdp-update
    import patchkit.runtime as _patchkit_runtime  # patchkit:verl-fsdp-update
except Exception as _patchkit_missing:  # patchkit:verl-fsdp-update
    _patchkit_runtime = __import__("types").SimpleNamespace(configure=lambda *a, **k: None, start=lambda *a: None, step=lambda *a: None, refuse=lambda *a: None, on_exit=lambda *a: lambda f: f)  # patchkit:verl-fsdp-update
    try:  # patchkit:verl-fsdp-update
        __import__("sys").stderr.write("patchkit: verl-fsdp-update is applied to %s, but %s cannot import patchkit.runtime (%s); it runs without profiling. Install the same patchkit build (patchkit-profiler, not the registry's patchkit) in that environment, or take the lines out with `patchkit revert verl-fsdp-update`.\\n" % (__name__, __import__("sys").executable, repr(_patchkit_missing)))  # patchkit:verl-fsdp-update
    except Exception:  # patchkit:verl-fsdp-update
        pass  # patchkit:verl-fsdp-update
_patchkit_runtime.configure("verl-fsdp-update", backend="torch", level="level1", contents=("npu", "cpu"), export_type="text", analysis=True, save_path=SAVE_PATH, ranks="all", wait=1, warmup=0, active=2, repeat=1, skip_first=0, mstx=False, replicas="all", replica_size=0, steps=(), trigger="schedule", aic_metrics="default", l2_cache=False, op_attr=False, data_simplification=True, record_op_args=False, gc_detect_threshold=None, host_sys=(), sys_io=False, sys_interconnection=False)  # patchkit:verl-fsdp-update
'''

BODY = '''
import torch


def update_policy(batches):
    _patchkit_runtime.start("verl-fsdp-update")  # patchkit:verl-fsdp-update
    for x in batches:
        (x @ x).sum()
        _patchkit_runtime.step("verl-fsdp-update")  # patchkit:verl-fsdp-update


update_policy([torch.ones(8, 8) for _ in range(5)])
'''


def test_every_name_a_0_2_patched_file_calls_is_still_there():
    for name in ("configure", "start", "step", "on_exit", "refuse", "ranged", "mark"):
        assert callable(getattr(patchkit.runtime, name)), name


def test_a_module_patched_by_0_2_imports_and_records_the_steps_asked(tmp_path):
    out = tmp_path / "traces"
    module = tmp_path / "patched_by_0_2.py"
    module.write_text("SAVE_PATH = %r\n" % str(out) + HEADER_0_2 + BODY)
    env = dict(os.environ, PATCHKIT_HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, str(module)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "cannot import patchkit.runtime" not in done.stderr
    (manifest,) = (out / "patchkit-manifests").glob("*.json")
    assert json.loads(manifest.read_text())["steps"] == {"count": 2, "first": 1, "last": 2}
    (trace,) = out.glob("*.pt.trace.json")
    names = {e["name"] for e in json.loads(trace.read_text())["traceEvents"]}
    assert {"ProfilerStep#1", "ProfilerStep#2"} <= names and "ProfilerStep#3" not in names
