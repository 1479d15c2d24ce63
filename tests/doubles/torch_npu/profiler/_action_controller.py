"""ProfActionController: the (prev, cur) ProfilerAction transition table of torch_npu."""

from __future__ import annotations

from torch_npu import _double
from torch_npu._double.log import hazard, print_warn_msg

from .scheduler import ProfilerAction

_TRAIN = _double.freeze()
A = ProfilerAction


class ProfActionController:
    def __init__(self, prof, prof_inst, on_trace_ready=None, record=None):
        self.prof = prof
        self.prof_inst = prof_inst
        self.on_trace_ready = on_trace_ready
        self.record = record
        self.action_map = self._init_action_map()

    def _trace_ready(self):
        if self.on_trace_ready:
            if self.record is not None:
                self.record.trace_ready_calls += 1
            # T4+ hands the profile to on_trace_ready; T1-T3 handed the internal _ProfInterface.
            self.on_trace_ready(self.prof if _TRAIN.trace_ready_gets_profile else self.prof_inst)

    def transit_action(self, prev_action, current_action):
        for action in (prev_action, current_action):
            if action is not None and not isinstance(action, ProfilerAction):
                hazard(f"schedule returned {action!r}, which is not a torch_npu.profiler.ProfilerAction "
                       "(torch's schedule mixed in?); the real profiler silently records nothing",
                       diagnostic="foreign_schedule_action")
        actions = self.action_map.get((prev_action, current_action))
        if self.record is not None:
            step = getattr(self.prof, "step_num", None)
            names = [name for name, _ in actions] if actions else []
            self.record.timeline.append((step, _label(prev_action), _label(current_action), names))
        if actions:
            for _, action in actions:
                action()

    def _init_action_map(self):
        pi = self.prof_inst

        def warn(msg):
            return ("warn", lambda: print_warn_msg(msg))

        init = ("init_trace", pi.init_trace)
        warmup = ("warmup_trace", pi.warmup_trace)
        start = ("start_trace", pi.start_trace)
        stop = ("stop_trace", pi.stop_trace)
        finalize = ("finalize_trace", pi.finalize_trace)
        ready = ("trace_ready", self._trace_ready)
        delete = ("delete_prof_dir", pi.delete_prof_dir)
        return {
            (A.NONE, A.NONE): [],
            (A.NONE, A.WARMUP): [init, warmup],
            (A.NONE, A.RECORD): [init, start],
            (A.NONE, A.RECORD_AND_SAVE): [init, start],
            (A.WARMUP, A.NONE): [warn("Incorrect schedule: WARMUP followed by NONE"), start, stop, finalize],
            (A.WARMUP, A.WARMUP): [],
            (A.WARMUP, A.RECORD): [start],
            (A.WARMUP, A.RECORD_AND_SAVE): [start],
            (A.RECORD, A.NONE): [warn("Incorrect schedule: RECORD followed by NONE"), stop, finalize],
            (A.RECORD, A.WARMUP): [warn("Incorrect schedule: RECORD followed by WARMUP"), stop, finalize],
            (A.RECORD, A.RECORD): [],
            (A.RECORD, A.RECORD_AND_SAVE): [],
            (A.RECORD_AND_SAVE, A.NONE): [stop, finalize, ready],
            (A.RECORD_AND_SAVE, A.WARMUP): [stop, finalize, ready, init, warmup],
            (A.RECORD_AND_SAVE, A.RECORD): [stop, finalize, ready, init, start],
            (A.RECORD_AND_SAVE, A.RECORD_AND_SAVE): [stop, finalize, ready, init, start],
            # exit actions (stop())
            (A.WARMUP, None): [warn("Incorrect schedule: Stop profiler while current state is WARMUP "
                                    "which will result in empty parsed data."), finalize, delete],
            (A.RECORD, None): [warn("Incorrect schedule: Stop profiler while current state is RECORD "
                                    "which may result in incomplete parsed data."), stop, finalize, ready],
            (A.RECORD_AND_SAVE, None): [warn("Stop profiler while current state is RECORD_AND_SAVE, "
                                             "perhaps the scheduling cycle has not yet completed."),
                                        stop, finalize, ready],
        }


def _label(action):
    if action is None:
        return None
    if isinstance(action, ProfilerAction):
        return action.name
    return repr(action)
