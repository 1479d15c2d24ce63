"""The module the lines patchkit inserts call: the layer that runs inside the training process.

Its parts: :mod:`.control` (a key's capture: created, stepped, finished), :mod:`.capture` (one window's
profiler and its manifest), :mod:`.process` (the process-wide state: the keys, their settings, lines said
once), :mod:`.ranges` (range and mark points), :mod:`.ondemand` (``schedule.trigger=manual``: windows asked by
``patchkit capture``), with :mod:`.requests` (the request and answer files); the profilers behind them are
``backends/`` (one module per backend, found by walking the folder), each a :mod:`.backend` (what a backend
is) found by :mod:`.finder`, handed the :mod:`.settings` every backend takes, whose code for a capture is a
:mod:`.program` run at the moments :mod:`.schedule` says, with a capture's role in its file names
(:mod:`.roles`); whether a backend can record in this process at all (its library, its device) is
:mod:`.ready`, which ``patchkit attach`` asks before changing anything in a job; ``attach/`` is what
``patchkit attach`` runs in a job (:mod:`patchkit.runtime.attach`).  The record it writes
beside each capture is :mod:`patchkit.core.manifest`.  Standard library only, until a profiler is created.

A patched module does, at import::

    try:
        import patchkit.runtime as _patchkit_runtime
        _patchkit_runtime.require(2)  # an older build: the stand-in below
    except Exception:
        _patchkit_runtime = <a stand-in whose functions do nothing>  # and one line on stderr
    _patchkit_runtime.configure("verl-fsdp-update", backend="torch", level="level0", ...)

and, inside methods, ``_patchkit_runtime.start(key)``, ``_patchkit_runtime.step(key)``
or ``@_patchkit_runtime.on_exit(key, guard)``.  A key is ``"recipe-id"`` or
``"recipe-id/role"`` (settings are looked up by the recipe id); ``None`` means
"not this time".  A point's guard comes as a callable, ``step(key, lambda:
not forward_only)``, and a role chosen where the line runs as a callable key:
the runtime calls them, so a guard that raises is false (one line on stderr,
once per point), never an exception in the job.

What it guarantees:

* The profiler is created lazily, at the first ``start``/``step`` of a key, in
  the thread that reaches it; only that thread drives it afterwards.
* One capture per process and key, and one capture at a time: while one runs
  (or while another profiler runs in the process) a second key does not
  start; it says so once and tries again at its later calls.
* The schedule is exactly ``torch.profiler.schedule(wait, warmup, active,
  repeat, skip_first)``.  The first call opens step 0; every later ``step``
  advances by one.  When the schedule is over the profiler is stopped, the
  trace is flushed and the key is finished: from then on ``step(key)`` is one
  set lookup.  ``repeat=0`` records every cycle until the process exits.
  Between schedule events (a window opens or closes, the schedule ends) a
  step takes no lock and runs only the backend's per-step code, compiled when
  the capture was created.
* Ranks not listed in ``ranks`` create nothing; nor do processes of Agent Loop replicas not listed in
  ``replicas`` (the replica: $VERL_REPLICA_RANK, else $RANK // ``replica_size``; see runtime_control.replica).
* A window still open at process exit is flushed (atexit).
* One ``[patchkit]`` line on stderr when a window opens and when it closes
  (with the trace path).  Nothing here raises into the host program: a
  problem is one stderr line and the key is finished.  ``PATCHKIT_STRICT=1``
  or :func:`set_strict` re-raises instead (for tests).

Only the standard library is imported here; torch / torch_npu are imported
by the backend when a capture is created.

This module is the public face; the work is done, in layers that import
only downwards, by :mod:`patchkit.runtime.control` (starting a capture,
steps at schedule events, process exit), :mod:`patchkit.runtime.capture`
(one capture's schedule and window state machine) and
:mod:`patchkit.runtime.process` (the process-wide state, messages and
failure handling).
"""

from __future__ import annotations

import functools
import inspect
import threading

from patchkit.runtime.control import at_exit as _at_exit  # noqa: F401  (tests call what process exit does)
from patchkit.runtime.control import bad_key as _bad_key
from patchkit.runtime.control import call as _call
from patchkit.runtime.control import close  # noqa: F401  (patchkit attach: end a recipe at its next step)
from patchkit.runtime.process import captures as _captures
from patchkit.runtime.process import chosen as _chosen
from patchkit.runtime.process import clear as _clear
from patchkit.runtime.process import done as _done
from patchkit.runtime.process import fail as _fail
from patchkit.runtime.process import finished as _finished
from patchkit.runtime.process import forget  # noqa: F401  (patchkit attach: a recipe attached again starts afresh)
from patchkit.runtime.process import holds as _holds
from patchkit.runtime.process import lock as _lock
from patchkit.runtime.process import quick as _quick
from patchkit.runtime.process import refused as _refused
from patchkit.runtime.process import settings as _settings
from patchkit.runtime.process import state as _state
from patchkit.runtime.ranges import (  # noqa: F401  (the calls of range and mark points)
    mark, range_end, range_start, ranged,
)

__all__ = ["configure", "start", "step", "on_exit", "refuse", "range_start", "range_end", "ranged", "mark", "reset",
           "set_strict", "report", "schedule_action", "require", "close", "forget", "LINES"]

# The lines this runtime serves: 2 passes a point's guard (and a role chosen as the line runs) as a callable.
LINES = 2


