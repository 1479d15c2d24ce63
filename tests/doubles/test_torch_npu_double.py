"""Checks the torch_npu CPU test double against the torch_npu reference (section 15).

Most tests switch release trains in-process with ``torch_npu._double.reload``;
import-time selection through the environment (``npu_double_env``) runs in
subprocesses.  Only one test drives the real torch.profiler (CPU); the others
use the double's synthetic event backend to stay fast.
"""

from __future__ import annotations

import gc
import glob
import inspect
import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from . import DOUBLES_DIR, npu_double_env

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

FOLDER_RE = re.compile(r"^(?P<worker>.+)_(?P<pid>\d+)_(?P<ts>\d{17})_ascend_pt$")
WARN_LINE = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] \[WARNING\] \[\d+\] profiler\.py: "
ERROR_LINE = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] \[ERROR\] \[\d+\] profiler\.py: "
_ENV_KEYS = ("TORCH_NPU_DOUBLE_VERSION", "TORCH_NPU_DOUBLE_STRICT", "TORCH_NPU_DOUBLE_TORCH",
             "TORCH_NPU_DOUBLE_NPU_AVAILABLE", "PROF_CONFIG_PATH", "PROFILER_SAMPLECONFIG", "PROFILING_MODE",
             "RANK", "TORCH_NPU_WARNING_DISABLE", "TORCH_NPU_DISABLED_WARNING", "ASCEND_WORK_PATH")

# Train representatives of the reference's test matrix (section 15.6).
MATRIX = ["2.3.1.post2", "2.5.1", "2.7.1", "2.10.0", "2.12.0", "2.14.0"]

# --------------------------------------------------------------------------------------------
# Signatures transcribed from the reference artifact sigs_all.txt (one entry per downloaded
# wheel; Constant.* defaults replaced by their values, DEFAULT_PROCESS_NUMBER shown as <N>).
# --------------------------------------------------------------------------------------------
REF_APIS = ["profile", "_KinetoProfile", "schedule", "_ExperimentalConfig", "tensorboard_trace_handler",
            "analyse", "mstx.mark", "mstx.range_start", "mstx.range_end", "mstx.mstx_range",
            "mstx.range_push", "mstx.range_pop", "annotate"]
_COMMON = ("record_shapes=False, profile_memory=False, with_stack=False, with_flops=False, with_modules=False, "
           "experimental_config=None")
_CFG_HEAD = "profiler_level='Level0', aic_metrics='ACL_AICORE_{}', l2_cache=False"
_T6_TAIL = ("host_sys=None, mstx_domain_include=None, mstx_domain_exclude=None, sys_io=False, "
            "sys_interconnection=False")
REF_SIGNATURES = {
    "profile": [
        f"(*, activities=None, schedule=None, on_trace_ready=None, {_COMMON}, use_cuda=None)",
        f"(*, activities=None, schedule=None, on_trace_ready=None, {_COMMON}, custom_trace_id_callback=None, "
        "use_cuda=None)",
        f"(*, activities=None, schedule=None, on_trace_ready=None, {_COMMON}, execution_trace_observer=None, "
        "custom_trace_id_callback=None, use_cuda=None)",
    ],
    "_KinetoProfile": [
        f"(*, activities=None, {_COMMON})",
        f"(*, activities=None, {_COMMON}, custom_trace_id_callback=None)",
    ],
    "schedule": [
        "(wait, active, warmup=0, repeat=0, skip_first=0)",
        "(wait, active, warmup=0, repeat=0, skip_first=0, skip_first_wait=0)",
    ],
    "_ExperimentalConfig": [
        "(" + _CFG_HEAD.format("NONE") + ", data_simplification=True, record_op_args=False, export_type='text')",
        "(" + _CFG_HEAD.format("NONE") + ", msprof_tx=False, data_simplification=True, record_op_args=False, "
        "op_attr=False, export_type='text')",
        "(" + _CFG_HEAD.format("NONE") + ", msprof_tx=False, data_simplification=True, record_op_args=False, "
        "op_attr=False, gc_detect_threshold=None, export_type='text')",
        "(" + _CFG_HEAD.format("NONE") + ", msprof_tx=False, mstx=False, data_simplification=True, "
        f"record_op_args=False, op_attr=False, gc_detect_threshold=None, export_type=None, {_T6_TAIL})",
        "(" + _CFG_HEAD.format("NONE") + ", msprof_tx=False, data_simplification=True, record_op_args=False, "
        "op_attr=False, gc_detect_threshold=None, export_type=None)",
        "(" + _CFG_HEAD.format("NONE") + ", msprof_tx=False, data_simplification=True, record_op_args=False, "
        f"op_attr=False, gc_detect_threshold=None, export_type=None, {_T6_TAIL})",
        "(" + _CFG_HEAD.format("PIPE_UTILIZATION") + ", msprof_tx=False, mstx=False, data_simplification=True, "
        f"record_op_args=False, op_attr=False, gc_detect_threshold=None, export_type='text', {_T6_TAIL})",
    ],
    "tensorboard_trace_handler": [
        "(dir_name=None, worker_name=None)",
        "(dir_name=None, worker_name=None, analyse_flag=True)",
        "(dir_name=None, worker_name=None, analyse_flag=True, async_mode=False)",
    ],
    "analyse": [
        "(profiler_path, max_process_number=<N>)",
        "(profiler_path, max_process_number=<N>, export_type=None)",
    ],
    "mstx.mark": ["(message='')", "(message, stream=None, domain='default')"],
    "mstx.range_start": ["(message, stream=None)", "(message, stream=None, domain='default')"],
    "mstx.range_end": ["(range_id)", "(range_id, domain='default')"],
    "mstx.mstx_range": ["(message, stream=None)", "(message, stream=None, domain='default')"],
    "mstx.range_push": ["(message, stream=None, domain='default')"],
    "mstx.range_pop": ["(domain='default')"],
    "annotate": ["(message='', stream=None, domain='default')"],
}
_N = None
_DP2, _DP3, _DP11 = ("init", "step"), ("init", "step", "start"), ("init", "step", "start", "set_state")
# version -> (index into REF_SIGNATURES[api] for each api of REF_APIS, dynamic_profile functions)
REF_VERSIONS = {
    "2.1.0.post3": ([0, 0, 0, 0, 0, 0, _N, _N, _N, _N, _N, _N, _N], ()),
    "2.2.0": ([0, 0, 0, 0, 0, 0, _N, _N, _N, _N, _N, _N, _N], ()),
    "2.1.0.post6": ([0, 0, 0, 1, 1, 0, 0, _N, _N, _N, _N, _N, _N], _DP2),
    "2.3.1": ([0, 0, 0, 1, 1, 0, 0, _N, _N, _N, _N, _N, _N], _DP2),
    "2.1.0.post8": ([0, 0, 0, 2, 1, 0, 0, 0, 0, 0, _N, _N, _N], _DP3),
    "2.3.1.post2": ([0, 0, 0, 2, 1, 0, 0, 0, 0, 0, _N, _N, _N], _DP3),
    "2.4.0": ([0, 0, 0, 2, 1, 0, 0, 0, 0, 0, _N, _N, _N], _DP3),
    "2.5.1": ([0, 0, 0, 4, 2, 0, 0, 0, 0, 0, _N, _N, _N], _DP3),
    "2.6.0": ([0, 0, 0, 5, 2, 1, 1, 1, 1, 1, _N, _N, _N], _DP3),
    "2.1.0.post17": ([0, 0, 0, 3, 2, 1, 1, 1, 1, 1, _N, _N, _N], _DP3),
    "2.7.1": ([0, 0, 0, 3, 2, 1, 1, 1, 1, 1, _N, _N, _N], _DP3),
    "2.8.0": ([0, 0, 0, 3, 2, 1, 1, 1, 1, 1, _N, _N, _N], _DP3),
    "2.6.0.post5": ([0, 0, 0, 3, 2, 1, 1, 1, 1, 1, _N, _N, _N], _DP3),
    "2.9.0": ([0, 0, 0, 3, 2, 1, 1, 1, 1, 1, _N, _N, _N], _DP3),
    "2.9.1": ([0, 0, 0, 6, 2, 1, 1, 1, 1, 1, _N, _N, _N], _DP3),
    "2.10.0": ([0, 0, 0, 6, 2, 1, 1, 1, 1, 1, _N, _N, _N], _DP3),
    "2.11.0": ([1, 1, 1, 6, 2, 1, 1, 1, 1, 1, 0, 0, 0], _DP11),
    "2.12.0": ([1, 1, 1, 6, 2, 1, 1, 1, 1, 1, 0, 0, 0], _DP11),
    "2.7.1.post11": ([1, 1, 1, 6, 2, 1, 1, 1, 1, 1, 0, 0, 0], _DP11),
    "2.13.0": ([2, 1, 1, 6, 2, 1, 1, 1, 1, 1, 0, 0, 0], _DP11),
    "2.14.0": ([2, 1, 1, 6, 2, 1, 1, 1, 1, 1, 0, 0, 0], _DP11),
}

