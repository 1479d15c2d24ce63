"""runtime/backends/nsys.py: one nsys capture range per window, NVTX ranges per step, and the launch line."""

from __future__ import annotations

import json

from patchkit.runtime.backends.nsys import Nsys, options
from patchkit.runtime.settings import DEFAULTS


def settings(**kw):
    return {**DEFAULTS, "backend": "nsys", **kw}


def test_the_capture_range_ends_as_the_schedule_repeats():
    assert options(settings(repeat=1))["capture-range-end"] == "stop"
    assert options(settings(repeat=0))["capture-range-end"] == "repeat"
    assert options(settings(repeat=3))["capture-range-end"] == "repeat:3"
    assert options(settings())["capture-range"] == "cudaProfilerApi" and options(settings())["trace"] == "cuda,nvtx"


def test_the_plan_brackets_each_window_and_names_each_step_by_its_key():
    plan = Nsys().plan(settings(repeat=2), {}, "verl-fsdp-update")
    assert plan.sections["window_open"] == "torch.cuda.profiler.start()\n"
    assert plan.sections["window_close"].endswith("torch.cuda.profiler.stop()\n")
    assert plan.sections["step_enter"] == "torch.cuda.nvtx.range_push('verl-fsdp-update' + '#' + str(step))\n"
    assert plan.trace_dir is None and "--capture-range-end=repeat:2" in plan.notes[0]
    assert "--trace=" not in plan.notes[0]  # the note names the options that make the windows; trace is the launch's


def test_the_launch_lines_give_the_same_options_to_nsys_and_to_ray():
    lines = Nsys().launch(settings(repeat=0))
    assert lines[0].startswith("nsys profile --trace=cuda,nvtx --capture-range=cudaProfilerApi --capture-range-end=repeat")
    ray = next(line for line in lines if "ray job submit" in line)
    assert json.loads(ray.split("'")[1]) == {"nsight": options(settings(repeat=0))}
