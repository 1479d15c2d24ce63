"""What the double saw: calls, profiles, warnings, swallowed errors, mstx events."""

from __future__ import annotations

import collections
import os

CallRecord = collections.namedtuple("CallRecord", "api bound_args t_ns thread")
ErrorRecord = collections.namedtuple("ErrorRecord", "api exc_type message")
MstxRecord = collections.namedtuple("MstxRecord", "kind message domain has_stream t_ns thread_id")


class DoubleStrictError(ValueError):
    """Strict mode: a reset-warning or a silent hazard of the real API happened."""


class ProfileRecord:
    """One torch_npu profile (or _KinetoProfile) as the double saw it."""

    def __init__(self, kind, init_kwargs):
        self.kind = kind
        self.init_kwargs = dict(init_kwargs)
        self.experimental_config = None   # normalised _ExperimentalConfig.__dict__
        self.schedule = None              # schedule parameters (dict) or None
        self.activities = []              # e.g. ["ProfilerActivity.CPU"]
        self.timeline = []                # (step_num, prev, cur, [actions])
        self.dirs = []                    # every *_ascend_pt folder created for it
        self.export_only_dirs = []        # the subset created in export-only mode
        self.deleted_dirs = []
        self.analysed_dirs = []
        self.trace_ready_calls = 0
        self.backend = None               # "torch" | "synthetic" | None
        self.started = False
        self.stopped = False

    def as_dict(self):
        return dict(self.__dict__)

    def __repr__(self):
        return f"<ProfileRecord {self.kind} dirs={len(self.dirs)} steps={len(self.timeline)}>"


_RESET_HOOKS = {}


def register_reset(fn):
    """Register a callable run by recorder.reset() (clears a module singleton).

    Keyed by module and name, so re-imported modules (reload()) replace their old hook.
    """
    _RESET_HOOKS[(fn.__module__, fn.__qualname__)] = fn
    return fn


class Recorder:
    def __init__(self):
        self.calls = []
        self.profiles = []
        self.mstx = []
        self.warnings = []
        self.errors = []
        self.diagnostics = []
        self.strict_violations = []
        self._pending_strict = []

    def reset(self):
        for lst in (self.calls, self.profiles, self.mstx, self.warnings, self.errors,
                    self.diagnostics, self.strict_violations, self._pending_strict):
            lst.clear()
        for hook in list(_RESET_HOOKS.values()):
            hook()

    # helpers -----------------------------------------------------------------
    def calls_to(self, api):
        return [c for c in self.calls if c.api == api]

    def warning_messages(self):
        return [m for _, m in self.warnings]

    def assert_no_warnings(self):
        if self.warnings or self.strict_violations:
            lines = [f"  {api}: {msg}" for api, msg in self.warnings]
            lines += [f"  strict: {msg}" for msg in self.strict_violations]
            raise AssertionError("torch_npu double recorded warnings:\n" + "\n".join(lines))

    def profile_dirs(self, existing_only=True):
        out = []
        for rec in self.profiles:
            for d in rec.dirs:
                if d not in out and (not existing_only or os.path.isdir(d)):
                    out.append(d)
        return out

    # deferred strict violations (e.g. found during garbage collection) --------
    def defer_strict(self, message):
        self.strict_violations.append(message)
        self._pending_strict.append(message)

    def raise_pending_strict(self):
        if self._pending_strict:
            msgs = list(self._pending_strict)
            self._pending_strict.clear()
            raise DoubleStrictError("; ".join(msgs))

    def take_pending_strict(self):
        msgs = list(self._pending_strict)
        self._pending_strict.clear()
        return msgs


recorder = Recorder()
