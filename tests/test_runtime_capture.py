"""One capture's schedule and window state machine (patchkit.runtime.capture), with torch on CPU."""

from __future__ import annotations

import contextlib
import io
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")

from patchkit.runtime import backends  # noqa: E402
from patchkit import runtime  # noqa: E402
from patchkit.runtime.capture import Capture  # noqa: E402
from runtime_helpers import (SCHEDULES, Recorder, lines, profiler_steps, settings, torch_actions,  # noqa: E402
                             trace_files)
from runtime_helpers import no_profiler_left_running, recorder  # noqa: E402,F401  (fixtures)



@pytest.fixture(scope="module")
def unused(tmp_path_factory):
    """A save path nothing is written to but the capture manifests: pytest's, never the working directory."""
    return str(tmp_path_factory.mktemp("unused"))


pytestmark = pytest.mark.usefixtures("no_profiler_left_running")


# ---------------------------------------------------------------------------
# the schedule is torch.profiler.schedule's


def test_schedule_actions_equal_torch_profiler_schedule():
    assert [a.value for a in (torch.profiler.ProfilerAction.NONE, torch.profiler.ProfilerAction.WARMUP,
                              torch.profiler.ProfilerAction.RECORD,
                              torch.profiler.ProfilerAction.RECORD_AND_SAVE)] == [0, 1, 2, 3]
    for sched in SCHEDULES:
        mine = [runtime.schedule_action(i, **sched) for i in range(60)]
        assert mine == torch_actions(60, **sched), sched
        end = backends.schedule_end(**sched)
        if sched["repeat"]:
            assert mine[end - 1] == 3 and set(mine[end:]) == {0}, sched
        else:
            assert end is None


hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies


@hypothesis.settings(max_examples=150, deadline=None)
@hypothesis.given(wait=st.integers(0, 30), warmup=st.integers(0, 10), active=st.integers(1, 30),
                  repeat=st.integers(0, 4), skip_first=st.integers(0, 40), step=st.integers(0, 400))
