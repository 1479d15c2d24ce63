"""schedule.steps: exactly the listed steps are recorded, on torch for real and on the torch_npu stand-in; it does
not combine with the periodic keys, and a `steps=` override replaces a recipe's periodic schedule."""

from __future__ import annotations

import json
import os

import pytest

from patchkit.runtime import backends
from patchkit import runtime
from patchkit.core.errors import OverrideError, RecipeError
from patchkit.recipe.load import load, load_recipe
from runtime_helpers import no_profiler_left_running, profiler_steps, settings, trace_files, on_stand_in  # noqa: F401


def test_the_steps_are_windows_of_consecutive_steps():
    steps = (1, 2, 5)
    assert [backends.schedule_action(n, 0, 0, 1, 1, 0, steps) for n in range(7)] == [0, 2, 3, 0, 0, 3, 0]
    assert backends.runs([5, 1, 2, 2]) == [(1, 2), (5, 5)]
    assert backends.schedule_end(0, 0, 1, 1, 0, steps) == 6
    assert [backends.next_event(n, 0, 0, 1, 1, 0, steps) for n in range(7)] == [1, 3, 3, 5, 5, 6, 7]
    assert backends.window_last(1, 0, 0, 1, 1, 0, steps) == 2 and backends.window_last(5, 0, 0, 1, 1, 0, steps) == 5
    assert backends.windows({"steps": steps}) == [(1, 2), (5, 5)]


def test_torch_records_exactly_the_listed_steps(tmp_path, no_profiler_left_running):
    import torch

    runtime.configure("k", **settings(tmp_path, steps=(1, 2, 5)))
    runtime.start("k")
    work = torch.ones(16, 16)
    for _ in range(9):
        work = torch.tanh(work @ work)
        runtime.step("k")
    (report,) = runtime.report()
    assert report["state"] == "finished" and [tuple(w) for w in report["recorded"]] == [(1, 2), (5, 5)]
    traces = trace_files(tmp_path)
    assert [profiler_steps(t) for t in traces] == [["ProfilerStep#1", "ProfilerStep#2"], ["ProfilerStep#5"]]


NPU_SCRIPT = r'''
import json, os, sys
import torch
import patchkit.runtime as rt

rt.configure("k", backend="npu", level="level0", contents=("cpu", "npu"), export_type="text", analysis=True,
             save_path=sys.argv[1], ranks="all", mstx=False, steps=(0, 3, 4))
work = torch.ones(8, 8)
for _ in range(7):
    work = torch.tanh(work @ work)
    rt.step("k")
import torch_npu
rec = torch_npu._double.recorder
print("PATCHKIT-RESULT " + json.dumps({"report": rt.report(), "dirs": [d for p in rec.profiles for d in p.dirs],
                                       "errors": [list(e) for e in rec.errors], "strict": rec.strict_violations}))
'''


def test_the_npu_backend_records_exactly_the_listed_steps_on_the_stand_in(tmp_path):
    result = on_stand_in(NPU_SCRIPT, tmp_path, strict=False, with_torch=True)
    assert result["errors"] == [] and result["strict"] == []
    (report,) = result["report"]
    assert [tuple(w) for w in report["recorded"]] == [(0, 0), (3, 4)]
    steps = []
    for folder in result["dirs"]:
        with open(os.path.join(folder, "ASCEND_PROFILER_OUTPUT", "trace_view.json")) as f:
            data = json.load(f)
        events = data["traceEvents"] if isinstance(data, dict) else data
        steps.append(sorted({e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}))
    assert steps == [["ProfilerStep#0"], ["ProfilerStep#3", "ProfilerStep#4"]]


RECIPE = """\
id: r
description: steps
target: {package: pkg, files: [pkg/m.py]}
backend: torch
schedule: {steps: [5, 1, 2, 2]}
points:
  - {class: A, method: run, at: method_start}
"""


def test_a_recipe_lists_its_steps_sorted_once_each(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE)
    assert load_recipe(path).recipe.schedule.steps == (1, 2, 5)


@pytest.mark.parametrize("old,new,fragment,line", [
    ("{steps: [5, 1, 2, 2]}", "{steps: [1], active: 2}", "does not combine with schedule.active", 5),
    ("{steps: [5, 1, 2, 2]}", "{steps: [1, -2]}", "schedule.steps must be a list of step numbers", 5),
    ("{steps: [5, 1, 2, 2]}", "{steps: all}", "schedule.steps must be a list of step numbers", 5),
])
def test_bad_steps_in_a_recipe_name_their_line(tmp_path, old, new, fragment, line):
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE.replace(old, new))
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert fragment in info.value.message and info.value.where.line == line and info.value.hint


def test_steps_on_the_command_line_replace_a_recipe_s_periodic_schedule():
    s = load("sglang-forward", ["schedule.steps=[3, 4]"]).recipe.schedule  # the recipe has wait 1, warmup 1, active 3
    assert (s.steps, s.wait, s.warmup, s.active) == ((3, 4), 0, 0, 1)
    with pytest.raises(OverrideError) as info:
        load("sglang-forward", ["schedule.steps=[3]", "schedule.active=2"])
    assert "schedule.active=2" in info.value.message and "does not combine" in info.value.message
    with pytest.raises(OverrideError, match="schedule.steps must be a list"):
        load("sglang-forward", ["schedule.steps=x"])


def test_the_periodic_schedule_typed_on_the_command_line_keeps_the_recipe_s_own_keys():
    """steps=[] and trigger=schedule are what show prints for a periodic recipe: typed back, they change nothing."""
    recipe = load("sglang-forward").recipe.schedule
    for typed in (["schedule.steps=[]"], ["schedule.trigger=schedule"], ["schedule.steps=[]", "schedule.wait=4"]):
        s = load("sglang-forward", typed).recipe.schedule
        assert s == recipe._replace(wait=4 if "schedule.wait=4" in typed else recipe.wait), typed
    manual = load("sglang-forward", ["schedule.trigger=manual"]).recipe.schedule
    assert (manual.trigger, manual.wait, manual.active, manual.steps) == ("manual", 0, 1, ())


def test_the_runtime_refuses_steps_with_a_periodic_schedule():
    problems = backends.validate(settings("/tmp/x", steps=(1,), active=2))
    assert problems == ["schedule.steps picks the recorded steps itself; it does not combine with schedule.active"]