def require(lines):
    """Called by a patched module's header: an older runtime than its lines need raises ImportError, so the module
    falls back to the stand-in that does nothing (and says so), instead of an error where a point calls it."""
    if not isinstance(lines, int) or lines > LINES:
        raise ImportError(f"the lines need patchkit.runtime for lines {lines!r}; this one serves up to {LINES}")


# ---------------------------------------------------------------------------
# the injected calls


def configure(recipe_id, **settings):
    """Record the settings of ``recipe_id``; the last call before its capture starts wins."""
    try:
        _settings[str(recipe_id)] = dict(settings)
    except Exception as exc:  # pragma: no cover - dict() of keyword arguments does not fail
        _fail(str(recipe_id), "configure failed", exc)


def refuse(recipe_id, reason, guard=None):
    """Keep every capture of ``recipe_id`` from starting in this process, and say why once.

    For a framework whose own profiler is switched on: two profilers in one
    process would corrupt each other's data.  ``guard``: as for :func:`step`.
    """
    if guard is not None and not _holds(guard, recipe_id):
        return
    try:
        _refused[str(recipe_id)] = str(reason)
    except Exception:  # pragma: no cover - str() of a literal does not fail
        pass


def step(key, guard=None):
    """Advance the capture of ``key`` by one step (starting it first if needed).

    ``guard``: the point's condition as a callable (``lambda: not forward_only``), called only while ``key``
    can still record, so a finished key costs one set lookup whatever the guard; false or raising, no step (one
    that raises is said once, never raised).  ``key`` may be a callable too, called after the guard: the role
    chosen where the line runs (``lambda: "r/actor" if ... else None``); one that raises means None.
    """
    try:
        if key in _finished:
            return
        quick = _quick.get(key)
    except TypeError:  # an unhashable key: never ours
        return _bad_key(key)
    if guard is not None and not _holds(guard, key):
        return
    # A running capture serves the steps between its schedule events itself;
    # the rest (a first call, a window opening or closing, another thread) takes the full path.
    if quick is None:
        if callable(key):  # the role, chosen here: its key's own step
            key = _chosen(key)
            if key in _finished:
                return
            quick = _quick.get(key)
            if quick is not None and quick():
                return
        _call(key, True)
    elif not quick():
        _call(key, True)


def start(key, guard=None):
    """Create and start the capture of ``key`` now (its step 0); later calls do nothing.  ``guard``, a callable
    ``key``: as for :func:`step`."""
    try:
        if key in _finished or key in _captures:
            return
    except TypeError:
        return _bad_key(key)
    if guard is not None and not _holds(guard, key):
        return
    if callable(key):
        return start(_chosen(key))
    _call(key, False)


def on_exit(key, guard=None):
    """A decorator: each call of the method is one step of ``key``.

    Before the call, the capture is started if it has not been (so the method
    is its own start point); after it, in a ``finally``, ``step(key)`` runs
    when ``guard`` is None or ``guard(*args, **kwargs)`` is true.  ``key`` may
    be a callable taking the method's arguments and returning a key or None.
    A guard or key callable that raises counts as false / None (said once, naming the decorator's line).
    """
    key_fn = key if callable(key) else None

    def decorate(fn):
        def resolve(args, kwargs):
            return key if key_fn is None else _chosen(key_fn, args, kwargs)

        def allowed(args, kwargs):
            return _holds(guard, key if key_fn is None else None, args, kwargs)

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args, **kwargs):
                k = resolve(args, kwargs)
                if k in _finished:
                    return await fn(*args, **kwargs)
                if k not in _captures and (guard is None or allowed(args, kwargs)):
                    start(k)
                try:
                    return await fn(*args, **kwargs)
                finally:
                    if guard is None or allowed(args, kwargs):
                        step(k)
            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            k = resolve(args, kwargs)
            if k in _finished:
                return fn(*args, **kwargs)
            if k not in _captures and (guard is None or allowed(args, kwargs)):
                start(k)
            try:
                return fn(*args, **kwargs)
            finally:
                if guard is None or allowed(args, kwargs):
                    step(k)
        return wrapper
    return decorate


# ---------------------------------------------------------------------------
# controls for tests and tools


def set_strict(flag=True):
    """Strict mode re-raises every problem instead of printing one line (tests)."""
    _state["strict"] = bool(flag)


def reset():
    """Forget everything: settings, captures, messages (tests).  Stops a capture this thread owns."""
    with _lock:
        me = threading.get_ident()
        for cap in list(_captures.values()):
            if cap.thread == me:
                cap.quiet_end()
        _clear()


def report():
    """One dict per key seen: state, backend, rank, recorded windows, trace paths, [trace, why] of traces not
    written whole, and the error that ended the capture (None if none)."""
    with _lock:
        out = []
        for state, table in (("running", _captures), ("finished", _done)):
            for key, cap in table.items():
                out.append({"key": key, "state": state, "backend": cap.backend, "rank": cap.rank,
                            "step": cap.n, "recorded": list(cap.recorded), "traces": list(cap.traces),
                            "failed": [list(f) for f in cap.failed], "error": cap.error})
        return out


def schedule_action(step_index, wait, warmup, active, repeat=0, skip_first=0, steps=()):
    """What ``torch.profiler.schedule(...)(step_index)`` does (or ``steps`` asks), as an int: 0 none, 1 warmup,
    2 record, 3 record+save."""
    from patchkit.runtime.backends import schedule_action as sa

    return sa(step_index, wait, warmup, active, repeat, skip_first, steps)
