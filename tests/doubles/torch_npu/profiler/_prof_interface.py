"""_ProfInterface: per-profile trace actions (init/warmup/start/stop/finalize/analyse)."""

from __future__ import annotations

import json
import os
import time
import weakref

from torch_npu import _double
from torch_npu._C._profiler import ProfilerActivity, _supported_npu_activities
from torch_npu._double import runtime
from torch_npu._double.log import diag, print_warn_msg
from torch_npu._double.recorder import ErrorRecord, recorder

from . import _analysis
from ._backend import RAW_EVENTS_FILE, TraceBackend
from ._path_creator import path_creator
from .experimental_config import _ExperimentalConfig

_TRAIN = _double.freeze()


def supported_activities():
    return _supported_npu_activities()


class _ProfInterface:
    def __init__(self, activities=None, record_shapes=False, profile_memory=False, with_stack=False,
                 with_flops=False, with_modules=False, experimental_config=None, schedule=None,
                 metadata=None, record=None, owner=None):
        self.prof_path = ""
        self.syscnt_enable = False
        self.freq = 100
        self.start_cnt = 0
        self.start_monotonic = 0
        self.activities = set(activities) if activities else supported_activities()
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        if experimental_config is None:
            experimental_config = _ExperimentalConfig()
        self.experimental_config = experimental_config
        self.schedule = schedule
        self.metadata = metadata if metadata is not None else {}
        self.record = record
        # weak: the native state of a running profiler must not keep the profile object alive
        self._owner = weakref.ref(owner) if owner is not None else None
        self.backend = None
        self.trace_id = None
        self._check_params()
        if ProfilerActivity.NPU in self.activities and self.experimental_config._tx():
            runtime.mstx_state.ever_configured = True

    # --------------------------------------------------------- validation ---
    def _check_params(self):
        for activity in self.activities:
            if activity in supported_activities():
                continue
            print_warn_msg("Invalid activities, only CPU and NPU are supported, reset it to default.", reset=True)
            self.activities = supported_activities()
            break
        for name in ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules"):
            if not isinstance(getattr(self, name), bool):
                print_warn_msg(f"Parameter {name} is of boolean type, reset it to False.", reset=True)
                setattr(self, name, False)
        if not isinstance(self.experimental_config, _ExperimentalConfig):
            print_warn_msg("Parameter experimental_config is an instance of _ExperimentalConfig, "
                           "reset it to default.", reset=True)
            self.experimental_config = _ExperimentalConfig()
        if ProfilerActivity.NPU not in self.activities and self.experimental_config is not None:
            print_warn_msg("Experimental config will not be used while ProfilerActivity.NPU is not set.")

    # ------------------------------------------------------- trace actions ---
    def init_trace(self):
        self.prof_path = path_creator().create_prof_dir()
        os.makedirs(os.path.join(self.prof_path, "FRAMEWORK"), exist_ok=True)
        os.makedirs(os.path.join(self.prof_path, "logs"), exist_ok=True)
        self.backend = TraceBackend(self)
        if self.record is not None:
            self.record.dirs.append(self.prof_path)
            if path_creator().export_only_mode:
                self.record.export_only_dirs.append(self.prof_path)
        owner = self._owner() if self._owner is not None else None
        if owner is not None:
            owner._double_new_cycle()

    def warmup_trace(self):
        if self.backend is not None:
            self.backend.warmup()

    def start_trace(self):
        if self.backend is None:
            raise RuntimeError("Profiler is not initialized: init_trace was not called.")
        self.start_cnt = time.perf_counter_ns()
        self.start_monotonic = time.monotonic_ns()
        self.backend.start()
        if self.record is not None:
            self.record.backend = self.backend.kind
        if self.backend.state == "running":
            self._enable_mstx()

    def _enable_mstx(self):
        cfg = self.experimental_config
        if ProfilerActivity.NPU in self.activities and cfg._tx():
            st = runtime.mstx_state
            st.enabled = True
            st.owner = self
            st.include = list(getattr(cfg, "_mstx_domain_include", []) or [])
            st.exclude = list(getattr(cfg, "_mstx_domain_exclude", []) or [])

    def _disable_mstx(self):
        st = runtime.mstx_state
        if st.owner is self:
            st.enabled = False
            st.owner = None
            st.include, st.exclude = [], []

    def stop_trace(self):
        self._disable_mstx()
        if self.backend is None:
            diag("stop_while_not_running")
            return
        self.backend.stop()

    def finalize_trace(self):
        if not self.prof_path:
            raise RuntimeError("Invalid profiling path.")
        self._disable_mstx()
        if self.backend is not None and self.backend.state in ("idle", "warmup"):
            self.backend.state = "stopped"
        self._dump_profiler_info()
        self._dump_metadata()
        raw = os.path.join(self.prof_path, "FRAMEWORK", RAW_EVENTS_FILE)
        if self.backend is not None:
            self.backend.export_raw(raw)
        path_creator().is_prof_inited = False

    def delete_prof_dir(self):
        if self.prof_path and os.path.isdir(self.prof_path):
            path_creator().delete_dir(self.prof_path)
            if self.record is not None:
                self.record.deleted_dirs.append(self.prof_path)

    def analyse(self, analysis_type="tensorboard_trace_handler", output_path=None, async_mode=False, **kwargs):
        """Online analysis (synchronous in the double; async_mode is only recorded)."""
        if async_mode:
            diag("analyse_async_mode_requested")
        try:
            out = _analysis.analyse_prof_dir(self.prof_path)
        except Exception as err:  # noqa: BLE001 - the real one only warns
            recorder.errors.append(ErrorRecord("_ProfInterface.analyse", type(err).__name__, str(err)))
            print_warn_msg("Profiling data parsing failed.")
            return None
        if self.record is not None:
            self.record.analysed_dirs.append(self.prof_path)
        return out

    # -------------------------------------------------------------- files ---
    def _rank(self):
        rank = os.environ.get("RANK")
        if rank not in (None, ""):
            return rank
        torch = None
        try:
            from ._backend import get_torch
            torch = get_torch()
        except Exception:  # noqa: BLE001
            torch = None
        if torch is not None:
            try:
                if torch.distributed.is_available() and torch.distributed.is_initialized():
                    return str(torch.distributed.get_rank())
            except Exception:  # noqa: BLE001
                pass
        return None

    def _dump_profiler_info(self):
        def obj_cfg(obj):
            if not obj:
                return None
            return dict(getattr(obj, "__dict__", {}))

        common = {"activities": [str(a) for a in sorted(self.activities, key=int)],
                  "schedule": obj_cfg(self.schedule),
                  "record_shapes": self.record_shapes, "profile_memory": self.profile_memory,
                  "with_stack": self.with_stack, "with_flops": self.with_flops,
                  "with_modules": self.with_modules}
        total = {
            "config": {"common_config": common, "experimental_config": obj_cfg(self.experimental_config)},
            "start_info": {"syscnt_enable": self.syscnt_enable, "freq": self.freq,
                           "start_cnt": self.start_cnt, "start_monotonic": self.start_monotonic},
            "end_info": {"collectionTimeEnd": time.time_ns(), "MonotonicTimeEnd": time.monotonic_ns()},
            "torch_npu_version": _TRAIN.version,
            "cann_version": "double",
        }
        rank = self._rank()
        name = "profiler_info.json"
        if rank is not None:
            total["rank_id"] = int(rank) if str(rank).isdigit() else rank
            name = f"profiler_info_{rank}.json"
        with open(os.path.join(self.prof_path, name), "w", encoding="utf-8") as fh:
            json.dump(total, fh, indent=4, default=str)

    def _dump_metadata(self):
        meta = dict(self.metadata)
        if self.trace_id is not None:
            meta.setdefault("trace_id", self.trace_id)
        if not meta:
            return
        with open(os.path.join(self.prof_path, "profiler_metadata.json"), "w", encoding="utf-8") as fh:
            json.dump(meta, fh, indent=4, default=str)
        self.metadata.clear()