# Section 1 of the reference: versions on PyPI per train.
TRAIN_VERSIONS = {
    1: ["2.1.0.post3", "2.2.0"],
    2: ["2.1.0.post6", "2.2.0.post2", "2.3.1"],
    3: ["2.1.0.post8", "2.3.1.post2", "2.4.0"],
    4: ["2.1.0.post10", "2.3.1.post4", "2.4.0.post2"],
    5: ["2.1.0.post12", "2.3.1.post6", "2.4.0.post4", "2.5.1", "2.6.0rc1"],
    6: ["2.1.0.post13", "2.5.1.post1", "2.6.0"],
    7: ["2.1.0.post17", "2.6.0.post3", "2.7.1", "2.8.0"],
    8: ["2.6.0.post5", "2.7.1.post2", "2.8.0.post2", "2.9.0"],
    9: ["2.7.1.post4", "2.8.0.post4", "2.9.0.post2", "2.9.1", "2.10.0"],
    10: ["2.7.1.post6", "2.8.0.post5", "2.9.0.post4", "2.10.0.post2"],
    11: ["2.7.1.post8", "2.9.0.post6", "2.10.0.post4", "2.11.0", "2.12.0"],
    12: ["2.7.1.post10", "2.9.0.post8", "2.10.0.post6", "2.11.0.post2", "2.12.0.post2"],
    13: ["2.7.1.post11", "2.9.0.post9", "2.10.0.post7", "2.11.0.post3", "2.12.0.post3", "2.13.0", "2.14.0"],
}


def _sched_sim(step, wait, active, warmup=0, repeat=0, skip_first=0, skip_first_wait=0):
    """Independent re-statement of the reference schedule simulator (section 4.1)."""
    if step < skip_first:
        return "-"
    step -= skip_first
    if skip_first_wait != 0:
        step += wait
    n = wait + warmup + active
    if repeat > 0 and step / n >= repeat:
        return "-"
    m = step % n
    if m < wait:
        return "-"
    if m < wait + warmup:
        return "W"
    return "R" if m < n - 1 else "S"


# ------------------------------------------------------------------------------ fixtures ---
def _purge_torch_npu():
    for name in list(sys.modules):
        if name == "torch_npu" or name.startswith("torch_npu."):
            del sys.modules[name]


@pytest.fixture(scope="module")
def npu_pkg():
    """Put tests/doubles on sys.path for this module only, and take it away afterwards."""
    saved_modules = {k: v for k, v in sys.modules.items() if k == "torch_npu" or k.startswith("torch_npu.")}
    saved_env = {k: os.environ.pop(k) for k in _ENV_KEYS if k in os.environ}
    _purge_torch_npu()
    sys.path.insert(0, DOUBLES_DIR)
    try:
        import torch_npu
        yield torch_npu
    finally:
        try:
            sys.modules["torch_npu._double"].reset()
            sys.modules["torch_npu._double"].config(strict=False)
        except KeyError:
            pass
        _purge_torch_npu()
        sys.modules.update(saved_modules)
        if DOUBLES_DIR in sys.path:
            sys.path.remove(DOUBLES_DIR)
        for key in _ENV_KEYS:
            os.environ.pop(key, None)
        os.environ.update(saved_env)


_BASE_CFG = dict(strict=False, torch_backend=False, npu_available=True, device_count=1, mstx_mirror=True,
                 mstx_external=False, cann_supports_db=True, cann_db_default=False, register_torch_device=False)


@pytest.fixture
def use(npu_pkg, tmp_path, monkeypatch):
    """use(version, **config) -> torch_npu re-imported as that release (synthetic events by default)."""
    monkeypatch.chdir(tmp_path)
    for key in _ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    d = npu_pkg._double

    def _use(version="2.14.0", **cfg):
        if "train" in cfg:
            version = None
        return d.reload(version=version, **{**_BASE_CFG, **cfg})

    yield _use
    gc.collect()
    d.reset()
    d.config(strict=False)


def _run(tn, prof, steps):
    prof.start()
    for _ in range(steps):
        prof.step()
    prof.stop()


def _trace_names(prof_dir):
    with open(os.path.join(prof_dir, "ASCEND_PROFILER_OUTPUT", "trace_view.json"), encoding="utf-8") as fh:
        events = json.load(fh)
    assert isinstance(events, list)
    return [e.get("name", "") for e in events if e.get("ph") == "X"]


# ============================================================ 1. train selection & surface ===
def test_version_table_maps_every_listed_version(npu_pkg):
    from torch_npu._double import trains
    for num, versions in TRAIN_VERSIONS.items():
        for version in versions:
            assert trains.train_of(version) == num, version
    assert trains.train_of("2.1.0") == 0
    with pytest.raises(ValueError):
        trains.train_of("2.99.0")
    with pytest.raises(ValueError):
        npu_double_env("2.5.2")
    assert trains.DEFAULT_VERSION == "2.14.0"


def test_config_selects_train_and_refuses_late_switch(use):
    tn = use("2.5.1")
    d = tn._double
    assert tn.__version__ == "2.5.1" and tn.version.__version__ == "2.5.1"
    assert d.current_train().n == 5
    with pytest.raises(RuntimeError, match="reload"):
        d.config(version="2.7.1")
    tn = use(train="T9")  # train number picks a representative version
    assert d.current_train().n == 9 and tn.__version__ == "2.10.0"
    with pytest.raises(d.UnsupportedTrainError):
        d.reload(version="2.1.0")


