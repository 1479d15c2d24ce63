"""Ranges and marks for real: a patched module on torch's profiler records its labelled spans in the window only,
closes a range an exception left open, and never raises into the job; the npu backend runs mstx on the stand-in."""

from __future__ import annotations

import json
import textwrap

import pytest

from patchkit import runtime
from patchkit.engine.codemod import transform
from patchkit.core.model import Applied
from patchkit.recipe.load import parse_recipe
from runtime_helpers import lines, no_profiler_left_running, trace_files, on_stand_in  # noqa: F401  (a fixture)


SOURCE = textwrap.dedent("""\
    import torch


    class Trainer:
        def fit(self, batches):
            for batch in batches:
                out = self.forward(batch)
                self.optimizer_step(out)

        def forward(self, batch):
            if batch == 3:
                raise ValueError("a bad batch")
            return torch.tanh(torch.ones(8, 8) @ torch.ones(8, 8))

        def optimizer_step(self, out):
            return out.sum()
    """)


def _recipe(save_path, backend="torch", **profiler):
    data = {"id": "rng", "description": "ranges", "target": {"package": "pkg", "files": ["pkg/m.py"]},
            "backend": backend, "profiler": {"save_path": str(save_path), **profiler},
            "schedule": {"wait": 1, "active": 2},
            "points": [
                {"class": "Trainer", "method": "fit", "at": "loop_end", "loop": {"iter": "batches"}},
                {"class": "Trainer", "method": "fit", "at": "around_call", "call": "self.forward", "action": "range",
                 "name": "forward"},
                {"class": "Trainer", "method": "optimizer_step", "at": "method", "action": "range", "name": "optim"},
                {"class": "Trainer", "method": "fit", "at": "loop_start", "loop": {"iter": "batches"},
                 "action": "mark", "name": "batch"}]}
    return parse_recipe(data, {}, "<test>")


def _patched(tmp_path, settings):
    result = transform(SOURCE, settings, settings.active_points())
    assert isinstance(result, Applied)
    assert all("patchkit" in line for line in result.text.splitlines() if line not in SOURCE.splitlines())
    namespace = {"__name__": "patched_trainer"}
    exec(compile(result.text, str(tmp_path / "m.py"), "exec"), namespace)
    return namespace["Trainer"]


def _spans(trace):
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    return [(e["name"], e.get("ph")) for e in events if e.get("name") in ("forward", "optim", "batch")]


def test_ranges_and_marks_are_recorded_in_the_window_only(tmp_path, no_profiler_left_running, capsys):
    trainer = _patched(tmp_path, _recipe(tmp_path / "out"))()
    trainer.fit([0, 1, 2, 4, 5])  # a step at the end of each pass: steps 0..4; the window records steps 1 and 2
    (trace,) = trace_files(tmp_path / "out")
    names = [n for n, _ in _spans(trace)]
    # the window opens with step 1 (the end of pass 2) and closes with step 3 (the end of pass 4): passes 3 and 4
    assert names.count("forward") == 2 and names.count("optim") == 2 and names.count("batch") == 2
    assert not [ln for ln in lines(capsys) if "failed" in ln]


def test_a_range_an_exception_left_open_is_closed_and_the_job_goes_on(tmp_path, no_profiler_left_running):
    settings = _recipe(tmp_path / "out")
    trainer = _patched(tmp_path, settings)()
    runtime.start("rng")
    runtime.step("rng")  # the window is open now (wait 1)
    with pytest.raises(ValueError, match="a bad batch"):
        trainer.fit([3])  # forward raises: range_end never runs
    cap = runtime._captures["rng"]
    assert [e[0] for e in cap.ranges] == ["forward"]
    trainer.fit([1])  # the next range_start of the name closes it first
    runtime.step("rng")  # the window closes
    (trace,) = trace_files(tmp_path / "out")
    assert [n for n, _ in _spans(trace)].count("forward") == 2
    assert runtime.report()[0]["state"] == "finished"


def test_range_and_mark_guards_that_raise_are_false_once_per_point(tmp_path, no_profiler_left_running, capsys):
    settings = _recipe(tmp_path / "out")
    guarded = [p._replace(guard="self.config.trace_ranges") if p.action in ("range", "mark") else p
               for p in settings.recipe.points]
    settings = settings._replace(recipe=settings.recipe._replace(points=tuple(guarded)))
    trainer = _patched(tmp_path, settings)()
    trainer.fit([0, 1, 2, 4, 5])  # the job goes on; the window records its steps, without the guarded spans
    (trace,) = trace_files(tmp_path / "out")
    assert _spans(trace) == []
    said = [ln for ln in lines(capsys) if "the guard at " in ln]
    assert len(said) == 3 and all("AttributeError" in ln and "read as false" in ln for ln in said), said
    assert len({ln.split(" raised ")[0] for ln in said}) == 3  # one per point, each naming its own line


def test_outside_a_window_and_with_a_broken_backend_nothing_is_raised(tmp_path, no_profiler_left_running, capsys):
    runtime.range_start("nobody", "x")
    runtime.range_end("nobody", "x")
    runtime.mark(None, "x")
    assert runtime.ranged("nobody", "x")(lambda v: v + 1)(1) == 2
    assert lines(capsys) == []


NPU_SCRIPT = r'''
import json, sys
import patchkit.runtime as rt

rt.configure("k", backend="npu", level="level_none", contents=("npu",), export_type="text", analysis=False,
             save_path=sys.argv[1], ranks="all", mstx=True, wait=1, active=1)
rt.start("k")
rt.mark("k", "before the window")
rt.step("k")
rt.range_start("k", "decode")
rt.mark("k", "sampled")
rt.range_end("k", "decode")
rt.step("k")
import torch_npu
rec = torch_npu._double.recorder
print("PATCHKIT-RESULT " + json.dumps({"mstx": [(m.kind, m.message) for m in rec.mstx], "report": rt.report(),
                                       "errors": [list(e) for e in rec.errors], "strict": rec.strict_violations}))
'''


def test_the_npu_backend_emits_mstx_ranges_and_marks_on_the_stand_in(tmp_path):
    result = on_stand_in(NPU_SCRIPT, tmp_path)
    assert result["errors"] == [] and result["strict"] == []
    labelled = [tuple(m) for m in result["mstx"] if m[1] in ("decode", "sampled", "before the window")]
    assert labelled == [("range_start", "decode"), ("mark", "sampled")]
