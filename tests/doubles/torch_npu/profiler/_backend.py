"""Event collection behind the double: torch.profiler (CPU) when available, else synthetic.

With torch importable and ProfilerActivity.CPU requested, a
``torch.profiler._KinetoProfile(activities=[CPU])`` records real host events
(ProfilerStep#N, aten ops, mstx mirrors) that end up in FRAMEWORK/ and in
trace_view.json.  Otherwise the double writes synthetic ProfilerStep#N spans and
mstx events timed with time.perf_counter_ns().
"""

from __future__ import annotations

import json
import os
import threading
import time

from torch_npu import _double
from torch_npu._C._profiler import ProfilerActivity
from torch_npu._double import runtime
from torch_npu._double.log import diag, hazard

RAW_EVENTS_FILE = "double_events.json"
_TORCH = {"checked": False, "module": None}


def get_torch():
    """torch if the double may use it (config torch_backend), else None."""
    setting = _double.get("torch_backend")
    if setting is False:
        return None
    if not _TORCH["checked"]:
        _TORCH["checked"] = True
        try:
            import torch
            import torch.profiler  # noqa: F401
            _TORCH["module"] = torch
        except Exception:  # noqa: BLE001
            _TORCH["module"] = None
        if setting is True and _TORCH["module"] is None:
            raise RuntimeError("torch_npu double: config(torch_backend=True) but torch cannot be imported")
    return _TORCH["module"]


def _foreign_torch_profiler_running(torch):
    try:
        return bool(torch._C._autograd._profiler_enabled())  # thread-local, like PROFILER_STATE
    except Exception:  # noqa: BLE001
        return False


class TraceBackend:
    def __init__(self, prof_if):
        self.prof_if = prof_if
        self.kind = None            # "torch" | "synthetic"
        self.state = "idle"         # idle -> warmup -> running -> stopped | blocked
        self.kineto = None
        self.spans = []             # synthetic (name, start_ns, end_ns, tid)
        self.mstx_events = []       # (kind, message, domain, has_stream, t_ns, tid)
        self._t0 = time.perf_counter_ns()
        self._epoch0 = time.time_ns()

    # ------------------------------------------------------------ control ---
    def warmup(self):
        self.state = "warmup"

    def start(self):
        other = runtime.active_backend()
        if other is not None and other is not self and other.state == "running":
            self.state = "blocked"
            hazard("a second torch_npu profiler was started while another one runs on this thread; "
                   "the real one logs 'Profiler is already enabled.' to the CANN plog only and collects "
                   "nothing", diagnostic="already_enabled")
            return
        torch = get_torch()
        want_torch = torch is not None and ProfilerActivity.CPU in self.prof_if.activities
        if want_torch and _foreign_torch_profiler_running(torch):
            self.state = "blocked"
            hazard("torch.profiler is already running on this thread; the torch_npu profiler "
                   "silently collects nothing", diagnostic="already_enabled")
            return
        if want_torch:
            pi = self.prof_if
            try:
                kineto = torch.profiler._KinetoProfile(
                    activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=pi.record_shapes,
                    profile_memory=pi.profile_memory, with_stack=pi.with_stack, with_flops=pi.with_flops,
                    with_modules=pi.with_modules)
                kineto.prepare_trace()
                kineto.start_trace()
            except RuntimeError as err:
                if "already enabled" in str(err):
                    self.state = "blocked"
                    hazard("torch reported 'Profiler is already enabled'; the torch_npu profiler "
                           "silently collects nothing", diagnostic="already_enabled")
                    return
                raise
            self.kineto = kineto
            self.kind = "torch"
        else:
            self.kind = "synthetic"
        self.state = "running"
        runtime.set_active_backend(self)

    def stop(self):
        if self.state == "running":
            self._stop_native()
        elif self.state == "blocked":
            # The real second profiler's stop pops the FIRST profiler's thread-local state.
            other = runtime.active_backend()
            if other is not None and other is not self and other.state == "running":
                other.force_stop()
                diag("stopped_foreign_profiler")
            self.state = "stopped"
        else:
            diag("stop_while_not_running")  # real: "Can't disable ... when it's not running" in plog

    def _stop_native(self):
        try:
            if self.kineto is not None:
                self.kineto.stop_trace()
        finally:
            self.state = "stopped"
            if runtime.active_backend() is self:
                runtime.set_active_backend(None)

    def force_stop(self):
        if self.state == "running":
            self._stop_native()
            diag("profiler_cut_short")

    # ------------------------------------------------------------- events ---
    def add_span(self, name, start_ns, end_ns):
        self.spans.append((name, start_ns, end_ns, threading.get_ident()))

    def add_mstx(self, kind, message, domain, has_stream, t_ns):
        if self.state == "running":
            self.mstx_events.append((kind, message, domain, has_stream, t_ns, threading.get_ident()))

    def _us(self, perf_ns):
        return (self._epoch0 + (perf_ns - self._t0)) / 1000.0

    def synthetic_trace_events(self):
        pid = os.getpid()
        events = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                   "args": {"name": "Python (torch_npu double)"}}]
        for name, start, end, tid in self.spans:
            events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": pid, "tid": tid,
                           "ts": self._us(start), "dur": max(end - start, 0) / 1000.0, "args": {}})
        open_ranges = {}
        for kind, message, domain, has_stream, t_ns, tid in self.mstx_events:
            if kind == "mark":
                events.append({"ph": "i", "s": "t", "cat": "MsTx", "name": message, "pid": pid, "tid": tid,
                               "ts": self._us(t_ns), "args": {"domain": domain}})
            elif kind in ("range_start", "range_push"):
                open_ranges.setdefault((domain, tid), []).append((message, t_ns))
            elif kind in ("range_end", "range_pop"):
                stack = open_ranges.get((domain, tid)) or []
                if stack:
                    message, start = stack.pop()
                    events.append({"ph": "X", "cat": "MsTx", "name": message, "pid": pid, "tid": tid,
                                   "ts": self._us(start), "dur": max(t_ns - start, 0) / 1000.0,
                                   "args": {"domain": domain}})
        return events

    def export_raw(self, path):
        """Write FRAMEWORK/double_events.json: the chrome trace plus the raw mstx list."""
        data = None
        if self.kind == "torch" and self.kineto is not None and self.kineto.profiler is not None:
            self.kineto.export_chrome_trace(path)
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
            if isinstance(data, list):
                data = {"traceEvents": data}
        if data is None:
            data = {"traceEvents": self.synthetic_trace_events()}
        data["double_backend"] = self.kind or "none"
        data["double_mstx"] = [list(e) for e in self.mstx_events]
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        return path
