"""torch_npu.profiler.profiler: profile, _KinetoProfile, tensorboard_trace_handler, analyse.

Constructors are keyword-only and train-exact (TypeError for unknown or positional
arguments); start/stop/step/__enter__/__exit__/__del__, the exporters,
tensorboard_trace_handler and analyse swallow exceptions from T3 on and print
``[...] [ERROR] [pid] profiler.py: Call <name> failed. Exception: <msg>``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
import uuid
from sys import getsizeof

from torch_npu import _double
from torch_npu._C._profiler import ProfilerActivity
from torch_npu._double import runtime
from torch_npu._double.codegen import make_function, recorded
from torch_npu._double.log import (diag, no_exception_func, print_error_msg, print_warn_msg)
from torch_npu._double.recorder import ProfileRecord, recorder, register_reset
from torch_npu.utils._error_code import ErrCode, prof_error

from . import _analysis
from ._action_controller import ProfActionController
from ._backend import get_torch
from ._path_creator import _path_problem, check_input_directory_path, path_creator, realpath
from ._prof_interface import _ProfInterface, supported_activities
from .experimental_config import _ExperimentalConfig
from .scheduler import ProfilerAction, Schedule, _default_schedule_fn

_TRAIN = _double.freeze()
_MOD = __name__
DEFAULT_PROCESS_NUMBER = (os.cpu_count() or 2) // 2
METRIC_CPU_TIME = "self_cpu_time_total"
METRIC_NPU_TIME = "self_npu_time_total"

__all__ = ["supported_activities", "analyse", "tensorboard_trace_handler", "profile", "_KinetoProfile"]


def _wrap(func, **kw):
    """no_exception_func from T3 on; before T3 exceptions propagate."""
    if _TRAIN.no_exception_wrapping:
        return no_exception_func(**kw)(func)
    return func


def _api(api, **kw):
    def decorator(func):
        return _wrap(recorded(api)(func), **kw)
    return decorator


# ---------------------------------------------------- msprof environment ---
_MSPROF = {"checked": False, "ok": True}


@register_reset
def _reset_msprof():
    _MSPROF.update(checked=False, ok=True)


def _profiler_api_effective():
    """PROFILER_SAMPLECONFIG (msprof CLI) or PROFILING_MODE turn the profiler API into a no-op."""
    if not _MSPROF["checked"]:
        _MSPROF["checked"] = True
        static_env = os.getenv("PROFILER_SAMPLECONFIG")
        dynamic_env = os.getenv("PROFILING_MODE")
        if static_env:
            print_warn_msg("If performance data is collected using the 'msprof' tool. "
                           "torch_npu profiler api is not effective.")
        if dynamic_env:
            print_warn_msg("Environment variable 'PROFILING_MODE' is set. torch_npu profiler api is not "
                           "effective. Please execute 'unset PROFILING_MODE'.")
        _MSPROF["ok"] = not (static_env or dynamic_env)
        if not _MSPROF["ok"]:
            diag("profiler_disabled_by_msprof_env")
    return _MSPROF["ok"]


# ------------------------------------------------------------ step marker ---
class _StepMarker:
    """record_function("ProfilerStep#<n>") (+ an mstx range on current_stream() from T11)."""

    def __init__(self, prof, name):
        self.prof = prof
        self.name = name
        self.rf = None
        self.t0 = 0
        self.mstx_id = 0

    def __enter__(self):
        torch = get_torch()
        if torch is not None:
            self.rf = torch.autograd.profiler.record_function(self.name)
            self.rf.__enter__()
        self.t0 = time.perf_counter_ns()
        if _TRAIN.step_mstx_range:
            from torch_npu.npu import current_stream
            from torch_npu.npu.mstx import _internal_range_start
            self.mstx_id = _internal_range_start(self.name, current_stream())
        return self

    def __exit__(self, *exc):
        if self.mstx_id:
            from torch_npu.npu.mstx import _internal_range_end
            _internal_range_end(self.mstx_id)
        if self.rf is not None:
            self.rf.__exit__(None, None, None)
        backend = self.prof.prof_if.backend
        if backend is not None and backend.kind == "synthetic" and backend.state == "running":
            backend.add_span(self.name, self.t0, time.perf_counter_ns())
        return False


# ---------------------------------------------------------- _KinetoProfile ---
class _KinetoProfile:
    """Recording without a schedule: start() .. stop() in export-only mode."""

    _double_kind = "_KinetoProfile"

    def _double_setup(self, b, schedule=None, activities=None):
        self.metadata = {}
        rec = ProfileRecord(self._double_kind, b)
        recorder.profiles.append(rec)
        self._double_record = rec
        self._double_started = False
        self._double_step_offset = 0
        self.prof_if = _ProfInterface(
            activities=activities if activities is not None else b["activities"],
            record_shapes=b["record_shapes"], profile_memory=b["profile_memory"], with_stack=b["with_stack"],
            with_flops=b["with_flops"], with_modules=b["with_modules"],
            experimental_config=b["experimental_config"], schedule=schedule, metadata=self.metadata,
            record=rec, owner=self)
        rec.activities = [str(a) for a in sorted(self.prof_if.activities, key=int)]
        rec.experimental_config = dict(self.prof_if.experimental_config.__dict__)
        self.max_meta_size = 50 * 1024
        self.max_str_len = 4096
        if _TRAIN.has_custom_trace_id:
            self.custom_trace_id_callback = b.get("custom_trace_id_callback")

    def _kineto_init(self, b):
        self._double_setup(b)
        self.stopped = False

    # -- hooks used by the double itself ------------------------------------
    def _double_new_cycle(self):
        if _TRAIN.has_custom_trace_id:
            cb = getattr(self, "custom_trace_id_callback", None)
            self.prof_if.trace_id = str(cb()) if cb else uuid.uuid4().hex
        else:
            self.prof_if.trace_id = None

    def _double_mark_started(self):
        self._double_started = True
        self._double_record.started = True
        runtime.live_profiles.add(self)

    def _double_mark_stopped(self):
        self._double_record.stopped = True
        runtime.live_profiles.discard(self)

    def _double_needs_stop(self):
        return self._double_started and not self._double_record.stopped

    def _double_abandon(self):
        """recorder.reset(): stop native collection without writing anything."""
        backend = getattr(self.prof_if, "backend", None)
        if backend is not None:
            backend.force_stop()
        self.prof_if._disable_mstx()
        self._double_record.stopped = True
        self.stopped = True

    def _double_gc_stop(self):
        if _TRAIN.no_exception_wrapping and isinstance(self, profile):
            self.stop()  # profile.__del__ (T3+) flushes and analyses
        else:
            # _KinetoProfile.__del__ and the T1-T2 profile only clean up export-only data: the
            # native collection would keep running.  The double stops it quietly.
            diag("gc_without_stop_left_running")
            self._double_abandon()

    def _double_gc(self):
        if self._double_needs_stop():
            diag("gc_without_stop")
            try:
                self._double_gc_stop()
            finally:
                if _double.is_strict():  # reported at the next API call (a finaliser cannot raise)
                    recorder.defer_strict("a torch_npu profile was garbage-collected without stop(); the "
                                          "real one flushes (and may analyse) at an arbitrary point")
        for path in getattr(self._double_record, "export_only_dirs", []):
            if os.path.isdir(path):
                path_creator().delete_dir(path)
                self._double_record.deleted_dirs.append(path)

    # -- public API -------------------------------------------------------------
    def __del__(self):
        try:
            self._double_gc()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass

    @_api("_KinetoProfile.start")
    def start(self):
        if not _profiler_api_effective():
            return
        path_creator().init(export_only_mode=True)
        self._double_mark_started()
        self.prof_if.init_trace()
        self.prof_if.start_trace()

    @_api("_KinetoProfile.stop")
    def stop(self):
        if not _profiler_api_effective():
            return
        self.prof_if.stop_trace()
        self.prof_if.finalize_trace()
        self.stopped = True
        self._double_mark_stopped()

    @_api("_KinetoProfile.export_chrome_trace")
    def export_chrome_trace(self, output_path):
        output_path = realpath(output_path)
        problem = _path_problem(output_path) if not os.path.isdir(output_path) else \
            f"Invalid input path is a directory path: {output_path}"
        if problem:
            check_input_directory_path(output_path)
        if not os.path.basename(output_path).endswith(".json"):
            raise RuntimeError("Invalid parameter output_path, which must be a json file." + prof_error(ErrCode.VALUE))
        if not self.prof_if.prof_path:
            print_warn_msg("Invalid profiling path.")
            return
        events = _analysis._load_raw(self.prof_if.prof_path).get("traceEvents", [])
        with open(output_path, "w", encoding="utf-8") as fh:
            json.dump({"traceEvents": events}, fh)

    def _check_str_valid(self, input_str):
        return len(input_str) <= self.max_str_len

    def _metadata_precheck(self, key, value):
        if not isinstance(key, str) or not isinstance(value, str):
            print_warn_msg("The key and value of metadata must be string. Skip this metadata.")
            return False
        if not self._check_str_valid(key) or not self._check_str_valid(value):
            print_warn_msg("Invalid input key or value. Skip this metadata.")
            return False
        return True

    @_api("_KinetoProfile.add_metadata")
    def add_metadata(self, key, value):
        if not self._metadata_precheck(key, value):
            return
        if getsizeof(self.metadata) + getsizeof(key) + getsizeof(value) < self.max_meta_size:
            if key in self.metadata:
                print_warn_msg(f"{key} is already saved as metadata, override it.")
            self.metadata[key] = value
        else:
            print_warn_msg("Too many metadata added. Skip this metadata")

    @_api("_KinetoProfile.add_metadata_json")
    def add_metadata_json(self, key, value):
        if not self._metadata_precheck(key, value):
            return
        if getsizeof(self.metadata) + getsizeof(key) + getsizeof(value) < self.max_meta_size:
            try:
                if key in self.metadata:
                    print_warn_msg(f"{key} is already saved as metadata, override it.")
                self.metadata[key] = json.loads(value)
            except ValueError:
                print_warn_msg("The metadata value must be json format string. Skip this metadata")
        else:
            print_warn_msg("Too many metadata added. Skip this metadata")

    @_api("_KinetoProfile.export_stacks")
    def export_stacks(self, output_path, metric=METRIC_CPU_TIME):
        output_path = realpath(output_path)
        if not self.prof_if.with_stack:
            print_warn_msg("Function export_stacks() requires with_stack=True.")
            return
        if metric not in (METRIC_CPU_TIME, METRIC_NPU_TIME):
            print_warn_msg("Metric should be self_cpu_time_total or self_npu_time_total."
                           "Here it is presumed to be self_cpu_time_total.")
            metric = METRIC_CPU_TIME
        if not self.prof_if.prof_path:
            print_warn_msg("Invalid profiling path.")
            return
        backend = self.prof_if.backend
        if backend is not None and backend.kineto is not None and metric == METRIC_CPU_TIME:
            backend.kineto.export_stacks(output_path, metric)
        else:
            open(output_path, "w", encoding="utf-8").close()
            diag("export_stacks_empty")

    def _export_memory_timeline(self, output_path, device=None):
        missing = []
        if not self.prof_if.record_shapes:
            missing.append("record_shapes=True")
        if not self.prof_if.profile_memory:
            missing.append("profile_memory=True")
        if not (self.prof_if.with_stack or self.prof_if.with_modules):
            missing.append("with_stack=True or with_modules=True")
        if missing:
            print_warn_msg(f"{', '.join(missing)} required for memory profiling.")
            return
        if not self.prof_if.prof_path:
            print_warn_msg("Invalid profiling path.")
            return
        with open(output_path, "w", encoding="utf-8") as fh:
            json.dump([[], []], fh)
        diag("export_memory_timeline_empty")


if _TRAIN.has_export_memory_timeline:
    _KinetoProfile.export_memory_timeline = _api("_KinetoProfile.export_memory_timeline")(
        _KinetoProfile._export_memory_timeline)
if _TRAIN.no_exception_wrapping:
    _KinetoProfile.__del__ = no_exception_func()(_KinetoProfile.__del__)

_COMMON_KW = ("record_shapes=False, profile_memory=False, with_stack=False, with_flops=False, "
              "with_modules=False, experimental_config=None")
_KINETO_PARAMS = "self, *, activities=None, " + _COMMON_KW
if _TRAIN.has_custom_trace_id:
    _KINETO_PARAMS += ", custom_trace_id_callback=None"
_KinetoProfile.__init__ = make_function("_KinetoProfile.__init__", _KINETO_PARAMS, _KinetoProfile._kineto_init,
                                        module=_MOD, pass_first=True)


# --------------------------------------------------- tensorboard handler ---
def _handler_impl(b):
    path_creator().init(worker_name=b["worker_name"], dir_name=b["dir_name"])
    analyse_flag = b.get("analyse_flag", True)
    async_mode = b.get("async_mode", False)
    if _TRAIN.has_analyse_flag and not isinstance(analyse_flag, bool):
        print_warn_msg("analyse_flag is not bool, set by default.", reset=True)
        analyse_flag = True
    if _TRAIN.has_async_mode and not isinstance(async_mode, bool):
        print_warn_msg("async_mode is not bool, set by default.", reset=True)
        async_mode = False

    def handler_fn(prof_inst) -> None:
        if not analyse_flag:
            return
        if _TRAIN.trace_ready_gets_profile:
            if _TRAIN.has_async_mode:
                prof_inst.prof_if.analyse(async_mode=async_mode)
            else:
                prof_inst.prof_if.analyse()
        else:
            prof_inst.analyse()

    handler_fn.double_options = {"dir_name": b["dir_name"], "worker_name": b["worker_name"],
                                 "analyse_flag": analyse_flag, "async_mode": async_mode}
    return handler_fn


_HANDLER_PARAMS = "dir_name=None, worker_name=None"
if _TRAIN.has_analyse_flag:
    _HANDLER_PARAMS += ", analyse_flag=True"
if _TRAIN.has_async_mode:
    _HANDLER_PARAMS += ", async_mode=False"
tensorboard_trace_handler = _wrap(
    make_function("tensorboard_trace_handler", _HANDLER_PARAMS, _handler_impl, module=_MOD),
    strict_hazard="tensorboard_trace_handler returned None (an error was swallowed); the profile would run "
                  "in export-only mode and its data would be discarded")


# ----------------------------------------------------------------- profile ---
class profile(_KinetoProfile):  # noqa: N801 - the real class name
    """torch_npu.profiler.profile: schedule-driven NPU/CPU profiling (see the module docstring)."""

    _double_kind = "profile"

    def _profile_init(self, b):
        activities = b["activities"]
        activities_set = set(activities) if activities else supported_activities()
        schedule = b["schedule"]
        if schedule and callable(schedule):
            self.schedule = schedule
            self.record_steps = True
        else:
            if schedule:
                print_warn_msg("schedule is not Callable, set by default.", reset=True)
            self.schedule = _default_schedule_fn
            self.record_steps = False
        on_trace_ready = b["on_trace_ready"]
        if on_trace_ready and not callable(on_trace_ready):
            print_warn_msg("on_trace_ready is not Callable, set by default.", reset=True)
            on_trace_ready = None
        self._double_setup(b, schedule=self.schedule, activities=activities_set)
        rec = self._double_record
        rec.schedule = dict(self.schedule.__dict__) if isinstance(self.schedule, Schedule) else None
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self.step_rec_fn = None
        if b["use_cuda"] is not None:
            print_warn_msg("This is npu environment, use_cuda is invalid")
        if _TRAIN.has_execution_trace_observer:
            self.execution_trace_observer = b["execution_trace_observer"]
        self.stopped = False
        self.action_controller = ProfActionController(self, self.prof_if, self.on_trace_ready, rec)

    def _enter_step(self):
        self.step_rec_fn = _StepMarker(self, "ProfilerStep#" + str(self.step_num + self._double_step_offset))
        self.step_rec_fn.__enter__()

    def _exit_step(self):
        if self.record_steps and self.step_rec_fn:
            marker, self.step_rec_fn = self.step_rec_fn, None
            marker.__exit__(None, None, None)

    @_api("profile.__enter__")
    def __enter__(self):
        self.start()
        return self

    @_api("profile.__exit__")
    def __exit__(self, exe_type, exe_val, exc_tb):
        self.stop()

    @_api("profile.start")
    def start(self):
        if not _profiler_api_effective():
            return
        self.stopped = False
        self._double_mark_started()
        if not self.on_trace_ready:
            path_creator().init(export_only_mode=True)
        self.action_controller.transit_action(ProfilerAction.NONE, self.current_action)
        if self.record_steps:
            self._enter_step()

    @_api("profile.stop")
    def stop(self):
        if not _profiler_api_effective():
            return
        self._exit_step()
        self.action_controller.transit_action(self.current_action, None)
        self.stopped = True
        self._double_mark_stopped()

    @_api("profile.step")
    def step(self):
        if not _profiler_api_effective():
            return
        if self.stopped:
            print_warn_msg("Profiler is stopped, step takes no effect!")
            return
        self._exit_step()
        prev_action = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self.action_controller.transit_action(prev_action, self.current_action)
        if self.record_steps:
            self._enter_step()

    def _set_custom_trace_id_callback(self, callback):
        self.custom_trace_id_callback = callback

    def _get_trace_id(self):
        return self.prof_if.trace_id

    def __del__(self):
        try:
            self._double_gc()
        except Exception:  # noqa: BLE001
            pass


if _TRAIN.no_exception_wrapping:
    profile.__del__ = no_exception_func()(profile.__del__)
else:  # before T3 only _KinetoProfile.__del__ existed (export-only clean-up)
    profile.__del__ = _KinetoProfile.__del__

if _TRAIN.has_custom_trace_id:
    profile.set_custom_trace_id_callback = recorded("profile.set_custom_trace_id_callback")(
        profile._set_custom_trace_id_callback)
    profile.get_trace_id = recorded("profile.get_trace_id")(profile._get_trace_id)

if _TRAIN.has_child_thread:
    def _enable_child(cls, b):
        diag("enable_profiler_in_child_thread")
        cls._double_child_thread = dict(b)

    def _disable_child(cls, b):
        diag("disable_profiler_in_child_thread")
        cls._double_child_thread = None

    profile.enable_profiler_in_child_thread = classmethod(_wrap(make_function(
        "profile.enable_profiler_in_child_thread",
        "cls, record_shapes=False, profile_memory=False, with_stack=False, with_flops=False, with_modules=False",
        _enable_child, module=_MOD, pass_first=True)))
    profile.disable_profiler_in_child_thread = classmethod(_wrap(make_function(
        "profile.disable_profiler_in_child_thread", "cls", _disable_child, module=_MOD, pass_first=True)))

_PROFILE_PARAMS = "self, *, activities=None, schedule=None, on_trace_ready=None, " + _COMMON_KW
if _TRAIN.has_execution_trace_observer:
    _PROFILE_PARAMS += ", execution_trace_observer=None"
if _TRAIN.has_custom_trace_id:
    _PROFILE_PARAMS += ", custom_trace_id_callback=None"
_PROFILE_PARAMS += ", use_cuda=None"
profile.__init__ = make_function("profile.__init__", _PROFILE_PARAMS, profile._profile_init,
                                 module=_MOD, pass_first=True)


# ----------------------------------------------------------------- analyse ---
def _valid_export_type(export_type):
    allowed = ("text", "db")
    if isinstance(export_type, str):
        return export_type in allowed
    if isinstance(export_type, list):
        return bool(export_type) and all(isinstance(e, str) and e in allowed for e in export_type)
    return False


def _analyse_impl(b):
    profiler_path = b["profiler_path"]
    max_process_number = b.get("max_process_number", DEFAULT_PROCESS_NUMBER)
    export_type = b.get("export_type")
    if not isinstance(max_process_number, int) or max_process_number <= 0:
        max_process_number = DEFAULT_PROCESS_NUMBER
        print_warn_msg("Invalid max_process_number, reset it to default!", reset=True)
    if max_process_number > (os.cpu_count() or 1):
        max_process_number = os.cpu_count() or 1
        print_warn_msg("max_process_number exceeds the number of cpu cores, reset it to the number of cpu cores!",
                       reset=True)
    if export_type is not None and not _valid_export_type(export_type):
        print_warn_msg(f"Invalid parameter export_type: {export_type}, reset it to None.", reset=True)
        export_type = None
    if multiprocessing.current_process().daemon:
        print_error_msg("Offline analysis can not be executed in a daemon process.")
        return None
    diag("analyse_would_set_start_method_fork")
    path = realpath(profiler_path)
    if not os.path.exists(path):
        raise RuntimeError(f"The path does not exist: {path}")
    if _analysis.is_prof_dir(path):
        targets = [path]
    else:
        targets = [os.path.join(path, n) for n in sorted(os.listdir(path))
                   if _analysis.is_prof_dir(os.path.join(path, n))]
    for target in targets:
        _analysis.analyse_prof_dir(target, export_type)
    return None


_ANALYSE_PARAMS = "profiler_path"
if _TRAIN.n >= 1:
    _ANALYSE_PARAMS += ", max_process_number=DEFAULT_PROCESS_NUMBER"
if _TRAIN.analyse_has_export_type:
    _ANALYSE_PARAMS += ", export_type=None"
analyse = _wrap(make_function("analyse", _ANALYSE_PARAMS, _analyse_impl, module=_MOD,
                              namespace={"DEFAULT_PROCESS_NUMBER": DEFAULT_PROCESS_NUMBER}))