@pytest.mark.parametrize("version", sorted(REF_VERSIONS))
def test_signatures_match_reference(use, version):
    tn = use(version)
    from torch_npu.profiler import profiler as prof_mod
    objs = {
        "profile": tn.profiler.profile, "_KinetoProfile": tn.profiler._KinetoProfile,
        "schedule": tn.profiler.schedule, "_ExperimentalConfig": tn.profiler._ExperimentalConfig,
        "tensorboard_trace_handler": tn.profiler.tensorboard_trace_handler, "analyse": prof_mod.analyse,
    }
    mstx = getattr(tn.npu, "mstx", None)
    for name in ("mark", "range_start", "range_end", "mstx_range", "range_push", "range_pop"):
        if mstx is not None and hasattr(mstx, name):
            objs["mstx." + name] = getattr(mstx, name)
    if mstx is not None and hasattr(mstx, "annotate"):
        objs["annotate"] = mstx.annotate
    indexes, dp_funcs = REF_VERSIONS[version]
    for api, idx in zip(REF_APIS, indexes):
        if idx is None:
            assert api not in objs, f"{version}: {api} should not exist"
            continue
        sig = str(inspect.signature(objs[api]))
        sig = re.sub(r"max_process_number=\d+", "max_process_number=<N>", sig)
        if api == "mstx.mark" and tn._double.current_train().n == 2:
            assert sig == "(self, message='')"  # T2 instance-method bug (section 9.2)
            sig = "(message='')"
        assert sig == REF_SIGNATURES[api][idx], f"{version} {api}"
    if dp_funcs:
        dp = tn.profiler.dynamic_profile
        assert [f for f in ("init", "step", "start", "set_state") if hasattr(dp, f)] == list(dp_funcs)
    else:
        with pytest.raises(ImportError):
            from torch_npu.profiler import dynamic_profile  # noqa: F401


def test_constructors_raise_cpython_type_errors(use):
    tn = use("2.14.0")
    P = tn.profiler
    with pytest.raises(TypeError, match=r"profile.__init__\(\) got an unexpected keyword argument 'acc_events'"):
        P.profile(acc_events=True)
    with pytest.raises(TypeError, match=r"takes 1 positional argument but 2 were given"):
        P.profile([P.ProfilerActivity.CPU])
    with pytest.raises(TypeError, match=r"missing 1 required positional argument: 'active'"):
        P.schedule(wait=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'verbose'"):
        P._ExperimentalConfig(verbose=True)
    assert P.schedule(1, 2, 3).active == 2  # positional order is (wait, active, warmup)


@pytest.mark.parametrize("version,has_mstx,has_sfw,has_async,has_trace_id,has_eto", [
    ("2.4.0", False, False, False, False, False),
    ("2.5.1", False, False, True, False, False),
    ("2.7.1", True, False, True, False, False),
    ("2.10.0", True, False, True, False, False),
    ("2.12.0", True, True, True, True, False),
    ("2.7.1.post11", True, True, True, True, False),
    ("2.14.0", True, True, True, True, True),
])
def test_train_gated_keywords(use, version, has_mstx, has_sfw, has_async, has_trace_id, has_eto):
    P = use(version).profiler
    checks = [  # (supported, call, swallowed-by-no_exception_func)
        (has_mstx, lambda: P._ExperimentalConfig(mstx=True, profiler_level=P.ProfilerLevel.Level1), False),
        (has_sfw, lambda: P.schedule(wait=1, active=1, warmup=1, skip_first_wait=1), False),
        (has_async, lambda: P.tensorboard_trace_handler("out", async_mode=False), True),
        (has_trace_id, lambda: P.profile(custom_trace_id_callback=lambda: "id"), False),
        (has_eto, lambda: P.profile(execution_trace_observer=None), False),
    ]
    for supported, call, swallowed in checks:
        if supported:
            assert call() is not None
        elif swallowed:
            assert call() is None  # T3+ swallows the TypeError and returns None
        else:
            with pytest.raises(TypeError):
                call()


def test_enums_are_train_gated_and_torch_npu_owned(use):
    P = use("2.2.0").profiler
    assert not hasattr(P.ProfilerLevel, "Level_none") and not hasattr(P.AiCMetrics, "AiCoreNone")
    assert P.ExportType.Text == "text" and P.ExportType.Db == "db"
    P = use("2.3.1").profiler
    assert P.ProfilerLevel.Level_none == "Level_none" and P.AiCMetrics.AiCoreNone == "ACL_AICORE_NONE"
    with pytest.raises(AttributeError):
        P.AiCMetrics.MemoryAccess
    with pytest.raises(ImportError):
        from torch_npu.profiler import HostSystem  # noqa: F401
    P = use("2.5.1").profiler
    assert P.AiCMetrics.MemoryAccess == "ACL_AICORE_MEMORY_ACCESS"
    P = use("2.6.0").profiler
    from torch_npu.profiler import HostSystem
    assert [HostSystem.CPU, HostSystem.OSRT] == ["cpu", "osrt"] and not hasattr(HostSystem, "NUMA")
    assert "HostSystem" in P.__all__
    P = use("2.12.0").profiler
    assert P.HostSystem.NUMA == "numa"
    assert "analyse" not in dir(P)
    A = P.ProfilerActivity
    assert str(A.CPU) == "ProfilerActivity.CPU" and int(A.NPU) == 2 and set(A) == P.supported_activities()
    assert type(A.CPU).__module__ == "torch_npu._C._profiler"
    import enum
    assert issubclass(P.ProfilerAction, enum.Enum)
    assert [a.name for a in P.ProfilerAction] == ["NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE"]
    assert P.ProfilerAction.__module__ == "torch_npu.profiler.scheduler"


def test_export_type_list_vs_str(use, capsys):
    P = use("2.4.0.post2").profiler  # T4: a single str; a list warns and resets to "text"
    cfg = P._ExperimentalConfig(export_type=["db"])
    assert cfg.export_type == "text"
    assert re.search(WARN_LINE + r"Invalid parameter type, reset it to text\.", capsys.readouterr().out)
    assert P._ExperimentalConfig(export_type=P.ExportType.Db).export_type == "db"
    P = use("2.5.1").profiler  # T5: str or list; default None warns
    assert sorted(P._ExperimentalConfig(export_type=["db", "text", "db"]).export_type) == ["db", "text"]
    assert P._ExperimentalConfig(export_type="db").export_type == ["db"]
    capsys.readouterr()
    assert P._ExperimentalConfig().export_type == ["text"]
    assert "Invalid parameter export_type: None, reset it to text." in capsys.readouterr().out
    assert P._ExperimentalConfig(export_type=["csv"]).export_type == ["text"]
    P = use("2.10.0").profiler  # T9: default ExportType.Text, no warning about it
    capsys.readouterr()
    assert P._ExperimentalConfig(aic_metrics=P.AiCMetrics.AiCoreNone).export_type == ["text"]
    assert capsys.readouterr().out == ""


def test_experimental_config_normalisation(use, capsys):
    P = use("2.9.0").profiler  # T8: AicMetricsNone promoted at Level1, Level_none forces mstx
    assert P._ExperimentalConfig(profiler_level=P.ProfilerLevel.Level1)._aic_metrics == "ACL_AICORE_PIPE_UTILIZATION"
    cfg = P._ExperimentalConfig(profiler_level=P.ProfilerLevel.Level_none, export_type="text")
    assert cfg._mstx is True
    with pytest.warns(UserWarning, match="msprof_tx will be deprecated"):
        P._ExperimentalConfig(msprof_tx=True, export_type="text")
    P = use("2.10.0").profiler  # T9: new default PipeUtilization is reset at Level0
    capsys.readouterr()
    cfg = P._ExperimentalConfig()
    assert cfg._aic_metrics == "ACL_AICORE_NONE"
    assert "reset aic metrics to None!" in capsys.readouterr().out
    cfg = P._ExperimentalConfig(l2_cache="yes", gc_detect_threshold=-1, op_attr=True, host_sys=["gpu"],
                                mstx_domain_include=["a"], aic_metrics=P.AiCMetrics.AiCoreNone)
    assert (cfg._l2_cache, cfg._gc_detect_threshold, cfg._op_attr, cfg._host_sys, cfg._mstx_domain_include) == \
        (False, None, False, [], [])
    cfg = P._ExperimentalConfig(mstx=True, mstx_domain_include=["a"], mstx_domain_exclude=["b"],
                                aic_metrics=P.AiCMetrics.AiCoreNone)
    assert cfg._mstx_domain_include == ["a"] and cfg._mstx_domain_exclude == []
    assert not hasattr(cfg, "tx_enabled")  # property added in T11
    assert P._ExperimentalConfig(profiler_level="Level9")._profiler_level == "Level0"
    assert json.dumps(cfg.__dict__)  # dumped as-is into profiler_info.json
    assert cfg().trace_level == "Level0" and cfg().msprof_tx is True


# ========================================================================= 2. schedule ===
@pytest.mark.parametrize("kwargs,expected", [
    (dict(wait=1, warmup=1, active=2, repeat=1), "-WRS--------"),
    (dict(wait=1, warmup=1, active=2, repeat=0), "-WRS-WRS-WRS"),
    (dict(wait=0, warmup=0, active=1, repeat=1), "S-----------"),
    (dict(wait=2, warmup=1, active=3, repeat=1, skip_first=3), "-----WRRS---"),
    (dict(wait=5, warmup=1, active=2, repeat=2, skip_first=2, skip_first_wait=1), "--WRS-----WRS---"),
])
def test_schedule_timelines_match_reference(use, kwargs, expected):
    P = use("2.14.0").profiler
    sched = P.schedule(**kwargs)
    abbr = {"NONE": "-", "WARMUP": "W", "RECORD": "R", "RECORD_AND_SAVE": "S"}
    got = "".join(abbr[sched(i).name] for i in range(len(expected)))
    assert got == expected
    assert got == "".join(_sched_sim(i, **kwargs) for i in range(len(expected)))
    assert all(isinstance(sched(i), P.ProfilerAction) for i in range(3))


def test_schedule_invalid_values_warn_and_reset(use, capsys):
    P = use("2.7.1").profiler
    sched = P.schedule(wait=-1, active=0, warmup=1.0, repeat="x", skip_first=True)
    assert (sched.wait, sched.active, sched.warmup, sched.repeat, sched.skip_first) == (0, 1, 0, 0, True)
    out = capsys.readouterr().out
    for msg in ("Invalid parameter wait, reset it to 0.", "Invalid parameter active, reset it to 1.",
                "Invalid parameter warmup, reset it to 0.", "Profiler won't be using warmup"):
        assert re.search(WARN_LINE + re.escape(msg), out), msg
    with pytest.raises(ValueError, match="Invalid parameter step, which must be not less than 0.") as err:
        sched(-1)
    assert "ERR04003 PROF invalid value" in str(err.value)
    with pytest.raises(TypeError):
        P.schedule(wait=1, active=1, skip_first_wait=1)  # T7 has no skip_first_wait


# ===================================================================== 3. state machine ===
def test_one_cycle_with_torch_profiler_writes_one_folder_with_step_spans(use, tmp_path):
    pytest.importorskip("torch")
    tn = use("2.14.0", torch_backend="auto")
    P = tn.profiler
    import torch
    out = tmp_path / "prof"
    handler = P.tensorboard_trace_handler(str(out))
    prof = P.profile(activities=[P.ProfilerActivity.CPU],
                     schedule=P.schedule(wait=1, warmup=1, active=2, repeat=1), on_trace_ready=handler)
    prof.start()
    for _ in range(6):
        torch.ones(8).sum()
        prof.step()
    prof.stop()
    dirs = os.listdir(out)
    assert len(dirs) == 1 and FOLDER_RE.match(dirs[0])
    assert FOLDER_RE.match(dirs[0]).group("pid") == str(os.getpid())
    pdir = out / dirs[0]
    names = _trace_names(pdir)
    steps = sorted(n for n in names if n.startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]  # active=2
    assert any(n.startswith("aten::") for n in names)  # real torch CPU events
    assert (pdir / "FRAMEWORK" / "double_events.json").is_file()
    output = pdir / "ASCEND_PROFILER_OUTPUT"
    details = output.joinpath("operator_details.csv").read_text().splitlines()
    assert details[0].startswith("Name,Input Shapes,Call Stack,Host Self Duration(us),") and len(details) > 1
    assert not (output / "kernel_details.csv").exists()  # device views need ProfilerActivity.NPU, as in torch_npu
    info = json.loads((pdir / "profiler_info.json").read_text())
    assert info["config"]["common_config"]["activities"] == ["ProfilerActivity.CPU"]
    assert info["config"]["common_config"]["schedule"] == {
        "wait": 1, "active": 2, "warmup": 1, "repeat": 1, "skip_first": 0, "skip_first_wait": 0}
    assert info["config"]["experimental_config"]["_export_type"] == ["text"]
    assert info["torch_npu_version"] == "2.14.0" and info["cann_version"] == "double"
    rec = tn._double.recorder.profiles[-1]
    assert rec.backend == "torch"
    assert [t[3] for t in rec.timeline[:5]] == [
        [], ["init_trace", "warmup_trace"], ["start_trace"], [], ["stop_trace", "finalize_trace", "trace_ready"]]
    # NPU + mstx: markers are mirrored as torch record_function events into the same trace
    cfg = P._ExperimentalConfig(mstx=True, aic_metrics=P.AiCMetrics.AiCoreNone)
    with P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.NPU], experimental_config=cfg,
                   on_trace_ready=P.tensorboard_trace_handler(str(tmp_path / "mirror"))):
        rid = tn.npu.mstx.range_start("forward_pass")
        torch.ones(4).sum()
        tn.npu.mstx.range_end(rid)
        tn.npu.mstx.mark("checkpoint")
    (mdir,) = os.listdir(tmp_path / "mirror")
    names = _trace_names(tmp_path / "mirror" / mdir)
    assert "forward_pass" in names and "checkpoint" in names


