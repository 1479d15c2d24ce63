"""patchkit.runtime's public calls with torch on CPU, for real: a patched sample, never raising, on_exit."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

torch = pytest.importorskip("torch")

from patchkit.runtime import backends  # noqa: E402
from patchkit import runtime  # noqa: E402
from patchkit.demo import SAMPLE  # noqa: E402
from runtime_helpers import Broken, lines, profiler_steps, settings, trace_files  # noqa: E402
from runtime_helpers import no_profiler_left_running  # noqa: E402,F401  (a fixture)

pytestmark = pytest.mark.usefixtures("no_profiler_left_running")


# ---------------------------------------------------------------------------
# the verl-shaped sample, patched the way the engine patches it


HEADER_ANCHOR = '"""\nSingle Process Actor\n"""\n'
UPDATE_START = "        # make sure we are in training mode\n"
MICRO_END = "                    append_to_dict(metrics, micro_batch_metrics)\n"
LOGPROB_END = "            if calculate_entropy:\n                entropy_lst.append(entropy)\n"


def header(recipe, s):
    args = ", ".join(f"{k}={v!r}" for k, v in s.items())
    return (f"import patchkit.runtime as _patchkit_runtime  # patchkit:{recipe}\n"
            f"_patchkit_runtime.configure({recipe!r}, {args})  # patchkit:{recipe}\n")


def patched_sample(tmp_path, edits):
    root = tmp_path / "site"
    shutil.copytree(SAMPLE, root)
    path = root / "verl" / "workers" / "actor" / "dp_actor.py"
    text = path.read_text()
    for anchor, new in edits:
        assert text.count(anchor) == 1, anchor
        text = text.replace(anchor, new)
    path.write_text(text)
    return root


@pytest.fixture
def run_sample(monkeypatch):
    def run(root, updates=4):
        from patchkit.demo import train

        monkeypatch.syspath_prepend(str(root))
        for name in [m for m in sys.modules if m == "verl" or m.startswith("verl.")]:
            monkeypatch.delitem(sys.modules, name)
        assert train.main(["--updates", str(updates)]) == 0
        for name in [m for m in sys.modules if m == "verl" or m.startswith("verl.")]:
            del sys.modules[name]
    return run


def test_unpatched_sample_trains(tmp_path, run_sample, capsys):
    run_sample(patched_sample(tmp_path, []), updates=2)
    out = capsys.readouterr().out
    assert "demo: 2 updates x 2 mini-batches x 2 micro-batches" in out


def test_verl_update_micro_steps_write_one_trace_with_three_steps(tmp_path, run_sample, capsys):
    save = tmp_path / "out"
    s = settings(save, wait=1, warmup=1, active=3, repeat=1, contents=("npu", "cpu"), level="level1", analysis=True)
    rid = "verl-fsdp-update"
    root = patched_sample(tmp_path, [
        (HEADER_ANCHOR, HEADER_ANCHOR + header(rid, s)),
        (UPDATE_START, f'        _patchkit_runtime.start("{rid}")  # patchkit:{rid}\n' + UPDATE_START),
        (MICRO_END, MICRO_END + f'                    _patchkit_runtime.step("{rid}")  # patchkit:{rid}\n'),
    ])
    run_sample(root, updates=4)  # 4 updates x 2 mini-batches x 2 micro-batches = 16 step points
    traces = trace_files(save)
    # the trace, and the folder of patchkit's capture manifests (patchkit.core.manifest)
    assert len(traces) == 1 and sorted(os.listdir(save)) == sorted([os.path.basename(traces[0]), "patchkit-manifests"])
    assert profiler_steps(traces[0]) == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    with open(traces[0]) as f:
        names = {e.get("name") for e in json.load(f)["traceEvents"]}
    assert "aten::mm" in names or "aten::addmm" in names  # the real work is in it
    err = lines(capsys)
    assert err[0].startswith(f"[patchkit] {rid}: recording steps 2-4")
    assert err[1].startswith(f"[patchkit] {rid}: window closed after step 4") and traces[0] in err[1]
    assert len(err) == 2


def test_verl_logprob_role_ref_steps_only_for_the_reference_model(tmp_path, run_sample, capsys):
    rid = "verl-fsdp-logprob"
    s = settings(tmp_path / "out", wait=0, warmup=0, active=50, repeat=1)
    root = patched_sample(tmp_path, [
        (HEADER_ANCHOR, HEADER_ANCHOR + header(rid, s)),
        (LOGPROB_END, LOGPROB_END + f'            if self.actor_optimizer is None: '
                                    f'_patchkit_runtime.step("{rid}/ref")  # patchkit:{rid}\n'),
    ])
    run_sample(root, updates=4)
    (rep,) = runtime.report()
    # 4 updates x 2 micro-batches of the reference model: the start plus 7 steps (the actor's 8 do not count)
    assert rep["key"] == f"{rid}/ref" and rep["state"] == "running" and rep["step"] == 7
    runtime._at_exit()  # what process exit does: flush the open window
    traces = trace_files(tmp_path / "out")
    assert len(traces) == 1 and "_ref." in os.path.basename(traces[0])
    assert profiler_steps(traces[0]) == [f"ProfilerStep#{i}" for i in range(8)]
    assert any("at process exit" in ln for ln in lines(capsys))


# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# never raising


def test_none_and_odd_keys_do_nothing(capsys):
    runtime.step(None)
    runtime.start(None)
    runtime.step(["not", "a", "key"])
    runtime.step(42)
    assert len(lines(capsys)) == 2


@pytest.mark.parametrize("where", ["probe", "create", "begin", "advance"])
def test_broken_backend_is_one_line_and_the_job_goes_on(where, monkeypatch, capsys):
    monkeypatch.setitem(backends._REGISTRY, "broken", Broken(where))
    runtime.configure("br", backend="broken", active=3)
    for _ in range(5):
        assert runtime.step("br") is None
    err = [ln for ln in lines(capsys) if "recording" not in ln]  # (the window opened before the failure)
    assert len(err) == 1 and err[0].startswith("[patchkit] br: ") and "the job runs on" in err[0]
    assert ("vendor_profiler" if where == "probe" else "device 7 is gone") in err[0]
    assert "br" in runtime._finished


@pytest.mark.parametrize("how", ["env", "call"])
def test_strict_mode_raises(how, monkeypatch, capsys):
    monkeypatch.setitem(backends._REGISTRY, "broken", Broken("create"))
    if how == "env":
        monkeypatch.setenv("PATCHKIT_STRICT", "1")
    else:
        runtime.set_strict(True)
    runtime.configure("br", backend="broken")
    with pytest.raises(RuntimeError, match="device 7 is gone"):
        runtime.step("br")


def test_strict_mode_raises_from_a_step_inside_the_window(monkeypatch, capsys):
    monkeypatch.setitem(backends._REGISTRY, "broken", Broken("advance"))
    runtime.set_strict(True)
    runtime.configure("br", backend="broken", active=3)
    runtime.step("br")  # step 0: the window opens; steps 1 and 2 are no schedule event
    with pytest.raises(RuntimeError, match="device 7 is gone"):
        runtime.step("br")
    assert "br" in runtime._finished and runtime.report()[0]["error"].startswith("the profiler failed at step 1")
    runtime.step("br")  # finished: nothing runs, nothing raises


def test_failing_trace_handler_releases_the_profiler(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    runtime.configure("fh", **settings(blocker / "traces", active=2))
    for _ in range(4):
        runtime.step("fh")
    err = [ln.replace(str(blocker), "BLOCKER") for ln in lines(capsys)]
    assert len(err) == 4 and "manifest was not written" in err[1]  # its folder cannot be made either
    assert err[2] == "[patchkit] fh: window closed after step 1 (steps 0-1 recorded); trace: none"
    assert err[3].startswith("[patchkit] fh: capture failed: BLOCKER/traces/") and "was not written whole: " \
        "NotADirectoryError: [Errno 20] Not a directory: 'BLOCKER/traces'; the job runs on" in err[3]
    [report] = runtime.report()
    assert report["state"] == "finished" and report["error"] is None and report["traces"] == []
    assert len(report["failed"]) == 1 and not torch.autograd.profiler._is_profiler_enabled
    runtime.configure("next", **settings(tmp_path / "next"))
    runtime.step("next")
    runtime.step("next")
    assert len(trace_files(tmp_path / "next")) == 1  # the process can profile again


# on_exit


def test_on_exit_each_call_is_a_step_and_the_first_starts(tmp_path):
    runtime.configure("oe", **settings(tmp_path / "oe", wait=1, active=2))

    class Runner:
        is_draft_worker = False

        @runtime.on_exit("oe", lambda self, *args, **kwargs: not self.is_draft_worker)
        def forward(self, x):
            if x < 0:
                raise ValueError("negative")
            return torch.ones(2) * x

    r, draft = Runner(), Runner()
    draft.is_draft_worker = True
    assert float(draft.forward(1)[0]) == 1.0  # guard false: no start, no step
    assert runtime.report() == []
    assert float(r.forward(2)[0]) == 2.0  # start (step 0) then step -> 1
    with pytest.raises(ValueError):
        r.forward(-1)  # an exception still steps -> 2
    r.forward(3)  # -> 3: schedule over
    assert runtime.report()[0]["state"] == "finished"
    (trace,) = trace_files(tmp_path / "oe")
    assert profiler_steps(trace) == ["ProfilerStep#1", "ProfilerStep#2"]
    assert Runner.forward.__name__ == "forward"


def test_on_exit_key_callable_and_failing_guard(tmp_path, capsys):
    runtime.configure("ok", **settings(tmp_path / "ok", active=5))
    calls = []

    class Actor:
        def __init__(self, optimizer):
            self.actor_optimizer = optimizer

        @runtime.on_exit(lambda self, data: "ok/ref" if self.actor_optimizer is None else None)
        def compute_log_prob(self, data):
            calls.append(data)
            return data

        @runtime.on_exit("ok", lambda self: self.missing_attribute)
        def other(self):
            return "still works"

    Actor(object()).compute_log_prob(1)
    assert runtime.report() == []
    Actor(None).compute_log_prob(2)
    Actor(None).compute_log_prob(3)
    assert runtime.report()[0]["key"] == "ok/ref" and runtime.report()[0]["step"] == 2
    assert calls == [1, 2, 3]
    assert Actor(None).other() == "still works" and Actor(None).other() == "still works"
    err = lines(capsys)
    assert len([ln for ln in err if "the guard at " in ln and "raised AttributeError" in ln]) == 1


# guards as the inserted lines pass them


def test_a_guard_is_called_while_the_key_can_record_and_one_that_raises_is_false(tmp_path, capsys):
    runtime.configure("g", **settings(tmp_path / "g", active=2))
    asked = []

    def guard():
        asked.append(1)
        return True

    for _ in range(3):
        runtime.start("g", lambda: 1 / 0)  # raising: false, nothing starts
        runtime.refuse("g", "never", lambda: None.profile)  # raising: not refused
    assert runtime.report() == []
    runtime.step("g", lambda: False)
    assert runtime.report() == []
    for _ in range(3):
        runtime.step("g", guard)  # opens step 0, records 0 and 1, the schedule is over at 2
    assert runtime.report()[0]["state"] == "finished" and len(asked) == 3
    runtime.step("g", guard)
    runtime.start("g", guard)
    assert len(asked) == 3  # a finished key never calls its guard: one set lookup
    said = [ln for ln in lines(capsys) if "the guard at " in ln]
    assert len(said) == 2 and "ZeroDivisionError" in said[0] and "AttributeError" in said[1]
    (trace,) = trace_files(tmp_path / "g")
    assert profiler_steps(trace) == ["ProfilerStep#0", "ProfilerStep#1"]


def test_a_role_chosen_as_the_line_runs_and_a_guard_on_it(tmp_path, capsys):
    runtime.configure("r", **settings(tmp_path / "r", active=1))
    optimizer = None
    runtime.step(lambda: "r/actor" if (optimizer.lr > 0) else None)  # raises: not this time
    runtime.step(lambda: "r/ref" if (optimizer is None) else None, lambda: False)
    assert runtime.report() == []
    runtime.start(lambda: "r/ref" if (optimizer is None) else None, lambda: True)
    runtime.step(lambda: "r/ref" if (optimizer is None) else None)
    assert [(r["key"], r["state"]) for r in runtime.report()] == [("r/ref", "finished")]
    said = [ln for ln in lines(capsys) if "choosing the role at " in ln]
    assert len(said) == 1 and "AttributeError" in said[0]


def test_require_refuses_lines_newer_than_this_runtime():
    runtime.require(runtime.LINES)
    runtime.require(1)
    with pytest.raises(ImportError, match="serves up to"):
        runtime.require(runtime.LINES + 1)