def test_schedule_action_equals_torch_at_any_step(wait, warmup, active, repeat, skip_first, step):
    sched = dict(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = int(torch.profiler.schedule(**sched)(step).value)
    assert runtime.schedule_action(step, **sched) == expected
    end = backends.schedule_end(**sched)
    assert end is None or step < end or expected == 0


PER_STEP = ("step_enter", "step_exit")


@pytest.mark.parametrize("per_step", [True, False], ids=["per-step-sections", "advance-only"])
@pytest.mark.parametrize("sched", SCHEDULES[::3])
def test_runtime_drives_the_schedule(recorder, sched, per_step, capsys, unused):
    """Windows open at each cycle's first recorded step and close after its last; then the key is finished."""
    if not per_step:
        recorder.sections = tuple(s for s in backends.SECTIONS if s not in PER_STEP)
    runtime.configure("r", **settings(unused, backend="recorder", **sched))
    calls = 40
    for _ in range(calls):
        runtime.step("r")
    actions = torch_actions(calls + 1, **sched)
    end = backends.schedule_end(**sched)
    last = calls - 1 if end is None else min(calls - 1, end)
    opened = [i for i in range(last + 1) if actions[i] in (2, 3) and (i == 0 or actions[i - 1] in (0, 1, 3))
              and (end is None or i < end)]
    closed = [i for i in range(last) if actions[i] == 3]  # closed at the step after, named by its last step
    log = recorder.log
    assert [s for name, s in log if name == "window_open"] == opened
    assert [s for name, s in log if name == "window_close"] == closed
    assert [s for name, s in log if name == "advance"] == list(range(1, last + 1))
    recorded = [i for i in range(last + 1) if actions[i] in (2, 3) and (end is None or i < end)]
    assert [s for name, s in log if name == "step_enter"] == (recorded if per_step else [])
    assert [s for name, s in log if name == "step_exit"] == ([i for i in recorded if i < last] if per_step else [])
    ends = [s for name, s in log if name == "end"]
    if end is not None and end <= calls - 1:
        assert ends == [end] and runtime.report()[0]["state"] == "finished"
        assert "r" in runtime._finished
    else:
        assert ends == [] and runtime.report()[0]["state"] == "running"
    assert len([ln for ln in lines(capsys) if "recording" in ln]) == len(opened)


@pytest.mark.parametrize("sched, windows", [
    (dict(wait=1, warmup=1, active=3, repeat=1), [[2, 3, 4]]),
    (dict(wait=0, warmup=0, active=1, repeat=1), [[0]]),
    (dict(wait=1, warmup=0, active=2, repeat=2, skip_first=2), [[3, 4], [6, 7]]),
])
def test_torch_traces_hold_exactly_the_scheduled_steps(tmp_path, sched, windows):
    runtime.configure("t", **settings(tmp_path / "t", **sched))
    x = torch.randn(8, 8)
    for _ in range(20):
        x = torch.tanh(x @ x)
        runtime.step("t")
    traces = trace_files(tmp_path / "t")
    assert len(traces) == len(windows)
    assert [profiler_steps(t) for t in traces] == [[f"ProfilerStep#{i}" for i in w] for w in windows]
    rep = runtime.report()[0]
    assert rep["state"] == "finished" and rep["traces"] == traces
    assert rep["recorded"] == [(w[0], w[-1]) for w in windows]


def test_repeat_zero_warns_once_and_records_every_cycle(tmp_path, capsys):
    runtime.configure("rz", **settings(tmp_path / "rz", wait=1, active=1, repeat=0))
    for _ in range(6):
        runtime.step("rz")
    err = lines(capsys)
    assert len([ln for ln in err if "grows without bound" in ln]) == 1
    assert [profiler_steps(t) for t in trace_files(tmp_path / "rz")] == [["ProfilerStep#1"], ["ProfilerStep#3"]]
    assert runtime.report()[0]["state"] == "running"  # the window of step 5 is open
    runtime._at_exit()
    assert [profiler_steps(t) for t in trace_files(tmp_path / "rz")][-1] == ["ProfilerStep#5"]



# ---------------------------------------------------------------------------
# the steps between schedule events


def events(n, wait, warmup, active, repeat, skip_first):
    """Steps 1..n-1 at which the full path does something: a window closes or opens, or the schedule ends."""
    act = [runtime.schedule_action(i, wait, warmup, active, repeat, skip_first) for i in range(n)]
    end = backends.schedule_end(wait, warmup, active, repeat, skip_first)
    return {i for i in range(1, n) if act[i - 1] == 3 or (act[i] in (2, 3) and act[i - 1] in (0, 1, 3)) or i == end}


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(wait=st.integers(0, 6), warmup=st.integers(0, 4), active=st.integers(1, 6),
                  repeat=st.integers(0, 3), skip_first=st.integers(0, 8), n=st.integers(0, 80))
def test_no_schedule_event_falls_between_two_events(wait, warmup, active, repeat, skip_first, n, unused):
    sched = (wait, warmup, active, repeat, skip_first)
    cap = Capture("k", dict(settings(unused), wait=wait, warmup=warmup, active=active, repeat=repeat,
                            skip_first=skip_first), 0)
    nxt = cap._next_event(n)
    assert nxt > n
    assert not {i for i in events(nxt + 1, *sched) if n < i < nxt}, (n, nxt)


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(wait=st.integers(0, 4), warmup=st.integers(0, 3), active=st.integers(1, 5),
                  repeat=st.integers(0, 3), skip_first=st.integers(0, 6), calls=st.integers(1, 40),
                  per_step=st.booleans())
def test_quick_steps_run_exactly_what_the_full_path_runs(wait, warmup, active, repeat, skip_first, calls, per_step,
                                                         unused):
    """The same calls with every step forced down the full path give the same code runs, messages and report."""
    sched = dict(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)

    def run(quick):
        runtime.reset()
        rec = Recorder()
        if not per_step:
            rec.sections = tuple(s for s in backends.SECTIONS if s not in PER_STEP)
        with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stderr(io.StringIO()) as err:
            mp.setitem(sys.modules, "_pk_recorder_log", rec)
            mp.setitem(backends._REGISTRY, "recorder", rec)
            if not quick:
                mp.setattr(Capture, "quick_step", lambda self: False)
            runtime.configure("q", **settings(unused, backend="recorder", **sched))
            for _ in range(calls):
                runtime.step("q")
            runtime._at_exit()
            out = (rec.log, err.getvalue(), runtime.report())
        runtime.reset()
        return out

    assert run(quick=True) == run(quick=False)


def test_steps_inside_a_long_window_do_no_schedule_arithmetic(recorder, monkeypatch, capsys, unused):
    """Opening a window of 10**5 steps and stepping in it costs a handful of schedule look-ups, not one a step."""
    recorder.sections = ("advance", "window_open", "window_close", "end")
    looked_up = []
    real = backends.schedule_action

    def counted(*args):
        looked_up.append(args[0])
        return real(*args)

    monkeypatch.setattr(backends, "schedule_action", counted)
    runtime.configure("long", **settings(unused, backend="recorder", wait=1, active=10**5))
    for _ in range(1001):
        runtime.step("long")
    assert [s for name, s in recorder.log if name == "advance"] == list(range(1, 1001))
    assert [s for name, s in recorder.log if name == "window_open"] == [1]
    assert len(looked_up) <= 4, looked_up
    assert lines(capsys) == ["[patchkit] long: recording steps 1-100000 (rank 0, recorder) -> the recorder report"]
    assert runtime.report()[0]["step"] == 1000


# ---------------------------------------------------------------------------
# a window whose trace was not written whole (a full disk, a quota, a killed writer) is a failed capture

LEAKY = """
import os
def put(name, text):
    with open(os.path.join(SAVE, 'h_' + str(os.getpid()) + name), 'w') as f:
        f.write(text)
put('.1.pt.trace.json.tmp', '{"traceEvents": [')  # a writer that stopped, before its rename
put('.2.pt.trace.json', '{"traceEvents": [{"ph": "X", "name": "aten::mm"')  # one that renamed what it wrote
put('.3.pt.trace.json', '{"traceEvents": [{"ph": "X", "name": "aten::mm"}]}')
"""


class Leaky(Recorder):
    """A backend whose profiler writes without checking, as profilers do: what it leaves when the disk fills."""

    def plan(self, s, features, key):
        return backends.Plan(sections={"window_close": LEAKY.replace("SAVE", repr(s["save_path"]))},
                             trace_dir=s["save_path"])


def test_traces_a_profiler_left_unfinished_make_the_capture_failed(tmp_path, monkeypatch, capsys):
    import json
    import os

    from capturing import cli

    monkeypatch.setitem(backends._REGISTRY, "leaky", Leaky())
    runtime.configure("lk", **settings(tmp_path, backend="leaky"))
    for _ in range(3):
        runtime.step("lk")
    tag = f"h_{os.getpid()}"
    stopped, cut, whole = (str(tmp_path / f"{tag}.{n}.pt.trace.json") for n in (1, 2, 3))
    [report] = runtime.report()
    assert report["traces"] == [whole] and report["error"] is None
    reasons = dict(report["failed"])
    assert reasons == {stopped: f"its writer left {tag}.1.pt.trace.json.tmp unfinished: the disk was full, a quota "
                                "or file size limit was hit, or the writer was killed",
                       cut: "ends after 47 bytes inside an object opened at byte 17"}
    said = lines(capsys)
    assert said[-2].endswith(f"trace: {whole}") and said[-1].startswith("[patchkit] lk: capture failed: ")
    [m] = [json.loads(p.read_text()) for p in (tmp_path / "patchkit-manifests").iterdir()]
    entries = {e["name"]: e for e in m["traces"]}
    assert entries[f"{tag}.3.pt.trace.json"].get("error") is None
    assert entries[f"{tag}.1.pt.trace.json"]["size"] == 0 and entries[f"{tag}.2.pt.trace.json"]["size"] > 0
    assert all(entries[os.path.basename(p)]["error"] == why for p, why in reasons.items())
    assert sorted(m["error"].split("; ")) == sorted(f"{os.path.basename(p)}: {why}" for p, why in reasons.items())
    [cap] = json.loads(cli("traces", tmp_path, "--json", "--strict", code=1).stdout)["captures"]  # the .tmp is never a capture
    assert cap["broken"] and sorted(t["path"] for t in cap["traces"]) == [cut, whole]


def test_the_code_s_failed_traces_are_handed_over_once():
    prog = backends.Program("x", "k", backends.normalize({}), backends.Plan(sections={}), {}, False)
    assert prog.failed_traces() == []
    prog.namespace["failed_traces"] = [("/o/t.json", "OSError: no room"), "/o/u.json"]
    assert prog.failed_traces() == [("/o/t.json", "OSError: no room"), ("/o/u.json", "failed")]
    assert prog.failed_traces() == [] and prog.namespace["failed_traces"] == []
    prog.namespace["failed_traces"] = "not a list"
    assert prog.failed_traces() == []
