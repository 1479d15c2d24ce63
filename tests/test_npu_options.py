"""The whole torch_npu option set under the users' names, passed to each torch_npu release the stand-in models only
where that release takes it (the installed signature decides, as for mstx), and refused when malformed."""

from __future__ import annotations


import pytest

from patchkit.runtime import backends
from patchkit.core.errors import RecipeError
from patchkit.recipe.load import load
from runtime_helpers import on_stand_in


SCRIPT = r'''
import json, sys
import patchkit.runtime as rt

rt.configure("k", backend="npu", level="level1", contents=("cpu", "npu", "flops"), export_type="db", analysis=False,
             save_path=sys.argv[1], ranks="all", mstx=False, aic_metrics="memory_access", l2_cache=True, op_attr=True,
             data_simplification=False, record_op_args=True, gc_detect_threshold=3, host_sys=("cpu", "mem"),
             sys_io=True, sys_interconnection=True)
rt.step("k")
rt.step("k")
import torch_npu
rec = torch_npu._double.recorder
(p,) = rec.profiles
print("PATCHKIT-RESULT " + json.dumps({"exp": p.experimental_config, "init": sorted(p.init_kwargs),
                                       "report": rt.report(), "errors": [list(e) for e in rec.errors],
                                       "warnings": [m for _, m in rec.warnings], "strict": rec.strict_violations},
                                      default=repr))
'''


def _run(tmp_path, version):
    return on_stand_in(SCRIPT, tmp_path, version)


def test_the_newest_torch_npu_gets_every_option(tmp_path):
    res = _run(tmp_path, "2.14.0")
    assert res["errors"] == [] and res["strict"] == []
    assert set(res["warnings"]) <= {"Profiler won't be using warmup, this can skew profiler results"}  # nothing reset
    exp = res["exp"]
    assert exp["_aic_metrics"] == "ACL_AICORE_MEMORY_ACCESS"
    assert (exp["_l2_cache"], exp["_op_attr"], exp["record_op_args"], exp["_data_simplification"]) == (  # sic
        True, True, True, False)
    assert exp["_gc_detect_threshold"] == 3
    assert sorted(str(h) for h in exp["_host_sys"]) == ["cpu", "mem"]
    assert (exp["_sys_io"], exp["_sys_interconnection"]) == (True, True)
    assert "with_flops" in res["init"]
    assert res["report"][0]["error"] is None


def test_an_older_torch_npu_gets_only_what_it_takes(tmp_path):
    res = _run(tmp_path, "2.5.1")  # before host_sys, sys_io and sys_interconnection
    assert res["errors"] == [] and res["strict"] == []
    exp = res["exp"]
    assert exp["_l2_cache"] is True and exp["_gc_detect_threshold"] == 3
    assert not any(k in exp for k in ("_host_sys", "_sys_io", "_sys_interconnection"))
    assert res["report"][0]["error"] is None


def test_show_says_what_an_older_torch_npu_leaves_out():
    features = dict(backends.get("npu").STATIC_FEATURES)
    features["experimental"] = features["experimental"] - {"host_sys", "sys_io"}
    features["host_sys_members"] = frozenset()
    settings = load("verl-fsdp-update", ["profiler.host_sys=[cpu]", "profiler.sys_io=true"]).runtime_settings()
    text = backends.render(settings, key="k", features=features)
    assert "this torch_npu has no HostSystem cpu; left out of host_sys" in text
    assert "this torch_npu has no sys_io=; left out" in text and "sys_io=True" not in text


@pytest.mark.parametrize("override,fragment", [
    ("profiler.aic_metrics=pipe", "profiler.aic_metrics must be one of"),
    ("profiler.host_sys=[gpu]", "profiler.host_sys entries must be one of"),
    ("profiler.gc_detect_threshold=-1", "must be a number of milliseconds"),
    ("profiler.l2_cache=maybe", "profiler.l2_cache must be true or false"),
])
def test_bad_option_values_are_refused_on_the_command_line(override, fragment):
    with pytest.raises(RecipeError) as info:
        load("verl-fsdp-update", [override])
    assert fragment in info.value.message and info.value.where.path == "<command line>"


def test_the_torch_backend_says_which_npu_options_it_cannot_use():
    settings = load("verl-fsdp-update", ["backend=torch", "profiler.l2_cache=true"]).runtime_settings()
    assert "profiler.l2_cache=True" in backends.render(settings, key="k")