def _csv(path):
    import csv
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


@pytest.mark.parametrize("aic, kernel_columns", [
    ("AiCoreNone", ["Step Id", "Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)",
            "Wait Time(us)", "Block Num"]),
    ("PipeUtilization", ["Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type",
                         "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim"]),
])
def test_text_export_writes_torch_npus_csv_files_in_their_column_layout(use, tmp_path, monkeypatch, aic,
                                                                        kernel_columns):
    """kernel_details, op_statistic and step_trace_time hold rows that agree with one another and with the trace."""
    pytest.importorskip("torch")
    tn = use("2.14.0", torch_backend="auto")
    P = tn.profiler
    import torch
    monkeypatch.setenv("RANK", "3")
    exp = {"profiler_level": P.ProfilerLevel.Level1, "export_type": P.ExportType.Text,
           "aic_metrics": getattr(P.AiCMetrics, aic)}
    prof = P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.NPU],
                     schedule=P.schedule(wait=0, warmup=0, active=3, repeat=1),
                     on_trace_ready=P.tensorboard_trace_handler(str(tmp_path / "prof")),
                     experimental_config=P._ExperimentalConfig(**exp))
    prof.start()
    for _ in range(4):
        torch.ones(64, 64).mm(torch.ones(64, 64)).relu().sum()
        prof.step()
    prof.stop()
    (pdir,) = (tmp_path / "prof").iterdir()
    out = pdir / "ASCEND_PROFILER_OUTPUT"
    header, kernels = _csv(out / "kernel_details.csv")
    assert header[:len(kernel_columns)] == kernel_columns
    assert {k["Step Id"] for k in kernels} == {"0", "1", "2"} and {k["Device_id"] for k in kernels} == {"3"}
    assert "Mm" in {k["Type"] for k in kernels} and all(k["Type"][:1].isupper() for k in kernels)
    assert {k["Accelerator Core"] for k in kernels if k["Type"] == "Mm"} == {"AI_CORE"}
    header, stats = _csv(out / "op_statistic.csv")
    assert header == ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)",
                      "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
    mm = next(r for r in stats if r["OP Type"] == "Mm")
    assert int(mm["Count"]) == sum(k["Type"] == "Mm" for k in kernels)
    assert float(mm["Total Time(us)"]) == pytest.approx(
        sum(float(k["Duration(us)"]) for k in kernels if k["Type"] == "Mm"), abs=0.01)
    assert sum(float(r["Ratio(%)"]) for r in stats) == pytest.approx(100, abs=0.1)
    header, steps = _csv(out / "step_trace_time.csv")
    assert header == ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
                      "Communication", "Free", "Stage", "Bubble",
                      "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
    assert [r["Step"] for r in steps] == ["0", "1", "2"]
    host = {e["name"]: e["dur"] for e in json.loads((out / "trace_view.json").read_text())
            if str(e.get("name", "")).startswith("ProfilerStep#")}
    for row in steps:  # a step's time splits into computing, communication not overlapped and free
        parts = sum(float(row[c]) for c in ("Computing", "Communication(Not Overlapped)", "Free"))
        assert parts == pytest.approx(host["ProfilerStep#" + row["Step"]], abs=0.01)
        assert float(row["Computing"]) > 0



