"""Process-wide state shared by the profiler and mstx parts of the double.

It lives in ``_double`` so it survives ``reload()``; ``recorder.reset()`` clears it.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import weakref

from . import is_strict
from .recorder import recorder, register_reset


class MstxState:
    def __init__(self):
        self.lock = threading.Lock()
        self.clear()

    def clear(self):
        self.enabled = False
        self.ever_configured = False  # a profile with NPU + mstx/msprof_tx was created
        self.owner = None          # the _ProfInterface that enabled mstx
        self.include = []
        self.exclude = []
        self.counter = 0           # process-wide range id counter (ids start at 1)
        self.mirror = {}           # range id -> torch record_function handle
        self.tls = threading.local()

    def next_id(self):
        with self.lock:
            self.counter += 1
            return self.counter

    def domain_allowed(self, domain):
        if self.include:
            return domain in self.include
        return domain not in self.exclude

    def push_stack(self, domain):
        stacks = getattr(self.tls, "stacks", None)
        if stacks is None:
            stacks = self.tls.stacks = {}
        return stacks.setdefault(domain, [])


mstx_state = MstxState()

# One native profiler state per thread, like torch_npu's thread-local PROFILER_STATE.
thread_state = threading.local()

# Profiles that were started, for the "never stopped" check at exit.
live_profiles = weakref.WeakSet()


def active_backend():
    return getattr(thread_state, "active", None)


def set_active_backend(backend):
    thread_state.active = backend


@register_reset
def _reset_runtime():
    mstx_state.clear()
    for prof in list(live_profiles):
        try:
            prof._double_abandon()
        except Exception:  # noqa: BLE001
            pass
    live_profiles.clear()
    backend = active_backend()
    if backend is not None:
        try:
            backend.force_stop()
        except Exception:  # noqa: BLE001
            pass
    thread_state.active = None


@atexit.register
def _at_exit():
    """A profile never stopped flushes at shutdown (real: __del__); strict mode fails the run."""
    leftovers = [p for p in list(live_profiles) if getattr(p, "_double_needs_stop", lambda: False)()]
    for prof in leftovers:
        try:
            prof._double_gc_stop()
        except Exception:  # noqa: BLE001
            pass
        if is_strict():
            recorder.defer_strict("a torch_npu profile was never stopped (it would flush during "
                                  "garbage collection)")
    pending = recorder.take_pending_strict()
    if pending and is_strict():
        sys.stdout.flush()
        sys.stderr.write("[torch_npu double][STRICT] " + "; ".join(pending) + "\n")
        sys.stderr.flush()
        os._exit(3)
