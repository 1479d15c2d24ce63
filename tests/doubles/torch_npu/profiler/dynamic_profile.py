"""torch_npu.profiler.dynamic_profile (T2+), simplified to run synchronously.

No monitor subprocess and no shared memory: ``init(path)`` writes
<path>/profiler_config.json (defaults of section 10) if missing and creates
<path>/log/; every ``step()`` checks the file's mtime and, when it changed
after init, builds a profile exactly like the real enable_prof:
schedule(wait=0, warmup=warmup, active=active, repeat=1, skip_first=0) and
tensorboard_trace_handler(prof_dir, analyse_flag=analyse[, async_mode]);
it stops after warmup+active steps.  ``start(config_path)`` (T3+) starts at
once; ``set_state({"cur_step": n})`` (T11+) sets the step counter.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket

from torch_npu import _double

_TRAIN = _double.freeze()
if not _TRAIN.has_dynamic_profile:
    raise ModuleNotFoundError("No module named 'torch_npu.profiler.dynamic_profile'",
                              name="torch_npu.profiler.dynamic_profile")

from torch_npu._C._profiler import ProfilerActivity  # noqa: E402
from torch_npu._double.codegen import make_function  # noqa: E402
from torch_npu._double.log import (diag, no_exception_func, print_error_msg, print_info_msg,  # noqa: E402
                                   print_warn_msg)
from torch_npu._double.recorder import register_reset  # noqa: E402

from ._path_creator import check_input_directory_path  # noqa: E402
from .experimental_config import AiCMetrics, ProfilerLevel, _ExperimentalConfig  # noqa: E402
from .profiler import profile, tensorboard_trace_handler  # noqa: E402
from .scheduler import Schedule as schedule  # noqa: E402

_MOD = __name__
__all__ = ["init", "step"] + (["start"] if _TRAIN.has_dp_start else []) + (
    ["set_state"] if _TRAIN.has_dp_set_state else [])

CONFIG_FILE = "profiler_config.json"


def default_config():
    exp = {"profiler_level": "Level0", "aic_metrics": "AiCoreNone", "l2_cache": False, "op_attr": False,
           "gc_detect_threshold": None, "data_simplification": True, "record_op_args": False,
           "export_type": ["text"] if _TRAIN.export_type_list else "text", "msprof_tx": False, "mstx": False,
           "host_sys": [], "mstx_domain_include": [], "mstx_domain_exclude": [], "sys_io": False,
           "sys_interconnection": False}
    if not _TRAIN.has_mstx_param:
        exp.pop("mstx")
    if not _TRAIN.has_host_sys:
        for key in ("host_sys", "mstx_domain_include", "mstx_domain_exclude", "sys_io", "sys_interconnection"):
            exp.pop(key)
    if not _TRAIN.has_gc_detect:
        exp.pop("gc_detect_threshold")
    cfg = {"activities": ["CPU", "NPU"], "prof_dir": "./", "analyse": False, "async_mode": False,
           "record_shapes": False, "profile_memory": False, "with_stack": False, "with_flops": False,
           "with_modules": False, "active": 1, "warmup": 0, "start_step": 0, "is_rank": False,
           "rank_list": [], "experimental_config": exp}
    if not _TRAIN.has_async_mode:
        cfg.pop("async_mode")
    return cfg


def _rank():
    raw = os.environ.get("RANK")
    return int(raw) if raw and raw.isdigit() else 0


class _ConfigContext:
    def __init__(self, data):
        acts = data.get("activities") or []
        self.activities = [getattr(ProfilerActivity, str(a).upper()) for a in acts
                           if hasattr(ProfilerActivity, str(a).upper())]
        self.prof_path = data.get("prof_dir")
        self.analyse = data.get("analyse", False) if isinstance(data.get("analyse", False), bool) else False
        self.async_mode = data.get("async_mode", False)
        for key in ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules"):
            setattr(self, key, data.get(key, False))
        active = data.get("active", 1)
        if not isinstance(active, int) or active <= 0:
            print_warn_msg("Invalid parameter active, reset it to 1.")
            active = 1
        warmup = data.get("warmup", 0)
        if not isinstance(warmup, int) or warmup < 0:
            print_warn_msg("Invalid parameter warmup, reset it to 0.")
            warmup = 0
        self.active, self.warmup = active, warmup
        start_step = data.get("start_step", 0)
        self.start_step = start_step if isinstance(start_step, int) and start_step >= -1 else 0
        self.metadata = data.get("metadata", {}) if isinstance(data.get("metadata", {}), dict) else {}
        self.rank_ok = True
        if data.get("is_rank") is True:
            ranks = data.get("rank_list") or []
            self.rank_ok = _rank() in [r for r in ranks if isinstance(r, int)]
            if self.rank_ok:
                self.analyse = False
        exp = data.get("experimental_config")
        self.experimental_config = self._experimental(exp) if exp else None

    @staticmethod
    def _experimental(exp):
        kwargs = {"profiler_level": getattr(ProfilerLevel, exp.get("profiler_level", "Level0"),
                                            exp.get("profiler_level", "Level0")),
                  "aic_metrics": getattr(AiCMetrics, exp.get("aic_metrics", "AiCoreNone"),
                                         exp.get("aic_metrics", "AiCoreNone")),
                  "l2_cache": exp.get("l2_cache", False),
                  "data_simplification": exp.get("data_simplification", True),
                  "record_op_args": exp.get("record_op_args", False),
                  "export_type": exp.get("export_type", "text")}
        optional = {"op_attr": False, "msprof_tx": False, "gc_detect_threshold": None, "mstx": False,
                    "host_sys": None, "mstx_domain_include": None, "mstx_domain_exclude": None,
                    "sys_io": False, "sys_interconnection": False}
        import inspect
        accepted = inspect.signature(_ExperimentalConfig.__init__).parameters
        for key, default in optional.items():
            if key in accepted:
                kwargs[key] = exp.get(key, default)
        if not _TRAIN.export_type_list and isinstance(kwargs["export_type"], list):
            kwargs["export_type"] = kwargs["export_type"][0] if kwargs["export_type"] else "text"
        return _ExperimentalConfig(**kwargs)


class _DynamicProfile:
    def __init__(self):
        self.path = None
        self.config_path = None
        self.cur_mtime = None
        self.prof = None
        self.pending = None
        self.step_num = 0
        self.cur_step = 0
        self.repeat_init = False

    def init(self, path):
        if self.repeat_init:
            print_warn_msg("Init dynamic profiling repeatedly")
            return
        os.makedirs(path, exist_ok=True)
        os.makedirs(os.path.join(path, "log"), exist_ok=True)
        self.path = path
        self.config_path = os.path.join(path, CONFIG_FILE)
        if not os.path.exists(self.config_path):
            with open(self.config_path, "w", encoding="utf-8") as fh:
                json.dump(default_config(), fh, indent=4)
        self.cur_mtime = self._stamp()
        log_name = f"dp_{socket.gethostname()}_{os.getpid()}_rank_{_rank()}.log"
        with open(os.path.join(path, "log", log_name), "a", encoding="utf-8") as fh:
            fh.write("dynamic profiler initialised (torch_npu double, synchronous)\n")
        self.repeat_init = True

    def _stamp(self):
        """mtime plus content digest: a rewrite within one mtime tick still counts as a change."""
        with open(self.config_path, "rb") as fh:
            digest = hashlib.sha1(fh.read()).hexdigest()
        return (os.stat(self.config_path).st_mtime_ns, digest)

    def _poll(self):
        if not self.config_path or not os.path.exists(self.config_path):
            return
        mtime = self._stamp()
        if mtime == self.cur_mtime:
            return
        self.cur_mtime = mtime
        try:
            with open(self.config_path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            print_error_msg(f"Failed to read config from : {self.config_path}. Please check the config file. ")
            return
        ctx = _ConfigContext(data)
        if not ctx.rank_ok:
            diag("dynamic_profile_rank_not_selected")
            return
        self.pending = ctx
        diag("dynamic_profile_config_changed")

    def step(self):
        self.cur_step += 1
        if self.prof is not None:
            self.prof.step()
            self.step_num -= 1
            if self.step_num == 0:
                self.prof.stop()
                self.prof = None
                diag(f"dynamic_profile_stopped_at:{self.cur_step}")
            return
        self._poll()
        ctx = self.pending
        if ctx is not None and (ctx.start_step in (-1, 0) or self.cur_step >= ctx.start_step):
            self.pending = None
            self.enable_prof(ctx)

    def start(self, config_path):
        if self.prof is not None:
            print_error_msg("Profiler already started. Cannot call start interface while the profiler is active. ")
            return
        path = config_path if config_path else self.config_path
        if not path:
            print_error_msg("The config path is empty, please call init or pass config_path.")
            return
        print_info_msg(f"The start interface profiler enable config path is set to {path}")
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            print_error_msg(f"Failed to read config from : {path}. Please check the config file. ")
            return
        if not data:
            print_error_msg(f"The config data is empty from: {path}. Please check the config file. ")
            return
        self.enable_prof(_ConfigContext(data))

    def set_state(self, state_step):
        if not isinstance(state_step, dict) or not isinstance(state_step.get("cur_step"), int) \
                or isinstance(state_step.get("cur_step"), bool) or state_step["cur_step"] < 0:
            print_warn_msg("Invalid parameter state_step, cur_step must be a non-negative int.")
            return
        self.cur_step = state_step["cur_step"]

    def enable_prof(self, ctx):
        handler_kwargs = {"analyse_flag": ctx.analyse}
        if _TRAIN.has_async_mode:
            handler_kwargs["async_mode"] = ctx.async_mode
        self.prof = profile(
            activities=ctx.activities,
            schedule=schedule(wait=0, warmup=ctx.warmup, active=ctx.active, repeat=1, skip_first=0),
            on_trace_ready=tensorboard_trace_handler(ctx.prof_path, **handler_kwargs),
            record_shapes=ctx.record_shapes, profile_memory=ctx.profile_memory, with_stack=ctx.with_stack,
            with_flops=ctx.with_flops, with_modules=ctx.with_modules,
            experimental_config=ctx.experimental_config)
        self.prof._double_step_offset = self.cur_step
        self.prof.start()
        for key, value in ctx.metadata.items():
            self.prof.add_metadata_json(str(key), json.dumps(value))
        self.step_num = ctx.warmup + ctx.active
        diag(f"dynamic_profile_started_at:{self.cur_step}")


_DP = _DynamicProfile()


@register_reset
def _reset_dp():
    if _DP.prof is not None:
        try:
            _DP.prof._double_abandon()
        except Exception:  # noqa: BLE001
            pass
    _DP.__init__()


def _init_impl(b):
    path = b["path"]
    try:
        check_input_directory_path(os.path.realpath(path))
    except RuntimeError:
        print_error_msg(f"The path '{path}' is invalid, and profiler will not be enabled.")
        return None
    _DP.init(os.path.abspath(path))
    return None


def _public(name, params, impl):
    fn = make_function(name, params, impl, module=_MOD)
    if _TRAIN.no_exception_wrapping:
        fn = no_exception_func()(fn)
    return fn


init = _public("init", "path", _init_impl)
step = _public("step", "", lambda b: _DP.step())
if _TRAIN.has_dp_start:
    start = _public("start", "config_path=None", lambda b: _DP.start(b["config_path"]))
if _TRAIN.has_dp_set_state:
    set_state = _public("set_state", "state_step", lambda b: _DP.set_state(b["state_step"]))


def _step_from_optimizer_hook(*_args, **_kwargs):
    step()