def test_repeat_zero_creates_a_folder_per_cycle_and_rank_file(use, tmp_path, monkeypatch):
    import time
    monkeypatch.setenv("RANK", "3")
    tn = use("2.7.1")
    P = tn.profiler
    prof = P.profile(schedule=P.schedule(wait=0, warmup=1, active=1, repeat=0),
                     on_trace_ready=P.tensorboard_trace_handler(str(tmp_path / "o"), worker_name="w"),
                     experimental_config=P._ExperimentalConfig(export_type="text"))
    prof.start()  # W S W S W(stop): three folders created, the last one deleted at stop()
    for _ in range(4):
        time.sleep(0.002)  # folder names carry millisecond timestamps
        prof.step()
    prof.stop()
    rec = tn._double.recorder.profiles[-1]
    assert len(rec.dirs) == 3 and rec.deleted_dirs == [rec.dirs[-1]]
    dirs = sorted(os.listdir(tmp_path / "o"))
    assert [str(tmp_path / "o" / d) for d in dirs] == rec.dirs[:2]
    assert all(d.startswith(f"w_{os.getpid()}_") and FOLDER_RE.match(d) for d in dirs)
    for d, step in zip(dirs, ("ProfilerStep#1", "ProfilerStep#3")):
        assert (tmp_path / "o" / d / "profiler_info_3.json").is_file()
        assert [n for n in _trace_names(tmp_path / "o" / d) if n.startswith("ProfilerStep#")] == [step]


def test_warmup_at_stop_deletes_folder_and_no_schedule_warns(use, tmp_path, capsys):
    P = use("2.12.0").profiler
    prof = P.profile(schedule=P.schedule(wait=0, warmup=2, active=1),
                     on_trace_ready=P.tensorboard_trace_handler(str(tmp_path / "w")))
    _run(None, prof, 1)
    assert os.listdir(tmp_path / "w") == []
    out = capsys.readouterr().out
    assert "Stop profiler while current state is WARMUP which will result in empty parsed data." in out
    prof = P.profile(on_trace_ready=P.tensorboard_trace_handler(str(tmp_path / "n")))
    _run(None, prof, 3)
    assert "Stop profiler while current state is RECORD which may result in incomplete parsed data." in \
        capsys.readouterr().out
    (only,) = os.listdir(tmp_path / "n")
    assert _trace_names(tmp_path / "n" / only) == []  # no schedule -> no ProfilerStep spans
    prof.step()
    assert "Profiler is stopped, step takes no effect!" in capsys.readouterr().out


def test_export_only_mode_folder_deleted_on_gc(use, tmp_path):
    tn = use("2.14.0")
    P = tn.profiler
    prof = P.profile(activities=[P.ProfilerActivity.NPU])
    _run(tn, prof, 2)
    (pdir,) = tn._double.recorder.profile_dirs()
    assert os.path.dirname(pdir) == str(tmp_path / "export_only_prof_dir")
    assert not os.path.exists(os.path.join(pdir, "ASCEND_PROFILER_OUTPUT"))  # nothing analysed
    del prof
    gc.collect()
    assert not os.path.exists(pdir)
    kp = P._KinetoProfile(activities=[P.ProfilerActivity.CPU])
    kp.start()
    kp.stop()
    assert tn._double.recorder.profiles[-1].dirs[0].startswith(str(tmp_path / "export_only_prof_dir"))


def test_default_output_dirs(use, tmp_path, monkeypatch):
    tn = use("2.14.0")
    P = tn.profiler
    prof = P.profile(on_trace_ready=P.tensorboard_trace_handler())  # dir_name=None: the current directory
    _run(tn, prof, 1)
    assert os.path.dirname(tn._double.recorder.profiles[-1].dirs[0]) == str(tmp_path)
    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path / "work"))
    prof = P.profile(on_trace_ready=P.tensorboard_trace_handler())
    _run(tn, prof, 1)
    assert os.path.dirname(tn._double.recorder.profiles[-1].dirs[0]) == str(tmp_path / "work" / "profiling_data")
    h = P.tensorboard_trace_handler(str(tmp_path / "x"), worker_name="")
    assert h is not None and "Invalid parameter worker_name, reset it to default." in \
        tn._double.recorder.warning_messages()


def test_db_export_and_offline_analyse(use, tmp_path, capsys):
    tn = use("2.6.0")
    P = tn.profiler
    from torch_npu.profiler.profiler import analyse
    cfg = P._ExperimentalConfig(export_type=P.ExportType.Db, msprof_tx=True)
    prof = P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.NPU],
                     schedule=P.schedule(wait=0, warmup=0, active=2, repeat=1),
                     on_trace_ready=P.tensorboard_trace_handler(str(tmp_path / "db"), analyse_flag=False),
                     experimental_config=cfg)
    prof.start()
    rid = tn.npu.mstx.range_start("fwd")
    tn.npu.mstx.range_end(rid)
    prof.step()
    prof.step()
    prof.stop()
    (pdir,) = glob.glob(str(tmp_path / "db" / "*_ascend_pt"))
    assert not os.path.exists(os.path.join(pdir, "ASCEND_PROFILER_OUTPUT"))  # analyse_flag=False
    assert analyse(str(tmp_path / "db")) is None  # parent dir: every *_ascend_pt is analysed
    db = os.path.join(pdir, "ASCEND_PROFILER_OUTPUT", "ascend_pytorch_profiler.db")
    con = sqlite3.connect(db)
    tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
    assert {"STRING_IDS", "MSTX_EVENTS", "PYTORCH_API"} <= tables
    assert con.execute("select count(*) from MSTX_EVENTS").fetchone()[0] >= 1
    con.close()
    assert os.path.isfile(os.path.join(pdir, "ASCEND_PROFILER_OUTPUT", "analysis.db"))
    analyse(pdir, export_type="text")
    assert "ProfilerStep#1" in _trace_names(pdir)
    capsys.readouterr()
    assert analyse(str(tmp_path / "missing")) is None
    assert re.search(ERROR_LINE + r"Call analyse failed\. Exception: The path does not exist: ",
                     capsys.readouterr().out)


def test_on_trace_ready_argument_changed_in_t4(use, tmp_path):
    for version, expect_profile in (("2.4.0", False), ("2.4.0.post2", True)):
        P = use(version).profiler
        seen = []
        prof = P.profile(schedule=P.schedule(wait=0, warmup=1, active=1, repeat=1), on_trace_ready=seen.append)
        _run(None, prof, 3)
        assert len(seen) == 1
        assert (seen[0] is prof) == expect_profile
        assert hasattr(seen[0], "prof_if") == expect_profile


