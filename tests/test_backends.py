"""patchkit.runtime.backends: every backend found holds to the contract, the code each renders, and that it is the
code that runs.

The tests that loop run every backend the walk of patchkit.runtime.backends
finds (``finder.found()``), so a backend added there is tested here with no
test to edit; the others try one backend's own code.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Mapping

import pytest

from patchkit.core.vocabulary import SETTING
from patchkit.runtime import backends, finder
from patchkit.runtime.backend import Backend
from patchkit import runtime

REPO = Path(__file__).resolve().parent.parent


def settings(**kw):
    s = dict(backend="torch", level="level0", contents=("cpu", "npu"), export_type="text", analysis=False,
             save_path="./outputs/patchkit/x", ranks="all", wait=1, warmup=1, active=3, repeat=1, skip_first=0,
             mstx=False)
    s.update(kw)
    return s


pytestmark = pytest.mark.usefixtures("clean_runtime")  # from conftest.py


# ---------------------------------------------------------------------------
# import hygiene


def test_runtime_and_backends_import_without_torch():
    code = ("import sys; sys.modules['torch'] = None; sys.modules['torch_npu'] = None\n"
            "import patchkit.runtime, patchkit.runtime.backends as b\n"
            "print(b.names())\n"
            "for name in b.names():\n"
            "    b.render(dict(backend=name, save_path='./o'), key='r')\n"
            "b.validate(dict(backend='npu'))\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "npu" in out.stdout


# ---------------------------------------------------------------------------
# every backend found holds to the contract


@pytest.mark.parametrize("name", finder.found())
def test_each_backend_found_holds_to_the_contract(name):
    backend = backends.get(name)
    assert isinstance(backend, Backend) and type(backend).__module__ == f"{finder.PACKAGE}.{name}"
    for method in ("probe", "plan", "check", "launch"):  # the contract's parameters, by name
        assert list(inspect.signature(getattr(type(backend), method)).parameters) == \
            list(inspect.signature(getattr(Backend, method)).parameters), f"{name}.{method}"
    assert isinstance(backend.STATIC_FEATURES, Mapping) and "version" in backend.STATIC_FEATURES
    assert set(backend.UNUSED) <= set(SETTING), f"{name}: UNUSED names no setting {set(backend.UNUSED) - set(SETTING)}"
    assert backend.describe().startswith(f"{name} backend: "), "the reference opens its section with this line"
    s = backends.normalize({"backend": name})
    assert backend.check(s) == [] and all(isinstance(line, str) for line in backend.launch(s))
    plan = backend.plan(s, backend.STATIC_FEATURES, "r/actor")
    assert isinstance(plan, backends.Plan) and set(plan.sections) <= set(backends.SECTIONS) and plan.sections
    for section, code in plan.sections.items():
        compile(code, f"<{name} {section}>", "exec")


@pytest.mark.parametrize("name", [name for name in finder.found() if backends.get(name).UNUSED])
def test_each_backend_found_notes_the_settings_it_declares_unused_when_a_recipe_sets_them(name):
    backend = backends.get(name)
    changed = {k: v for k, v in [("level", "level2"), ("mstx", True), ("l2_cache", True)] if k in backend.UNUSED}
    text = backends.render({"backend": name, **changed}, key="r", features=backend.STATIC_FEATURES)
    assert "has no equivalent of " + ", ".join(f"{SETTING[k].key}={v!r}" for k, v in changed.items()) in text


# ---------------------------------------------------------------------------
# what each backend checks itself (the settings every backend takes: test_runtime_settings.py)


@pytest.mark.parametrize("path", ["./out:1", "./out dir", "./out/a=b", "./out/x@y", "./out,1", "./日本"])
def test_npu_save_path_torch_npu_would_drop_is_rejected(path):
    problems = backends.validate(settings(backend="npu", save_path=path))
    assert len(problems) == 1 and "silently discarded" in problems[0]
    assert backends.validate(settings(backend="torch", save_path=path)) == []


def test_npu_needs_cpu_or_npu_contents():
    problems = backends.validate(settings(backend="npu", contents=("memory", "shapes")))
    assert any("needs cpu or npu" in p for p in problems)


# ---------------------------------------------------------------------------
# render


@pytest.mark.parametrize("backend", backends.names())
def test_render_is_python_without_patchkit_calls(backend):
    text = backends.render(settings(backend=backend, mstx=True), key="verl-fsdp-logprob/ref")
    ast.parse(text)
    code_lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert code_lines and not any("patchkit." in ln or "import patchkit" in ln for ln in code_lines)
    assert "records steps 2-4; the schedule is over at step 5" in text


def test_render_quotes_values():
    nasty = "./o'ut\"\\x/{y}"
    text = backends.render(settings(save_path=nasty), key="r")
    tree = ast.parse(text)
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert nasty in strings


def test_render_rejects_invalid_settings():
    with pytest.raises(ValueError, match="profiler.level"):
        backends.render(settings(level="max"))


def test_torch_render():
    text = backends.render(settings(contents=("cpu", "npu", "memory", "shapes", "stack", "module")), key="r")
    assert "schedule = torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1, skip_first=0)" in text
    assert "    schedule=schedule," in text
    assert "on_trace_ready=on_trace_ready" in text  # tensorboard_trace_handler's file, renamed once written whole
    assert "trace = os.path.join('./outputs/patchkit/x', name)" in text and "os.rename(part, trace)" in text
    for flag in ("record_shapes", "profile_memory", "with_stack", "with_modules"):
        assert f"{flag}=True" in text
    assert "if torch.cuda.is_available():" in text
    cpu_only = backends.render(settings(contents=("cpu",)), key="r")
    assert "CUDA" not in cpu_only and "record_shapes=False" in cpu_only
    assert "torch_npu" not in text


def test_torch_render_with_role_names_the_file():
    text = backends.render(settings(), key="verl-fsdp-logprob/ref")
    assert "name = socket.gethostname() + '_' + str(os.getpid()) + '_ref' + '.' + str(time.time_ns()) + " \
        "'.pt.trace.json'" in text


class Export:
    """A torch profiler's export_chrome_trace as kineto writes its file, and as it behaves when the disk fills: torch
    itself reports nothing.  ``how``: whole, the keys kineto adds after the events (an "ERROR" list when CUPTI reports
    a problem; one no torch writes yet), or the write stopped at a point of the JSON."""

    EVENTS = b' {\n  "schemaVersion": 1,\n  "traceEvents": [\n  {\n    "ph": "X", "name": "aten::mm",\n' \
             b'    "args": {\n      "Input Dims": [[4, 4], [4, 4]]\n    }\n  }\n  ],'
    KEYS = {"whole": b"",
            "error": b'\n      "ERROR": ["CUPTI call cuptiGetDeviceCount failed with code 35 (gpuGetDeviceCount)"],',
            "unknown": b'\n      "futureKey": {"list": [1, {"a": "]}"}], "n": null},'}
    CUTS = {"stopped": (b"", 45), "mid-string": (b"", 60), "mid-list": (b"", 122),
            "before-the-brace": (b"", -2), "after-the-events": (b"", len(EVENTS))}

    def __init__(self, how):
        self.how = how

    def export_chrome_trace(self, path):
        keys, at = self.CUTS.get(self.how, (self.KEYS.get(self.how, b""), None))
        data = self.EVENTS + keys + b'"traceName": "%s" }' % path.encode()
        if self.how == "raises":
            raise OSError(27, "File too large")
        if self.how == "stopped":  # kineto saw the stream fail: it leaves its temporary file and says nothing
            Path(path + ".tmp").write_bytes(data[:at])
            return
        Path(path).write_bytes(data[:at])


@pytest.mark.parametrize("how, why", [
    ("whole", None), ("error", None), ("unknown", None),
    ("stopped", "OSError: torch did not finish it: its temporary file ends after 45 bytes inside a list opened at "
                "byte 42"),
    ("mid-string", "OSError: torch wrote only part of it: it ends after 60 bytes inside a string opened at byte 58"),
    ("mid-list", "OSError: torch wrote only part of it: it ends after 122 bytes inside a list opened at byte 118"),
    ("before-the-brace", "OSError: torch wrote only part of it: it ends after "),
    ("after-the-events", "OSError: torch wrote only part of it: it ends after 148 bytes before the brace that "
                         "closes its top-level object (opened at byte 1)"),
    ("raises", "OSError: [Errno 27] File too large")])
def test_torch_trace_gets_its_name_only_when_written_whole(tmp_path, how, why):
    """The torch backend's on_trace_ready, run as the runtime runs it: a trace is whole by its JSON's structure,
    whatever keys torch added; one cut short never gets its name, and the reason says what was found."""
    pytest.importorskip("torch")
    out = tmp_path / "out"
    prog = backends.build(settings(save_path=str(out)), "r/ref")
    prog.run("create")
    prog.namespace["on_trace_ready"](Export(how))
    failed = prog.failed_traces()
    if why is None:
        [trace] = os.listdir(out)
        assert trace.startswith(f"{os.uname().nodename}_{os.getpid()}_ref.") and trace.endswith(".pt.trace.json")
        data = json.loads((out / trace).read_bytes())
        assert failed == [] and data["traceName"] == f"{out / trace}.part" and len(data["traceEvents"]) == 1
        assert ("ERROR" in data) == (how == "error") and ("futureKey" in data) == (how == "unknown")
    else:
        assert os.listdir(out) == []  # nothing under the trace's name, no temporary file left
        [(trace, said)] = failed
        assert said.startswith(why) and os.path.dirname(trace) == str(out) and trace.endswith(".pt.trace.json")
        assert "disk" not in said  # what was found, not a guess at the cause
        if how == "before-the-brace":
            assert said.endswith("bytes before the brace that closes its top-level object (opened at byte 1)")
    assert prog.failed_traces() == []  # each failure is handed over once


def test_torch_render_matches_the_installed_torch():
    pytest.importorskip("torch")
    s = settings()
    assert backends.render(s, key="r") == backends.render(s, key="r", features=backends.probe("torch"))


def test_npu_render_uses_only_torch_npu_objects_and_keywords():
    text = backends.render(settings(backend="npu", level="level1", export_type="db", analysis=True, mstx=True,
                                    contents=("cpu", "npu", "memory")), key="r")
    assert "torch.profiler" not in text and "import torch\n" not in text
    assert "profiler_level=torch_npu.profiler.ProfilerLevel.Level1" in text
    assert "export_type=torch_npu.profiler.ExportType.Db" in text  # a str attribute, never a list
    assert "aic_metrics" not in text  # level1 keeps torch_npu's default metrics
    assert "mstx=True" in text
    assert "analyse_flag=True" in text
    assert "activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU]" in text
    assert "schedule=torch_npu.profiler.schedule(wait=1, warmup=1, active=3, repeat=1, skip_first=0)" in text
    assert "profile_memory=True" in text
    assert "if on_trace_ready is None:" in text
    assert "torch_npu.npu.mstx.range_start('r' + '#' + str(step))" in text
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith(("schedule", "_ExperimentalConfig", "profile")):
            assert not node.args, ast.unparse(node)  # keywords only
    level0 = backends.render(settings(backend="npu"), key="r")
    assert "aic_metrics=torch_npu.profiler.AiCMetrics.AiCoreNone" in level0
    none = backends.render(settings(backend="npu", level="level_none", mstx=True, contents=("npu",)), key="r")
    assert "ProfilerLevel.Level_none" in none and "ProfilerActivity.CPU" not in none


def old_npu_features(train):
    """What probe() finds in older torch_npu release trains (TORCH_NPU_API.md, 6.2 and 5.1)."""
    f = dict(backends.get("npu").STATIC_FEATURES, assumed=None, version=f"old-{train}")
    exp = {"profiler_level", "aic_metrics", "l2_cache", "data_simplification", "record_op_args", "export_type"}
    if train >= 2:
        exp |= {"msprof_tx", "op_attr"}
    if train >= 7:
        exp |= {"mstx"}
    f["experimental"] = frozenset(exp)
    f["handler"] = frozenset({"dir_name", "worker_name"} | ({"analyse_flag"} if train >= 2 else set()))
    f["schedule"] = frozenset({"wait", "active", "warmup", "repeat", "skip_first"})
    f["profile"] = frozenset({"activities", "schedule", "on_trace_ready", "record_shapes", "profile_memory",
                              "with_stack", "with_flops", "with_modules", "experimental_config", "use_cuda"})
    f["mstx_range"] = train >= 3
    return f


def test_npu_render_follows_the_installed_signatures():
    s = settings(backend="npu", mstx=True, analysis=True)
    t3 = backends.render(s, key="r", features=old_npu_features(3))
    assert "msprof_tx=True" in t3 and "mstx=True" not in t3
    assert "analyse_flag=True" in t3
    assert "built for the installed torch_npu old-3" in t3
    t7 = backends.render(s, key="r", features=old_npu_features(7))
    assert "    mstx=True," in t7 and "msprof_tx" not in t7
    t1 = backends.render(s, key="r", features=old_npu_features(1))
    assert "on_trace_ready = torch_npu.profiler.tensorboard_trace_handler('./outputs/patchkit/x')\n" in t1
    assert "no analyse_flag=" in t1 and "neither mstx= nor msprof_tx=" in t1
    assert "torch_npu.npu.mstx.range_start(" not in t1 and "no mstx.range_start" in t1


def test_nsys_render():
    text = backends.render(settings(backend="nsys", repeat=2), key="r")
    assert "torch.cuda.profiler.start()" in text and "torch.cuda.profiler.stop()" in text
    assert "torch.cuda.nvtx.range_push('r' + '#' + str(step))" in text
    assert "--capture-range=cudaProfilerApi --capture-range-end=repeat" in text


def test_schedule_description_for_repeat_zero():
    text = backends.render(settings(repeat=0, wait=2, warmup=1, active=2), key="r")
    assert "records steps 3-4, steps 8-9, ... (every 5 steps until the process exits)" in text


# ---------------------------------------------------------------------------
# what renders is what runs


def test_the_runtime_runs_the_rendered_code(tmp_path):
    pytest.importorskip("torch")
    s = settings(save_path=str(tmp_path / "t"), contents=("cpu",), wait=0, warmup=0, active=1)
    runtime.configure("same", **s)
    runtime.step("same")  # creates the capture
    cap = runtime._captures["same"]
    assert cap.program.render() == backends.render(s, key="same", features=backends.probe("torch"))
    for name, src in cap.program.sections.items():
        assert src.rstrip("\n") in cap.program.render(), name
    runtime.step("same")
    assert runtime.report()[0]["state"] == "finished"


# ---------------------------------------------------------------------------
# npu code against a minimal fake torch_npu (the full CPU stand-in is tests/doubles)


class FakeTorchNpu:
    """Records what the generated npu code calls; ``handler_none`` makes the handler return None."""

    def __init__(self, handler_none=False, npu_available=True):
        self.calls = []
        calls = self.calls
        top = types.ModuleType("torch_npu")
        top.__version__ = "2.5.1-fake"
        prof = types.ModuleType("torch_npu.profiler")
        npu = types.ModuleType("torch_npu.npu")
        top.profiler, top.npu = prof, npu
        npu.is_available = lambda: npu_available

        class mstx:
            @staticmethod
            def range_start(message, stream=None):
                calls.append(("range_start", message))
                return 7

            @staticmethod
            def range_end(range_id):
                calls.append(("range_end", range_id))

        npu.mstx = mstx
        prof.ProfilerLevel = types.SimpleNamespace(Level_none="Level_none", Level0="Level0", Level1="Level1",
                                                   Level2="Level2")
        prof.AiCMetrics = types.SimpleNamespace(AiCoreNone="ACL_AICORE_NONE")
        prof.ExportType = types.SimpleNamespace(Text="text", Db="db")
        prof.ProfilerActivity = types.SimpleNamespace(CPU="ProfilerActivity.CPU", NPU="ProfilerActivity.NPU")

        class _ExperimentalConfig:
            def __init__(self, profiler_level="Level0", aic_metrics="ACL_AICORE_NONE", l2_cache=False,
                         msprof_tx=False, data_simplification=True, record_op_args=False, op_attr=False,
                         gc_detect_threshold=None, export_type=None):
                calls.append(("experimental", dict(profiler_level=profiler_level, aic_metrics=aic_metrics,
                                                   msprof_tx=msprof_tx, export_type=export_type)))

        class schedule:
            def __init__(self, wait, active, warmup=0, repeat=0, skip_first=0):
                calls.append(("schedule", dict(wait=wait, active=active, warmup=warmup, repeat=repeat,
                                               skip_first=skip_first)))

        def tensorboard_trace_handler(dir_name=None, worker_name=None, analyse_flag=True, async_mode=False):
            calls.append(("handler", dict(dir_name=dir_name, worker_name=worker_name, analyse_flag=analyse_flag)))
            return None if handler_none else (lambda p: calls.append(("trace_ready",)))

        class profile:
            def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                         profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                         experimental_config=None, use_cuda=None):
                calls.append(("profile", dict(activities=activities, record_shapes=record_shapes,
                                              profile_memory=profile_memory)))

            def start(self):
                calls.append(("start",))

            def step(self):
                calls.append(("step",))

            def stop(self):
                calls.append(("stop",))

        prof._ExperimentalConfig, prof.schedule, prof.profile = _ExperimentalConfig, schedule, profile
        prof.tensorboard_trace_handler = tensorboard_trace_handler
        self.modules = {"torch_npu": top, "torch_npu.profiler": prof, "torch_npu.npu": npu}

    def names(self):
        return [c[0] for c in self.calls]


def test_npu_code_runs_against_a_fake_torch_npu(monkeypatch, tmp_path, capsys):
    fake = FakeTorchNpu()
    for name, mod in fake.modules.items():
        monkeypatch.setitem(sys.modules, name, mod)
    save = str(tmp_path / "npu")
    runtime.configure("n", **settings(backend="npu", save_path=save, mstx=True, wait=0, warmup=0, active=2))
    for _ in range(5):
        runtime.step("n")
    assert fake.names() == ["experimental", "handler", "schedule", "profile", "start", "range_start",
                            "range_end", "step", "range_start", "range_end", "step", "stop"]
    first = {c[0]: (c[1] if len(c) > 1 else None) for c in reversed(fake.calls)}
    exp = first["experimental"]
    assert exp == {"profiler_level": "Level0", "aic_metrics": "ACL_AICORE_NONE", "msprof_tx": True,
                   "export_type": "text"}
    assert first["handler"] == {"dir_name": save, "worker_name": None, "analyse_flag": False}
    assert first["schedule"] == {"wait": 0, "active": 2, "warmup": 0, "repeat": 1, "skip_first": 0}
    assert ("range_start", "n#0") in fake.calls and ("range_start", "n#1") in fake.calls
    assert os.path.isdir(save)
    err = capsys.readouterr().err
    assert "n: recording steps 0-1" in err and "n: window closed after step 1" in err


def test_npu_handler_returning_none_is_one_line_and_no_capture(monkeypatch, tmp_path, capsys):
    fake = FakeTorchNpu(handler_none=True)
    for name, mod in fake.modules.items():
        monkeypatch.setitem(sys.modules, name, mod)
    runtime.configure("n", **settings(backend="npu", save_path=str(tmp_path / "npu")))
    for _ in range(4):
        runtime.step("n")
    assert "profile" not in fake.names()
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("[patchkit]")]
    assert len(err) == 1 and "returned None" in err[0] and "the job runs on" in err[0]


def test_npu_without_a_device_is_one_line(monkeypatch, tmp_path, capsys):
    fake = FakeTorchNpu(npu_available=False)
    for name, mod in fake.modules.items():
        monkeypatch.setitem(sys.modules, name, mod)
    runtime.configure("n", **settings(backend="npu", save_path=str(tmp_path / "npu")))
    runtime.step("n")
    runtime.step("n")
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("[patchkit]")]
    assert len(err) == 1 and "no NPU device" in err[0]
    assert fake.calls == []


# ---------------------------------------------------------------------------
# the npu backend against the CPU stand-in for torch_npu (tests/doubles), per release

DOUBLES = REPO / "tests" / "doubles"
DOUBLE_VERSIONS = ["2.3.1.post2", "2.5.1", "2.7.1", "2.10.0", "2.12.0", "2.14.0"]
WITH_TORCH = "2.14.0"  # one release also delegates to torch.profiler, for real events in the trace

DOUBLE_SCRIPT = r'''
import json, os, socket, sys
import patchkit.runtime as rt

out, with_torch = sys.argv[1], sys.argv[2] == "1"


def conf(rid, **kw):
    s = dict(backend="npu", level="level0", contents=("cpu", "npu"), export_type="text", analysis=False,
             save_path=os.path.join(out, rid), ranks="all", wait=0, warmup=0, active=1, repeat=1, skip_first=0,
             mstx=False)
    s.update(kw)
    rt.configure(rid, **s)


# verl-fsdp-update as in the issue, analysed text export, mstx ranges per step
conf("upd", level="level1", analysis=True, mstx=True, contents=("cpu", "npu", "memory"), wait=1, warmup=1, active=3)
# db export
conf("dbx", export_type="db", analysis=True)
# the lightweight mode of seed 004 (markers only), for a role
conf("lp", level="level_none", mstx=True, contents=("npu",), active=2)

work = None
if with_torch:
    import torch
    work = torch.ones(8, 8)
for key in ("upd", "dbx", "lp/ref"):
    for _ in range(8):
        if work is not None:
            work = torch.tanh(work @ work)
        rt.step(key)

import torch_npu
rec = torch_npu._double.recorder
profiles = []
for p in rec.profiles:
    profiles.append({"experimental_config": p.experimental_config, "schedule": p.schedule,
                     "activities": p.activities, "dirs": p.dirs, "analysed_dirs": p.analysed_dirs,
                     "trace_ready_calls": p.trace_ready_calls, "backend": p.backend,
                     "init_kwargs": sorted(p.init_kwargs)})
print("PATCHKIT-RESULT " + json.dumps({
    "version": torch_npu.__version__, "host": socket.gethostname(), "report": rt.report(),
    "warnings": [m for _, m in rec.warnings], "errors": [list(e) for e in rec.errors],
    "strict": rec.strict_violations, "profiles": profiles,
    "mstx": [(m.kind, m.message) for m in rec.mstx],
}, default=repr))
'''


@pytest.fixture(scope="module")
def double_runs(tmp_path_factory):
    if not (DOUBLES / "torch_npu" / "__init__.py").is_file():
        pytest.skip("the torch_npu double (tests/doubles/torch_npu) is not there")
    procs = {}
    for version in DOUBLE_VERSIONS:
        out = tmp_path_factory.mktemp("npu-" + version)
        with_torch = version == WITH_TORCH
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(DOUBLES), str(REPO)]),
                   TORCH_NPU_DOUBLE_VERSION=version, TORCH_NPU_DOUBLE_STRICT="0" if with_torch else "1",
                   TORCH_NPU_DOUBLE_TORCH="1" if with_torch else "0")
        for name in ("PATCHKIT_STRICT", "RANK", "PROF_CONFIG_PATH", "PROFILER_SAMPLECONFIG", "PROFILING_MODE"):
            env.pop(name, None)
        procs[version] = (out, subprocess.Popen(
            [sys.executable, "-c", DOUBLE_SCRIPT, str(out), "1" if with_torch else "0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    runs = {}
    for version, (out, proc) in procs.items():
        stdout, stderr = proc.communicate(timeout=180)
        result = None
        for line in stdout.splitlines():
            if line.startswith("PATCHKIT-RESULT "):
                result = json.loads(line[len("PATCHKIT-RESULT "):])
        runs[version] = types.SimpleNamespace(out=out, rc=proc.returncode, stdout=stdout, stderr=stderr,
                                              result=result)
    return runs


@pytest.mark.parametrize("version", DOUBLE_VERSIONS)
def test_npu_backend_against_torch_npu_double(double_runs, version):
    run = double_runs[version]
    assert run.rc == 0 and run.result, run.stderr[-3000:]
    res = run.result
    assert res["version"] == version
    # nothing torch_npu would warn about and reset, no swallowed error, no silent hazard
    assert res["errors"] == [] and res["strict"] == []
    assert set(res["warnings"]) <= {"Profiler won't be using warmup, this can skew profiler results"}

    report = {r["key"]: r for r in res["report"]}
    assert {k: (r["state"], r["error"], [tuple(w) for w in r["recorded"]]) for k, r in report.items()} == {
        "upd": ("finished", None, [(2, 4)]), "dbx": ("finished", None, [(0, 0)]), "lp/ref": ("finished", None, [(0, 1)])}
    upd, dbx, lp = res["profiles"]

    # verl-fsdp-update: level1, text, analysed, mstx (msprof_tx before the 2025-10 releases)
    exp = upd["experimental_config"]
    assert exp["_profiler_level"] == "Level1"
    assert exp["_export_type"] in ("text", ["text"])
    old = version in ("2.3.1.post2", "2.5.1")
    assert (exp["_msprof_tx"], exp.get("_mstx", False)) == ((True, False) if old else (False, True))
    sched = {k: upd["schedule"][k] for k in ("wait", "warmup", "active", "repeat", "skip_first")}
    assert sched == {"wait": 1, "warmup": 1, "active": 3, "repeat": 1, "skip_first": 0}
    assert upd["activities"] == ["ProfilerActivity.CPU", "ProfilerActivity.NPU"]
    assert "experimental_config" in upd["init_kwargs"] and "profile_memory" in upd["init_kwargs"]
    (folder,) = upd["dirs"]
    assert upd["analysed_dirs"] == [folder] and upd["trace_ready_calls"] == 1
    assert report["upd"]["traces"] == [folder]
    assert os.path.isfile(os.path.join(folder, "ASCEND_PROFILER_OUTPUT", "trace_view.json"))
    assert os.path.basename(folder).startswith(f"{res['host']}_")
    ranges = [m for kind, m in res["mstx"] if kind == "range_start"]
    assert [m for m in ranges if m.startswith("upd#")] == ["upd#2", "upd#3", "upd#4"]

    # db export, AI Core metrics off at level0
    assert dbx["experimental_config"]["_export_type"] in ("db", ["db"])
    assert dbx["experimental_config"]["_aic_metrics"] == "ACL_AICORE_NONE"
    (db_folder,) = dbx["dirs"]
    assert any(n.startswith("ascend_pytorch_profiler") and n.endswith(".db")
               for n in os.listdir(os.path.join(db_folder, "ASCEND_PROFILER_OUTPUT")))

    # the lightweight role capture: markers only, NPU only, the role in the folder name
    assert lp["experimental_config"]["_profiler_level"] == "Level_none"
    assert lp["activities"] == ["ProfilerActivity.NPU"]
    (lp_folder,) = lp["dirs"]
    assert os.path.basename(lp_folder).startswith(f"{res['host']}_ref_")
    assert [m for m in ranges if m.startswith("lp/ref#")] == ["lp/ref#0", "lp/ref#1"]


def test_npu_trace_from_torch_npu_double_holds_the_scheduled_steps(double_runs):
    run = double_runs[WITH_TORCH]
    assert run.rc == 0 and run.result, run.stderr[-3000:]
    (folder,) = run.result["profiles"][0]["dirs"]
    assert run.result["profiles"][0]["backend"] == "torch"
    with open(os.path.join(folder, "ASCEND_PROFILER_OUTPUT", "trace_view.json")) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {e.get("name") for e in events}
    assert sorted(n for n in names if str(n).startswith("ProfilerStep#")) == [
        "ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert {"upd#2", "upd#3", "upd#4"} <= names  # the mstx range of each recorded step
    assert any(str(n).startswith("aten::") for n in names)  # the job's own work
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("[patchkit]")]
    assert len(lines) == 6  # a window opens and closes for each of the three captures


@pytest.mark.parametrize("repeat,end", [(1, "stop"), (3, "repeat:3"), (0, "repeat")])
def test_nsys_options_record_one_report_per_window_and_never_end_the_job(repeat, end):
    from patchkit.runtime.backends import nsys

    s = backends.normalize(settings(backend="nsys", repeat=repeat))
    assert nsys.options(s) == {"trace": "cuda,nvtx", "capture-range": "cudaProfilerApi", "capture-range-end": end}
    lines = backends.get("nsys").launch(s)
    assert f"--capture-range=cudaProfilerApi --capture-range-end={end}" in lines[0]
    assert any(f'"capture-range-end": "{end}"' in line and "--runtime-env-json" in line for line in lines)
    assert all("shutdown" not in line for line in lines)


def test_show_prints_how_to_run_the_job_under_nsys_for_the_recipe_s_window():
    from click.testing import CliRunner

    from patchkit.cli.commands import main

    out = CliRunner().invoke(main, ["show", "verl-fsdp-update", "--backend", "nsys", "schedule.repeat=2"]).output
    assert "run the job (nsys):" in out and "--capture-range-end=repeat:2" in out
    assert "/tmp/ray/session_latest/logs/nsight/" in out
    torch_out = CliRunner().invoke(main, ["show", "verl-fsdp-update", "--backend", "torch"]).output
    assert "run the job" not in torch_out
