"""The jobs ``patchkit attach --auto`` is tested on (tests/autojobs.py), run without patchkit: each runs its steps,
the same numbers twice, stops when asked, says nothing on stderr, and does a step's worth of work in each step; and
:func:`autojobs.labels_per_span` counts what a real trace holds in each step.

A step's work is asserted as floating-point operations (torch's FlopCounterMode, inside the job): a count does not
depend on how busy the machine is, where a step's time does (tests/test_layers.py forbids asserting that).  Each job
is sized for 40 to 120 ms a step on one core of a CPU doing about 90 GFLOP/s in float32; the step times measured
are printed (``pytest -s``), not asserted.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
import torch

import autojobs
from test_backends_stderr import KINETO

STEPS = 6  # steps each run logs at least before it is asked to stop
# What each ProfilerStep#N span of a job's own --profile trace (steps 2 to 4) holds: the job's labels where it owns
# the loop's code, torch's optimizer step where a framework's loop runs it.
WANT = {"nested": {"job-forward": 2, "job-backward": 2, "job-optimizer": 1, "Optimizer.step": 1},
        "engine": {"job-forward": 1},
        "hf": {"Optimizer.step": 1},
        "lightning": {"job-forward": 2, "Optimizer.step": 1}}
FLOPS_PER_STEP = (2e9, 1e10)  # about 25 to 110 ms at 90 GFLOP/s; each job's framework adds its own time


@pytest.mark.parametrize("kind", sorted(autojobs.SCRIPTS))
def test_a_job_computes_the_same_twice_quietly_with_a_step_s_worth_of_work_in_each_step(kind, tmp_path):
    plain = autojobs.start(kind, tmp_path, name="plain")
    plain.wait_steps(STEPS)
    final, err = plain.finish()  # stopped by its stop file
    assert err == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.log", "plain.stop"]  # nothing saved, no logs
    assert final["steps"] == len(final["losses"]) == len(plain.steps()) >= STEPS
    assert [ln["step"] for ln in plain.steps()] == list(range(final["steps"]))
    value = "out" if kind == "engine" else "loss"
    assert [ln[value] for ln in plain.steps()] == final["losses"]
    step_ms = statistics.median(plain.step_seconds()) * 1000
    print(f"\n{kind}: median step {step_ms:.0f} ms over {final['steps'] - 1} steps")

    traces = tmp_path / "traces"
    counted = autojobs.start(kind, tmp_path, name="counted", args=["--count-flops", "--profile", str(traces)])
    counted.wait_steps(STEPS)
    again, err = counted.finish()
    assert [ln for ln in err.splitlines() if not KINETO.match(ln)] == []  # torch's profiler says when it starts
    same = min(final["steps"], again["steps"])
    assert final["losses"][:same] == again["losses"][:same]  # bit for bit, counted and recorded or not
    flops = [ln["flops"] for ln in counted.steps()]
    assert all(FLOPS_PER_STEP[0] <= f <= FLOPS_PER_STEP[1] for f in flops), flops
    (trace,) = traces.glob("*.pt.trace.json")
    assert autojobs.labels_per_span(trace) == [(n, WANT[kind]) for n in (2, 3, 4)]


@pytest.mark.parametrize("kind", ["nested", "engine"])
def test_a_job_stops_after_its_steps_and_ends_with_its_last_line(kind, tmp_path):
    job = autojobs.start(kind, tmp_path, steps=3)
    final, err = job.finish(stop=False)
    assert (job.proc.returncode, err) == (0, "")
    assert final["final"] and final["steps"] == 3 and len(job.steps()) == 3
    assert json.loads(job.log.read_text().splitlines()[-1]) == final
    if kind == "engine":
        assert final["outs"] == final["losses"] == [ln["out"] for ln in job.steps()]


def test_labels_per_span_counts_what_each_step_of_the_nested_trainer_holds(tmp_path):
    """The nested job's own code, run here under the torch profiler with one ``prof.step()`` per mini-batch: three
    recorded steps, each with two micro-batches' forward and backward and one optimizer step."""
    import auto_nested_job as job

    threads = torch.get_num_threads()
    trace = tmp_path / "nested.pt.trace.json"
    try:
        model, optimizer, loader = job.build(seed=0, accum=2)
        losses = []
        schedule = torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule,
                                    on_trace_ready=lambda p: p.export_chrome_trace(str(trace))) as prof:
            def on_step(loss):
                losses.append(loss)
                prof.step()
                return len(losses) < 6

            job.train(model, optimizer, loader, epochs=2, accum=2, on_step=on_step)
    finally:
        torch.set_num_threads(threads)
    assert len(losses) == 6
    assert autojobs.labels_per_span(trace) == [(n, WANT["nested"]) for n in (2, 3, 4)]


def test_labels_per_span_counts_only_what_lies_wholly_inside_a_span(tmp_path):
    def x(name, ts, dur):
        return {"ph": "X", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1}

    events = [x("ProfilerStep#8", 100.0, 50.0), x("ProfilerStep#7", 0.0, 100.0),
              x("job-forward", 10.0, 20.0), x("job-forward", 40.0, 20.0), x("job-backward", 95.0, 10.0),  # across
              x("Optimizer.step#AdamW.step", 60.0, 30.0), x("Optimizer.zero_grad#AdamW.zero_grad", 90.0, 1.0),
              x("job-optimizer", 110.0, 40.0), x("job-forward", 160.0, 5.0),  # after every span
              {"ph": "i", "name": "job-forward", "ts": 120.0, "pid": 1, "tid": 1}, x("aten::mm", 12.0, 3.0)]
    trace = tmp_path / "t.pt.trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    assert autojobs.labels_per_span(trace) == [(7, {"job-forward": 2, "Optimizer.step": 1}),
                                               (8, {"job-optimizer": 1})]
    assert autojobs.labels_per_span(trace, prefix="aten::") == [(7, {"aten::mm": 1, "Optimizer.step": 1}), (8, {})]


def test_each_job_says_on_its_command_line_what_it_takes():
    """The options the tests and tests/autojobs.py pass are each job's; a job runs from any folder by its path."""
    import subprocess
    import sys

    for kind, script in autojobs.SCRIPTS.items():
        done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120,
                              cwd=Path(script).anchor)
        assert done.returncode == 0, done.stderr
        for option in ("--steps", "--journal", "--stop", "--seed", "--count-flops", "--profile"):
            assert option in done.stdout, (kind, option)
    assert "--accum" in subprocess.run([sys.executable, str(autojobs.SCRIPTS["nested"]), "--help"],
                                       capture_output=True, text=True, timeout=120).stdout


def test_frameworks_that_cannot_be_installed_are_a_real_wheel_error_that_says_why(tmp_path, monkeypatch):
    """A registry that cannot be reached: tests/frameworksenv.py raises what the suite's conftest skips on (and fails
    on in CI), with pip's own words; nothing is marked built."""
    import os

    import frameworksenv
    import realwheels

    monkeypatch.setattr(frameworksenv, "ROOT", tmp_path / "frameworks-env")
    for name in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no configured index or mirror
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens on the discard port
    monkeypatch.setenv("PIP_RETRIES", "0")
    with pytest.raises(realwheels.RealWheelError, match=r"(?s)could not install .*lightning"):
        frameworksenv.ensure()
    assert not frameworksenv.built()