def test_foreign_schedule_and_activity_are_silent_without_strict(use, tmp_path, capsys):
    pytest.importorskip("torch")
    import torch.profiler as tp
    tn = use("2.14.0")
    P = tn.profiler
    prof = P.profile(schedule=tp.schedule(wait=0, warmup=1, active=1, repeat=1),
                     on_trace_ready=P.tensorboard_trace_handler(str(tmp_path / "f")))
    _run(tn, prof, 4)
    assert not (tmp_path / "f").exists() or os.listdir(tmp_path / "f") == []
    assert "foreign_schedule_action" in tn._double.recorder.diagnostics
    capsys.readouterr()
    prof = P.profile(activities=[tp.ProfilerActivity.CPU])
    assert prof.prof_if.activities == {P.ProfilerActivity.CPU, P.ProfilerActivity.NPU}
    assert "Invalid activities, only CPU and NPU are supported, reset it to default." in capsys.readouterr().out


def test_second_profiler_collects_nothing_and_cuts_the_first(use, tmp_path):
    tn = use("2.14.0")
    P = tn.profiler
    first = P.profile(on_trace_ready=P.tensorboard_trace_handler(str(tmp_path / "a")))
    first.start()
    second = P.profile(on_trace_ready=P.tensorboard_trace_handler(str(tmp_path / "b")))
    second.start()
    second.stop()
    first.stop()
    diags = tn._double.recorder.diagnostics
    assert "already_enabled" in diags and "stopped_foreign_profiler" in diags


# ====================================================================== 4. swallowing ===
def test_handler_errors_are_swallowed_from_t3(use, tmp_path, capsys):
    P = use("2.3.1").profiler  # T2: not wrapped yet
    with pytest.raises(TypeError):
        P.tensorboard_trace_handler(str(tmp_path), use_gzip=True)
    tn = use("2.10.0")
    P = tn.profiler
    assert P.tensorboard_trace_handler(str(tmp_path), use_gzip=True) is None
    out = capsys.readouterr().out
    assert re.search(ERROR_LINE + r"Call tensorboard_trace_handler failed\. Exception: "
                     r"tensorboard_trace_handler\(\) got an unexpected keyword argument 'use_gzip'", out), out
    err = tn._double.recorder.errors[-1]
    assert (err.api, err.exc_type) == ("tensorboard_trace_handler", "TypeError")
    bad = str(tmp_path / "run:1")
    assert P.tensorboard_trace_handler(bad) is None  # T10: path check raises inside, swallowed
    assert "Invalid input path" in capsys.readouterr().out
    P = use("2.12.0").profiler  # T11: path checks only warn
    with pytest.warns(UserWarning, match="Invalid input path"):
        assert P.tensorboard_trace_handler(bad) is not None


def test_exceptions_inside_step_are_printed_not_raised(use, capsys):
    tn = use("2.14.0")
    P = tn.profiler

    def boom(_prof):
        raise RuntimeError("handler exploded")

    prof = P.profile(schedule=P.schedule(wait=0, warmup=1, active=1, repeat=1), on_trace_ready=boom)
    _run(tn, prof, 3)
    out = capsys.readouterr().out
    assert re.search(ERROR_LINE + r"Call step failed\. Exception: handler exploded", out)
    assert ("profile.step", "RuntimeError", "handler exploded") in tn._double.recorder.errors
    P = use("2.3.1").profiler  # T2: the same exception propagates
    prof = P.profile(schedule=P.schedule(wait=0, warmup=1, active=1, repeat=1), on_trace_ready=boom)
    prof.start()
    prof.step()
    with pytest.raises(RuntimeError, match="handler exploded"):
        prof.step()
    prof.stop()


def test_warning_lines_are_gated_by_rank_but_recorded(use, monkeypatch, capsys):
    tn = use("2.7.1")
    monkeypatch.setenv("RANK", "1")
    tn.profiler.schedule(wait=-1, active=1, warmup=1)
    assert capsys.readouterr().out == ""
    assert ("Schedule.__init__", "Invalid parameter wait, reset it to 0.") in tn._double.recorder.warnings
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("TORCH_NPU_WARNING_DISABLE", "1")
    tn.profiler.schedule(wait=-1, active=1, warmup=1)
    assert capsys.readouterr().out == ""


def test_msprof_environment_makes_profiler_a_noop(use, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PROFILING_MODE", "dynamic")
    tn = use("2.14.0")
    P = tn.profiler
    prof = P.profile(on_trace_ready=P.tensorboard_trace_handler(str(tmp_path / "m")))
    _run(tn, prof, 2)
    assert "torch_npu profiler api is not effective" in capsys.readouterr().out
    assert tn._double.recorder.profile_dirs() == []


# =========================================================================== 5. mstx ===
def _mstx_profile(P, **cfg_kw):
    cfg = P._ExperimentalConfig(**cfg_kw)
    return P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.NPU], experimental_config=cfg,
                     on_trace_ready=P.tensorboard_trace_handler("mstx_out"))


def test_mstx_disabled_returns_zero_and_enabled_counts(use):
    tn = use("2.14.0")
    mstx, P = tn.npu.mstx, tn.profiler
    assert mstx.range_start("idle") == 0 and mstx.range_push("idle") == -1 and mstx.range_pop() == -1
    assert mstx.mark("idle") is None and tn._double.recorder.mstx == []
    cpu_only = P.profile(activities=[P.ProfilerActivity.CPU],
                         experimental_config=P._ExperimentalConfig(mstx=True, aic_metrics=P.AiCMetrics.AiCoreNone))
    cpu_only.start()
    assert mstx.range_start("cpu only") == 0  # NPU activity is required
    cpu_only.stop()
    prof = _mstx_profile(P, mstx=True, aic_metrics=P.AiCMetrics.AiCoreNone, mstx_domain_exclude=["noisy"])
    prof.start()
    a = mstx.range_start("a")
    b = mstx.range_start("b", stream=tn.npu.current_stream())
    assert (a, b) == (1, 2)
    mstx.range_end(b)
    mstx.range_end(a)
    assert mstx.range_start("x", domain="noisy") == 0  # excluded domain
    assert mstx.range_push("p1") == 0 and mstx.range_push("p2") == 1
    assert mstx.range_pop() == 1 and mstx.range_pop() == 0 and mstx.range_pop() == -1
    with mstx.annotate("ctx"):
        pass

    @mstx.annotate()
    def forward():
        return 7

    assert forward() == 7
    mstx.mark("m")
    prof.stop()
    kinds = [(r.kind, r.message) for r in tn._double.recorder.mstx]
    assert ("range_start", "a") in kinds and ("range_start", "forward") in kinds and ("mark", "m") in kinds
    assert any(r.has_stream for r in tn._double.recorder.mstx)
    assert mstx.range_start("after stop") == 0
    with pytest.warns(UserWarning, match="Invalid message for mstx.range_start func"):
        assert mstx.range_start("") == 0
    with pytest.warns(UserWarning, match="Invalid stream for mstx.mark func"):
        mstx.mark("m", stream="npu:0")


