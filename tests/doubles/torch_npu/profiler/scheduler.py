"""torch_npu.profiler.scheduler: torch_npu's OWN ProfilerAction and Schedule.

Positional order is (wait, active, warmup=0, repeat=0, skip_first=0[, skip_first_wait=0 T11+]),
unlike torch's keyword-only schedule(*, wait, warmup, active, ...).  Bad values warn and reset.
"""

from __future__ import annotations

from enum import Enum

from torch_npu import _double
from torch_npu._double.codegen import make_function
from torch_npu._double.log import print_warn_msg
from torch_npu.utils._error_code import ErrCode, prof_error

_TRAIN = _double.freeze()

__all__ = ["ProfilerAction", "Schedule"]


class ProfilerAction(Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


class Schedule:
    """
    The profiler will skip the first ``skip_first`` steps, then wait for ``wait`` steps,
    then do the warmup for the next ``warmup`` steps, then do the active recording for the
    next ``active`` steps and then repeat the cycle starting with ``wait`` steps.  The
    optional number of cycles is specified with ``repeat``; zero repeats until stop().
    """

    def _init(self, b):
        self.wait = b["wait"]
        self.active = b["active"]
        self.warmup = b["warmup"]
        self.repeat = b["repeat"]
        self.skip_first = b["skip_first"]
        if _TRAIN.has_skip_first_wait:
            self.skip_first_wait = b["skip_first_wait"]
        self._check_params()

    def __call__(self, step: int) -> ProfilerAction:
        if step < 0:
            raise ValueError("Invalid parameter step, which must be not less than 0." + prof_error(ErrCode.VALUE))
        if step < self.skip_first:
            return ProfilerAction.NONE
        step -= self.skip_first
        if getattr(self, "skip_first_wait", 0) != 0:
            step += self.wait
        num_steps = self.wait + self.warmup + self.active
        if self.repeat > 0 and step / num_steps >= self.repeat:
            return ProfilerAction.NONE
        mod_step = step % num_steps
        if mod_step < self.wait:
            return ProfilerAction.NONE
        if mod_step < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod_step < num_steps - 1 else ProfilerAction.RECORD_AND_SAVE

    def _check_params(self):
        if not isinstance(self.wait, int) or self.wait < 0:
            print_warn_msg("Invalid parameter wait, reset it to 0.", reset=True)
            self.wait = 0
        if not isinstance(self.warmup, int) or self.warmup < 0:
            print_warn_msg("Invalid parameter warmup, reset it to 0.", reset=True)
            self.warmup = 0
        if not isinstance(self.active, int) or self.active <= 0:
            print_warn_msg("Invalid parameter active, reset it to 1.", reset=True)
            self.active = 1
        if not isinstance(self.repeat, int) or self.repeat < 0:
            print_warn_msg("Invalid parameter repeat, reset it to 0.", reset=True)
            self.repeat = 0
        if not isinstance(self.skip_first, int) or self.skip_first < 0:
            print_warn_msg("Invalid parameter skip_first, reset it to 0.", reset=True)
            self.skip_first = 0
        if _TRAIN.has_skip_first_wait and not isinstance(self.skip_first_wait, int):
            print_warn_msg("Invalid parameter skip_first_wait, reset it to 0.", reset=True)
            self.skip_first_wait = 0
        if self.warmup == 0:
            print_warn_msg("Profiler won't be using warmup, this can skew profiler results")


_SCHEDULE_PARAMS = "self, wait, active, warmup=0, repeat=0, skip_first=0"
if _TRAIN.has_skip_first_wait:
    _SCHEDULE_PARAMS += ", skip_first_wait=0"
Schedule.__init__ = make_function("Schedule.__init__", _SCHEDULE_PARAMS, Schedule._init,
                                  module=__name__, pass_first=True)


def _default_schedule_fn(_: int) -> ProfilerAction:
    """Default profiler behaviour: record from start() to stop()."""
    return ProfilerAction.RECORD


default_schedule_fn = _default_schedule_fn
