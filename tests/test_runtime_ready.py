"""patchkit.runtime.ready: whether a backend can record in a process, asked in fresh interpreters as a job would be
asked (what they have imported is the question), and that asking imports nothing and starts no device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from doubles import DOUBLES_DIR, npu_double_env
from patchkit.runtime import finder, ready
from patchkit.runtime.backend import Backend, Plan

REPO = Path(__file__).resolve().parent.parent
ASK = """\
import json, sys
{before}
from patchkit.runtime import ready
seen = set(sys.modules)
out = {{name: ready.unready(name, {contents!r}) for name in ("npu", "torch", "nsys", "memory")}}
out["refusal"] = ready.refusal("r", {{"backend": {backend!r}, "contents": {contents!r}}})
out["imported"] = sorted(m.split(".")[0] for m in set(sys.modules) - seen if m.split(".")[0] in ("torch", "torch_npu"))
out["cuda"] = bool(sys.modules["torch"].cuda.is_initialized()) if sys.modules.get("torch") else None
print(json.dumps(out))
"""


def ask(before="", backend="npu", contents=("cpu", "npu"), env=None):
    environ = dict(env or os.environ)  # the torch_npu stand-in on the path only with npu_double_env's
    environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *([DOUBLES_DIR] if env else [])])
    done = subprocess.run([sys.executable, "-c", ASK.format(before=before, backend=backend, contents=list(contents))],
                          capture_output=True, text=True, env=environ, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_a_cpu_torch_job_without_torch_npu_is_told_to_use_the_torch_backend():
    out = ask("import torch")
    assert out["npu"] == f"torch_npu is not installed in the job's environment ({sys.executable})"
    assert out["torch"] == ""
    assert out["nsys"] == "the job has not used a CUDA device (torch.cuda.is_initialized() is False)"
    assert out["memory"].startswith("the job has not used a CUDA device") and "has not imported torch_npu" in \
        out["memory"]
    assert out["refusal"] == (f"the npu backend cannot record in this job: {out['npu']}; hint: --backend torch can "
                              "record here")
    assert out["imported"] == [] and out["cuda"] is False  # asked, nothing imported, CUDA never started


def test_a_job_that_has_not_imported_torch_is_asked_without_importing_it():
    out = ask(backend="torch", contents=("cpu",))
    assert out["torch"] == "" and out["refusal"] == "" and out["imported"] == [] and out["cuda"] is None
    assert out["nsys"] == "the job has not imported torch, so it runs nothing on CUDA"


def test_torch_npu_installed_but_not_imported_runs_nothing_on_an_npu_unless_only_cpu_is_asked():
    env = npu_double_env("2.7.1")
    out = ask(env=env)
    assert out["npu"] == "the job has not imported torch_npu, so it runs nothing on an NPU" and out["imported"] == []
    assert ask(contents=("cpu",), env=env)["npu"] == ""  # torch_npu's profiler on the CPU alone needs no device


def test_an_npu_job_is_ready_and_one_whose_npu_is_gone_is_refused():
    env = npu_double_env("2.7.1")
    assert ask("import torch, torch_npu", env=env)["refusal"] == ""
    out = ask("import torch, torch_npu", env=dict(env, TORCH_NPU_DOUBLE_NPU_AVAILABLE="0"))
    assert out["npu"] == "no NPU device is available (torch_npu.npu.is_available() is False)"
    assert out["refusal"].endswith("hint: --backend torch can record here")


def test_where_no_backend_can_record_the_refusal_says_so():
    out = ask("sys.modules['torch'] = None; sys.modules['torch_npu'] = None", backend="torch")
    assert out["torch"].startswith("torch is not installed in the job's environment")
    assert out["refusal"].endswith("hint: no backend can record here: attach to a job whose environment has its "
                                   "profiler's library and device")


class Anywhere(Backend):
    def probe(self):
        return {"version": "1"}

    def plan(self, settings, features, key):
        return Plan(sections={"advance": "pass\n"})


class Ghostly(Anywhere):
    LIBRARY = "no_such_profiler_library"


def test_a_backend_that_needs_nothing_or_is_unknown_is_not_refused(monkeypatch):
    monkeypatch.setitem(finder._REGISTRY, "anywhere", Anywhere())
    monkeypatch.setitem(finder._REGISTRY, "ghostly", Ghostly())
    assert ready.unready("anywhere") == "" and ready.unready("no-such-backend") == ""
    assert ready.unready("ghostly").startswith("no_such_profiler_library is not installed")
    assert ready.ordered()[:2] == ["npu", "torch"] and "anywhere" in ready.ordered()
    monkeypatch.setattr(ready, "library", lambda name, folders=None: "" if name in ("torch_npu", Ghostly.LIBRARY)
                        else "here")
    refused = ready.refusal("r", {"backend": "ghostly", "contents": ("cpu",)})
    assert refused.endswith("hint: --backend torch (or --backend anywhere) can record here"), refused


def test_a_library_is_looked_for_in_given_folders_without_importing_it(tmp_path):
    (tmp_path / "somelib").mkdir()
    (tmp_path / "somelib" / "__init__.py").write_text("raise SystemExit('imported')\n")
    (tmp_path / "single.py").write_text("raise SystemExit('imported')\n")
    assert ready.library("somelib", [str(tmp_path)]) == str(tmp_path)
    assert ready.library("single", [str(tmp_path)]) == str(tmp_path)
    assert ready.library("somelib", [str(tmp_path / "elsewhere")]) == "" and ready.library("somelib") == ""
    assert "somelib" not in sys.modules and "single" not in sys.modules


def test_a_module_whose_spec_is_odd_is_found_as_imported_and_a_broken_finder_is_not_found(monkeypatch):
    odd = type(sys)("odd_module")
    odd.__spec__ = None
    monkeypatch.setitem(sys.modules, "odd_module", odd)
    assert ready.library("odd_module") == "found"

    class Broken:
        @staticmethod
        def find_spec(*args):
            raise ImportError("broken")

    monkeypatch.setattr(sys, "meta_path", [Broken()] + sys.meta_path)
    assert ready.library("json_not_imported_anywhere") == ""


@pytest.mark.parametrize("kind", ["tpu"])
def test_a_device_patchkit_does_not_know_is_said(kind):
    assert ready.device(kind) == f"patchkit cannot tell whether a {kind} device is in use"