def test_mstx_history(use, capsys):
    tn = use("2.3.1")  # T2: instance-method bug, no ranges
    m = tn.npu.mstx
    assert not hasattr(m, "range_start")
    m.mark("x")  # binds "x" to self and marks ""
    assert tn._double.recorder.calls_to("mstx.mark")[-1].bound_args == {"message": ""}
    tn = use("2.4.0")  # T3: static, no stream/domain in mark, exceptions propagate
    with pytest.raises(TypeError):
        tn.npu.mstx.mark("x", domain="d")
    with pytest.raises(TypeError):
        tn.npu.mstx.range_start()
    tn = use("2.5.1")  # T5: exceptions are swallowed with the utils log format
    assert tn.npu.mstx.range_start() == 0
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\(\d+\)-\[ERROR\] Call range_start failed\. Exception: ",
                     capsys.readouterr().out)
    P = tn.profiler
    prof = _mstx_profile(P, msprof_tx=True, export_type="text")
    prof.start()
    assert tn.npu.mstx.range_start("legacy switch") == 1
    prof.stop()


def test_t11_profile_steps_open_an_mstx_range(use):
    tn = use("2.12.0")
    P = tn.profiler
    cfg = P._ExperimentalConfig(mstx=True, profiler_level=P.ProfilerLevel.Level_none,
                                aic_metrics=P.AiCMetrics.AiCoreNone)
    prof = P.profile(activities=[P.ProfilerActivity.NPU], experimental_config=cfg,
                     schedule=P.schedule(wait=0, warmup=1, active=2, repeat=1),
                     on_trace_ready=P.tensorboard_trace_handler("t11"))
    _run(tn, prof, 4)
    msgs = [r.message for r in tn._double.recorder.mstx if r.kind == "range_start"]
    assert msgs == ["ProfilerStep#1", "ProfilerStep#2"]
    tn = use("2.10.0")
    P = tn.profiler
    prof = P.profile(activities=[P.ProfilerActivity.NPU], schedule=P.schedule(wait=0, warmup=1, active=2, repeat=1),
                     experimental_config=P._ExperimentalConfig(mstx=True, aic_metrics=P.AiCMetrics.AiCoreNone),
                     on_trace_ready=P.tensorboard_trace_handler("t9"))
    _run(tn, prof, 4)
    assert tn._double.recorder.mstx == []


# ========================================================================= 6. strict ===
def test_strict_escalates_resets_and_hazards(use, tmp_path):
    tn = use("2.14.0", strict=True)
    d, P = tn._double, tn.profiler
    assert issubclass(d.DoubleStrictError, ValueError)
    with pytest.raises(d.DoubleStrictError, match="Invalid parameter wait"):
        P.schedule(wait=-1, active=1, warmup=1)
    with pytest.raises(d.DoubleStrictError, match="returned None"):
        P.tensorboard_trace_handler(str(tmp_path), use_gzip=True)
    with pytest.raises(d.DoubleStrictError, match="Invalid activities"):
        P.profile(activities=["CPU"])
    with pytest.raises(d.DoubleStrictError, match="no torch_npu profile with ProfilerActivity.NPU"):
        tn.npu.mstx.range_start("lost marker")
    # defaults of the train itself are printed but not escalated
    cfg = P._ExperimentalConfig()
    assert cfg._aic_metrics == "ACL_AICORE_NONE"
    with pytest.raises(d.DoubleStrictError, match="reset aic metrics"):
        P._ExperimentalConfig(aic_metrics=P.AiCMetrics.ArithmeticUtilization)

    def fake_torch_schedule(step):
        return "RECORD"

    prof = P.profile(schedule=fake_torch_schedule)
    with pytest.raises(d.DoubleStrictError, match="not a torch_npu.profiler.ProfilerAction"):
        prof.start()
    d.reset()
    first = P.profile(on_trace_ready=P.tensorboard_trace_handler(str(tmp_path / "a")))
    first.start()
    second = P.profile(on_trace_ready=P.tensorboard_trace_handler(str(tmp_path / "b")))
    with pytest.raises(d.DoubleStrictError, match="second torch_npu profiler"):
        second.start()
    first.stop()
    second.stopped = True
    d.reset()


def test_strict_reports_profile_collected_without_stop(use, tmp_path):
    tn = use("2.14.0", strict=True)
    d, P = tn._double, tn.profiler
    prof = P.profile(on_trace_ready=P.tensorboard_trace_handler(str(tmp_path / "g")))
    prof.start()
    del prof
    gc.collect()
    assert any("without stop" in m for m in d.recorder.strict_violations)
    with pytest.raises(d.DoubleStrictError, match="without stop"):
        P.schedule(wait=0, active=1, warmup=1)  # raised at the next API call
    assert len(os.listdir(tmp_path / "g")) == 1  # the real __del__ flushes the data


# ================================================================ 7. dynamic_profile ===
def test_dynamic_profile_starts_after_config_change(use, tmp_path):
    tn = use("2.14.0")
    from torch_npu.profiler import dynamic_profile as dp
    cfg_dir = tmp_path / "dp"
    dp.init(str(cfg_dir))
    cfg_file = cfg_dir / "profiler_config.json"
    data = json.loads(cfg_file.read_text())
    assert data["experimental_config"]["export_type"] == ["text"] and "mstx" in data["experimental_config"]
    assert (cfg_dir / "log").is_dir()
    for _ in range(3):
        dp.step()
    assert tn._double.recorder.profiles == []  # the file was not modified after init
    data.update(prof_dir=str(tmp_path / "dp_out"), analyse=True, active=2, warmup=1)
    cfg_file.write_text(json.dumps(data))
    for _ in range(6):
        dp.step()
    (rec,) = tn._double.recorder.profiles
    assert rec.schedule == {"wait": 0, "active": 2, "warmup": 1, "repeat": 1, "skip_first": 0,
                            "skip_first_wait": 0}
    assert rec.stopped and len(rec.dirs) == 1 and rec.analysed_dirs == rec.dirs
    steps = [n for n in _trace_names(rec.dirs[0]) if n.startswith("ProfilerStep#")]
    assert steps == ["ProfilerStep#5", "ProfilerStep#6"]  # named after the global step
    dp.init(str(cfg_dir))
    assert "Init dynamic profiling repeatedly" in tn._double.recorder.warning_messages()
    dp.set_state({"cur_step": 100})
    assert dp.set_state("bad") is None
    start_cfg = tmp_path / "start.json"
    start_cfg.write_text(json.dumps({**data, "prof_dir": str(tmp_path / "dp_start"), "warmup": 0, "active": 1}))
    dp.start(str(start_cfg))
    dp.step()
    assert len(tn._double.recorder.profiles) == 2 and tn._double.recorder.profiles[-1].stopped


def test_dynamic_profile_history(use, tmp_path, capsys):
    tn = use("2.3.1")  # T2: init/step only, not wrapped
    from torch_npu.profiler import dynamic_profile as dp
    assert not hasattr(dp, "start")
    with pytest.raises(TypeError):
        dp.init()
    tn = use("2.5.1")
    from torch_npu.profiler import dynamic_profile as dp
    assert dp.init() is None  # T3+: even a bad call is only logged
    assert "Call init failed. Exception:" in capsys.readouterr().out
    dp.init(str(tmp_path / "dp5"))
    exp = json.loads((tmp_path / "dp5" / "profiler_config.json").read_text())["experimental_config"]
    assert "mstx" not in exp and "host_sys" not in exp and exp["export_type"] == ["text"]


# ===================================================================== 8. npu module ===
def test_npu_submodule(use):
    tn = use("2.14.0")
    npu = tn.npu
    assert npu.is_available() and npu.device_count() == 1 and npu.current_device() == 0
    npu.set_device("npu:0")
    with pytest.raises(RuntimeError):
        npu.set_device(3)
    s = npu.current_stream()
    assert isinstance(s, npu.Stream) and isinstance(s, npu.streams.Stream) and s is npu.current_stream()
    assert s.device_index == 0 and isinstance(s.npu_stream, int)
    other = npu.Stream()
    with npu.stream(other):
        assert npu.current_stream() is other
    assert npu.synchronize() is None
    assert [c.api for c in tn._double.recorder.calls][:3] == ["npu.is_available", "npu.device_count",
                                                               "npu.current_device"]
    tn = use("2.14.0", npu_available=False)
    assert not tn.npu.is_available() and tn.npu.device_count() == 0


