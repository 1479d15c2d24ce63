"""patchkit.runtime with torch on CPU, for real: schedule, traces, ranks, one capture at a time, never raising."""

from __future__ import annotations

import glob
import itertools
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import types
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from patchkit import backends  # noqa: E402
from patchkit import runtime  # noqa: E402
from patchkit.demo import SAMPLE  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DOUBLES = REPO / "tests" / "doubles"


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


@pytest.fixture(autouse=True)
def no_profiler_left_running(clean_runtime):
    yield
    clean_runtime.reset()
    assert not torch.autograd.profiler._is_profiler_enabled, "a test left a torch profiler running"


# ---------------------------------------------------------------------------
# the schedule is torch.profiler.schedule's


def torch_actions(n, **sched):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn = torch.profiler.schedule(**sched)
    return [int(fn(i).value) for i in range(n)]


SCHEDULES = [dict(wait=w, warmup=u, active=a, repeat=r, skip_first=s)
             for w, u, a, r, s in itertools.product((0, 1, 3), (0, 1, 2), (1, 2, 3), (0, 1, 2), (0, 1, 4))]


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


class Recorder(types.ModuleType):
    """A backend whose code only notes what the runtime asks of it."""

    STATIC_FEATURES = {"version": None}

    def __init__(self):
        super().__init__("recorder_backend")
        self.log = []

    def probe(self):
        return {"version": "rec"}

    def plan(self, s, features, key):
        sections = {name: f"import _pk_recorder_log\n_pk_recorder_log.log.append(({name!r}, step))\n"
                    for name in backends.SECTIONS}
        return backends.Plan(sections=sections, trace_dir=None)


@pytest.fixture
def recorder(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # its windows' manifests go to the (relative) save path: not into the checkout
    rec = Recorder()
    monkeypatch.setitem(sys.modules, "_pk_recorder_log", rec)
    monkeypatch.setitem(backends._REGISTRY, "recorder", rec)
    return rec


@pytest.mark.parametrize("sched", SCHEDULES[::3])
def test_runtime_drives_the_schedule(recorder, sched, capsys):
    """Windows open at each cycle's first recorded step and close after its last; then the key is finished."""
    runtime.configure("r", **settings("unused", backend="recorder", **sched))
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
    assert [s for name, s in log if name == "step_enter"] == [i for i in range(last + 1) if actions[i] in (2, 3)
                                                             and (end is None or i < end)]
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
    # the trace, and the folder of patchkit's capture manifests (patchkit.manifest)
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
# never raising


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


def test_none_and_odd_keys_do_nothing(capsys):
    runtime.step(None)
    runtime.start(None)
    runtime.step(["not", "a", "key"])
    runtime.step(42)
    assert len(lines(capsys)) == 2


class Broken(types.ModuleType):
    STATIC_FEATURES = {"version": None}

    def __init__(self, where):
        super().__init__("broken_backend")
        self.where = where

    def probe(self):
        if self.where == "probe":
            raise ImportError("No module named 'vendor_profiler'")
        return {}

    def plan(self, s, features, key):
        sections = {"create": "x = 1\n", "begin": "pass\n", "advance": "pass\n", "end": "pass\n"}
        sections[self.where] = "raise RuntimeError('device 7 is gone')\n"
        return backends.Plan(sections=sections)


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


def test_failing_trace_handler_releases_the_profiler(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    runtime.configure("fh", **settings(blocker / "traces", active=2))
    for _ in range(4):
        runtime.step("fh")
    err = lines(capsys)
    assert len(err) == 2 and "the profiler failed at step 2" in err[1] and "Can't create directory" in err[1]
    assert not torch.autograd.profiler._is_profiler_enabled
    runtime.configure("next", **settings(tmp_path / "next"))
    runtime.step("next")
    runtime.step("next")
    assert len(trace_files(tmp_path / "next")) == 1  # the process can profile again


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


def test_configure_last_call_wins_until_the_capture_starts(tmp_path):
    runtime.configure("lw", **settings(tmp_path / "first"))
    runtime.configure("lw", **settings(tmp_path / "second"))
    runtime.step("lw")
    runtime.configure("lw", **settings(tmp_path / "third"))
    runtime.step("lw")
    assert len(trace_files(tmp_path / "second")) == 1
    assert not (tmp_path / "first").exists() and not (tmp_path / "third").exists()


# ---------------------------------------------------------------------------
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
    assert len([ln for ln in err if "the guard raised AttributeError" in ln]) == 1


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


def test_a_full_disk_while_the_trace_is_written_is_said_and_the_job_runs_on(tmp_path):
    """The operating system's file-size limit stands in for a full disk: the profiler writes without checking."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)          # write() fails with EFBIG instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))
        import torch
        import patchkit.runtime as rt
        rt.configure("full", backend="torch", level="level0", contents=("cpu",), export_type="text",
                     analysis=False, save_path={str(tmp_path / 'out')!r}, ranks="all", wait=0, warmup=0,
                     active=2, repeat=1, skip_first=0, mstx=False)
        x = torch.ones(64, 64)
        for _ in range(6):
            x = (x @ x).tanh()
            rt.step("full")
        print("job finished", float(x.sum()))
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "job finished 4096.0" in done.stdout
    said = [ln for ln in done.stderr.splitlines() if ln.startswith("[patchkit] full:")]
    assert any("ends in the middle of its data" in ln for ln in said), done.stderr