# ======================================================== 9. subprocesses per train (env) ===
GENERATED = textwrap.dedent('''
    # What patchkit-injected code looks like: feature-detect, keywords only, check the handler.
    import inspect, json, sys
    import torch_npu
    from torch_npu.profiler import (profile, schedule, tensorboard_trace_handler, ProfilerActivity,
                                    _ExperimentalConfig, ExportType, ProfilerLevel, AiCMetrics)
    params = inspect.signature(_ExperimentalConfig.__init__).parameters
    kw = {"profiler_level": ProfilerLevel.Level0, "export_type": ExportType.Text,
          "aic_metrics": AiCMetrics.AiCoreNone}
    kw["mstx" if "mstx" in params else "msprof_tx"] = True
    handler = tensorboard_trace_handler(sys.argv[1])
    assert handler is not None
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU],
                   schedule=schedule(wait=1, warmup=1, active=2, repeat=1), on_trace_ready=handler,
                   experimental_config=_ExperimentalConfig(**kw))
    prof.start()
    ids = []
    for _ in range(5):
        rid = torch_npu.npu.mstx.range_start("fwd")
        ids.append(rid)
        torch_npu.npu.mstx.range_end(rid)
        prof.step()
    prof.stop()
    rec = torch_npu._double.recorder
    print(json.dumps({"version": torch_npu.__version__, "train": torch_npu._double.current_train().n,
                      "dirs": rec.profile_dirs(), "ids": ids, "warnings": rec.warning_messages(),
                      "strict": torch_npu._double.is_strict()}))
''')


def _run_script(tmp_path, code, env, *args):
    script = tmp_path / "generated.py"
    script.write_text(code)
    env = {**env, "TORCH_NPU_DOUBLE_TORCH": "0"}
    for key in ("PROF_CONFIG_PATH", "PROFILER_SAMPLECONFIG", "PROFILING_MODE", "RANK"):
        env.pop(key, None)
    return subprocess.run([sys.executable, str(script), *args], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
@pytest.mark.parametrize("version", MATRIX)
def test_generated_code_in_subprocess_per_train(tmp_path, version, strict):
    proc = _run_script(tmp_path, GENERATED, npu_double_env(version, strict=strict), str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["version"] == version and res["strict"] is strict
    assert len(res["dirs"]) == 1 and FOLDER_RE.match(os.path.basename(res["dirs"][0]))
    steps = [n for n in _trace_names(res["dirs"][0]) if n.startswith("ProfilerStep#")]
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]
    live = [i for i in res["ids"] if i]
    assert len(live) == 2 and live == sorted(live) and res["ids"][0] == 0 and res["ids"][-1] == 0


def test_npu_double_env_contents():
    env = npu_double_env("2.7.1", strict=True)
    assert env["PYTHONPATH"].split(os.pathsep)[0] == DOUBLES_DIR
    assert (env["TORCH_NPU_DOUBLE_VERSION"], env["TORCH_NPU_DOUBLE_STRICT"]) == ("2.7.1", "1")
    assert npu_double_env("2.7.1")["TORCH_NPU_DOUBLE_STRICT"] == "0"
    assert os.path.isfile(os.path.join(DOUBLES_DIR, "torch_npu", "__init__.py"))


def test_legacy_train_and_strict_exit_status(tmp_path):
    proc = _run_script(tmp_path, "import torch_npu\n", npu_double_env("2.1.0"))
    assert proc.returncode != 0 and "UnsupportedTrainError" in proc.stderr
    never_stopped = textwrap.dedent('''
        from torch_npu.profiler import profile, tensorboard_trace_handler
        prof = profile(on_trace_ready=tensorboard_trace_handler("never"))
        prof.start()
    ''')
    proc = _run_script(tmp_path, never_stopped, npu_double_env("2.14.0", strict=True))
    assert proc.returncode == 3 and "never stopped" in proc.stderr
    proc = _run_script(tmp_path, never_stopped, npu_double_env("2.14.0"))
    assert proc.returncode == 0
    assert len(glob.glob(str(tmp_path / "never" / "*_ascend_pt" / "ASCEND_PROFILER_OUTPUT"))) == 2


def test_non_intrusive_dynamic_profiling_and_torch_npu_registration(tmp_path):
    pytest.importorskip("torch")
    cfg_dir = tmp_path / "dp"
    code = textwrap.dedent('''
        import json, os, sys
        import torch_npu._double as d
        d.config(register_torch_device=True)
        import torch
        import torch_npu, torch_npu.npu
        assert torch.npu.is_available() and torch.npu.synchronize() is None
        assert os.path.isfile(os.path.join(sys.argv[1], "profiler_config.json"))
        model = torch.nn.Linear(4, 4)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        def train_step():
            model(torch.ones(2, 4)).sum().backward()
            opt.step()
        train_step()
        path = os.path.join(sys.argv[1], "profiler_config.json")
        data = json.load(open(path))
        data.update(prof_dir=sys.argv[2], active=2, activities=["CPU"])
        json.dump(data, open(path, "w"))
        for _ in range(5):
            train_step()
        rec = d.recorder
        print(json.dumps({"dirs": rec.profile_dirs(), "diag": rec.diagnostics}))
    ''')
    env = {**npu_double_env("2.14.0"), "PROF_CONFIG_PATH": str(cfg_dir)}
    script = tmp_path / "non_intrusive.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script), str(cfg_dir), str(tmp_path / "out")], env=env,
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "non_intrusive_hook:register_optimizer_step_post_hook" in res["diag"]
    assert len(res["dirs"]) == 1
    assert os.path.isfile(os.path.join(res["dirs"][0], "FRAMEWORK", "double_events.json"))


# ============================================================== 10. model-based checks ===
try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # hypothesis is a dev extra; the rest of the module still runs
    given = None

if given is None:
    @pytest.mark.skip(reason="hypothesis is not installed")
    def test_state_machine_matches_transition_table():
        pass
else:
    _SCHED = st.fixed_dictionaries({
        "wait": st.integers(0, 3), "warmup": st.integers(0, 2), "active": st.integers(1, 3),
        "repeat": st.integers(0, 3), "skip_first": st.integers(0, 3), "skip_first_wait": st.integers(0, 1)})

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(params=_SCHED, steps=st.integers(0, 14))
    def test_state_machine_matches_transition_table(use, params, steps):
        """Folders created, traces handed over and folders deleted follow section 3.2 for any schedule."""
        tn = use("2.14.0")  # re-import per example: a fresh recorder and path singleton
        P, d = tn.profiler, tn._double
        actions = [_sched_sim(i, **params) for i in range(steps + 1)]
        created = ready = 0
        prev = "-"
        for cur in actions:
            if prev in "-S" and cur in "WRS":
                created += 1
            if prev == "S":
                ready += 1
            prev = cur
        last = actions[-1]
        ready += last in "RS"
        deleted = 1 if last == "W" else 0
        seen = []
        prof = P.profile(activities=[P.ProfilerActivity.NPU], schedule=P.schedule(**params),
                         on_trace_ready=seen.append)
        _run(tn, prof, steps)
        rec = d.recorder.profiles[-1]
        assert (len(rec.dirs), len(seen), len(rec.deleted_dirs)) == (created, ready, deleted)
        assert all(s is prof for s in seen)
