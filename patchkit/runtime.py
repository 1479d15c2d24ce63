"""The module the lines patchkit inserts call.

A patched module does, at import::

    try:
        import patchkit.runtime as _patchkit_runtime
    except Exception:
        _patchkit_runtime = <a stand-in whose functions do nothing>  # and one line on stderr
    _patchkit_runtime.configure("verl-fsdp-update", backend="torch", level="level0", ...)

and, inside methods, ``_patchkit_runtime.start(key)``, ``_patchkit_runtime.step(key)``
or ``@_patchkit_runtime.on_exit(key, guard)``.  A key is ``"recipe-id"`` or
``"recipe-id/role"`` (settings are looked up by the recipe id); ``None`` means
"not this time".

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
* Ranks not listed in ``ranks`` create nothing.
* A window still open at process exit is flushed (atexit).
* One ``[patchkit]`` line on stderr when a window opens and when it closes
  (with the trace path).  Nothing here raises into the host program: a
  problem is one stderr line and the key is finished.  ``PATCHKIT_STRICT=1``
  or :func:`set_strict` re-raises instead (for tests).

Only the standard library is imported here; torch / torch_npu are imported
by the backend when a capture is created.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import os
import sys
import threading
import time

__all__ = ["configure", "start", "step", "on_exit", "refuse", "reset", "set_strict", "report", "schedule_action"]

# Keys that are done, or will never run in this process.  ``None`` is in it so
# that step(None) ("not this time") takes the same one-lookup path.
_finished = {None}
_settings = {}  # recipe id -> settings given to configure()
_refused = {}  # recipe id -> why it must not start in this process
_captures = {}  # key -> _Capture, created and not finished
_done = {}  # key -> _Capture, finished (for report())
_said = set()  # (key, topic): lines printed once
_checked = {}  # key -> (settings, normalised settings, rank) of a start that had to wait
_lock = threading.RLock()
_state = {"active": None, "strict": False, "atexit": False}

NONE, WARMUP, RECORD, RECORD_AND_SAVE = 0, 1, 2, 3


# ---------------------------------------------------------------------------
# the injected calls


def configure(recipe_id, **settings):
    """Record the settings of ``recipe_id``; the last call before its capture starts wins."""
    try:
        _settings[str(recipe_id)] = dict(settings)
    except Exception as exc:  # pragma: no cover - dict() of keyword arguments does not fail
        _fail(str(recipe_id), "configure failed", exc)


def refuse(recipe_id, reason):
    """Keep every capture of ``recipe_id`` from starting in this process, and say why once.

    For a framework whose own profiler is switched on: two profilers in one
    process would corrupt each other's data.
    """
    try:
        _refused[str(recipe_id)] = str(reason)
    except Exception:  # pragma: no cover - str() of a literal does not fail
        pass


def step(key):
    """Advance the capture of ``key`` by one step (starting it first if needed)."""
    try:
        if key in _finished:
            return
    except TypeError:  # an unhashable key: never ours
        return _bad_key(key)
    _call(key, True)


def start(key):
    """Create and start the capture of ``key`` now (its step 0); later calls do nothing."""
    try:
        if key in _finished or key in _captures:
            return
    except TypeError:
        return _bad_key(key)
    _call(key, False)


def on_exit(key, guard=None):
    """A decorator: each call of the method is one step of ``key``.

    Before the call, the capture is started if it has not been (so the method
    is its own start point); after it, in a ``finally``, ``step(key)`` runs
    when ``guard`` is None or ``guard(*args, **kwargs)`` is true.  ``key`` may
    be a callable taking the method's arguments and returning a key or None.
    A guard or key callable that raises counts as false / None (said once).
    """
    key_fn = key if callable(key) else None

    def decorate(fn):
        def resolve(args, kwargs):
            if key_fn is None:
                return key
            try:
                k = key_fn(*args, **kwargs)
            except Exception as exc:
                _once(("on_exit", id(key_fn)), f"{_label(fn)}: choosing the capture key raised "
                      f"{type(exc).__name__}: {exc}; not stepping for such calls")
                return None
            if k is not None and not isinstance(k, str):
                _once(("on_exit-type", id(key_fn)), f"{_label(fn)}: capture key {k!r} is not a string; ignored")
                return None
            return k

        def allowed(args, kwargs):
            if guard is None:
                return True
            try:
                return bool(guard(*args, **kwargs))
            except Exception as exc:
                _once(("guard", id(guard)), f"{_label(fn)}: the guard raised {type(exc).__name__}: {exc}; "
                      "counted as false")
                return False

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args, **kwargs):
                k = resolve(args, kwargs)
                if k in _finished:
                    return await fn(*args, **kwargs)
                if k not in _captures and allowed(args, kwargs):
                    start(k)
                try:
                    return await fn(*args, **kwargs)
                finally:
                    if allowed(args, kwargs):
                        step(k)
            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            k = resolve(args, kwargs)
            if k in _finished:
                return fn(*args, **kwargs)
            if k not in _captures and allowed(args, kwargs):
                start(k)
            try:
                return fn(*args, **kwargs)
            finally:
                if allowed(args, kwargs):
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
        _captures.clear()
        _done.clear()
        _settings.clear()
        _refused.clear()
        _said.clear()
        _checked.clear()
        _finished.clear()
        _finished.add(None)
        _state["active"] = None
        _state["strict"] = False


def report():
    """One dict per key seen: state, backend, rank, recorded windows, trace paths."""
    with _lock:
        out = []
        for state, table in (("running", _captures), ("finished", _done)):
            for key, cap in table.items():
                out.append({"key": key, "state": state, "backend": cap.backend, "rank": cap.rank,
                            "step": cap.n, "recorded": list(cap.recorded), "traces": list(cap.traces),
                            "error": cap.error})
        return out


def schedule_action(step_index, wait, warmup, active, repeat=0, skip_first=0):
    """What ``torch.profiler.schedule(...)(step_index)`` does, as an int: 0 none, 1 warmup, 2 record, 3 record+save."""
    from patchkit.backends import schedule_action as sa

    return sa(step_index, wait, warmup, active, repeat, skip_first)


# ---------------------------------------------------------------------------
# the slow path


def _strict():
    return _state["strict"] or os.environ.get("PATCHKIT_STRICT", "") not in ("", "0")


def _say(msg):
    try:
        sys.stderr.write(f"[patchkit] {msg}\n")
        sys.stderr.flush()
    except Exception:
        pass


def _once(topic, msg):
    if topic not in _said:
        _said.add(topic)
        _say(msg)


def _label(fn):
    return getattr(fn, "__qualname__", repr(fn))


def _bad_key(key):
    _once(("bad-key", type(key).__name__), f"capture key {key!r} is not a string; ignored")
    if _strict():
        raise TypeError(f"patchkit capture key must be a str or None, not {type(key).__name__}")


def _fail(key, what, exc):
    """One line, the key finished, the job goes on (strict mode: raise)."""
    with _lock:
        cap = _captures.pop(key, None)
        if cap is not None:
            cap.error = f"{what}: {type(exc).__name__}: {exc}"
            cap.quiet_end()
            _done[key] = cap
        if _state["active"] == key:
            _state["active"] = None
        _finished.add(key)
    detail = f"{type(exc).__name__}: {exc}".strip().splitlines()[0] if str(exc) else type(exc).__name__
    _say(f"{key}: {what}: {detail}; not profiling {key} in this process, the job runs on")
    if _strict():
        raise exc


def _call(key, stepping):
    if not isinstance(key, str):
        return _bad_key(key)
    with _lock:
        if key in _finished:
            return
        cap = _captures.get(key)
        if cap is None:
            try:
                _try_start(key)
            except Exception as exc:
                _fail(key, "could not start the profiler", exc)
            return
        if not stepping:
            return
        if cap.thread != threading.get_ident():
            _once((key, "thread"), f"{key}: step from thread {threading.current_thread().name} ignored; the "
                  f"capture belongs to thread {cap.thread_name}, where it was started (a profiler is driven "
                  "by the thread that started it)")
            return
        try:
            cap.advance()
        except Exception as exc:
            _fail(key, f"the profiler failed at step {cap.n}", exc)


def _rank():
    dist = sys.modules.get("torch.distributed")
    if dist is not None:
        try:
            if dist.is_available() and dist.is_initialized():
                return int(dist.get_rank())
        except Exception:
            pass
    try:
        return int(os.environ.get("RANK", "0") or 0)
    except ValueError:
        return 0


def _foreign_profiler():
    """A name for a profiler running in this process that is not ours, or None."""
    ap = sys.modules.get("torch.autograd.profiler")
    if ap is not None and getattr(ap, "_is_profiler_enabled", False):
        return "torch.profiler"
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch._C._autograd._profiler_enabled():
                return "torch.autograd.profiler"
        except Exception:
            pass
    return None


def _try_start(key):
    recipe = key.partition("/")[0]
    if recipe in _refused:
        _finished.add(key)
        _once((key, "refused"), f"{key}: not starting: {_refused[recipe]}")
        return
    settings = _settings.get(recipe)
    if settings is None:
        raise LookupError(f"no configure({recipe!r}, ...) ran in this process (is the patched module imported?)")
    from patchkit import backends

    checked = _checked.get(key)
    if checked is not None and checked[0] is settings:
        s, rank = checked[1], checked[2]  # a retry: validated already
    else:
        problems = backends.validate(settings)
        if problems:
            raise ValueError("; ".join(problems))
        s = backends.normalize(settings)
        rank = _rank()
        if s["ranks"] != "all" and rank not in s["ranks"]:
            _finished.add(key)  # not this rank: no profiler, no files
            return
        _checked[key] = (settings, s, rank)
    active = _state["active"]
    if active is not None:
        _once((key, "busy"), f"{key}: not starting while {active} is capturing (one profiler per process); "
              "will start at a later call once it is over")
        return
    other = _foreign_profiler()
    if other is not None:
        _once((key, "foreign"), f"{key}: another profiler ({other}) is already running in this process; "
              "not starting, will try again at later calls")
        return
    if s["repeat"] == 0:
        _say(f"{key}: schedule.repeat=0 records a window every {s['wait'] + s['warmup'] + s['active']} steps "
             "until the process exits: the data grows without bound")
    cap = _Capture(key, s, rank)
    _captures[key] = cap
    _state["active"] = key
    cap.program = backends.build(s, key)  # imports torch / torch_npu
    if not _state["atexit"]:
        _state["atexit"] = True
        atexit.register(_at_exit)
    cap.begin()


def _at_exit():
    with _lock:
        for key, cap in list(_captures.items()):
            try:
                if cap.thread != threading.get_ident():
                    # torch may crash when a profiler is stopped from a thread other than its own
                    if cap.window:
                        _say(f"{key}: a window is still open at exit in thread {cap.thread_name}; it cannot be "
                             "flushed from another thread, so it is lost")
                    cap.ended = True
                    _captures.pop(key, None)
                    _done[key] = cap
                    _finished.add(key)
                    continue
                cap.finish("process exit")
            except Exception as exc:
                try:
                    _fail(key, "flushing at exit failed", exc)
                except Exception:
                    pass


class _Capture:
    """One key's profiler, driven by the schedule (see patchkit.backends for the code it runs)."""

    def __init__(self, key, s, rank):
        self.key = key
        self.s = s
        self.backend = s["backend"]
        self.rank = rank
        self.program = None
        self.thread = threading.get_ident()
        self.thread_name = threading.current_thread().name
        self.sched = tuple(s[k] for k in ("wait", "warmup", "active", "repeat", "skip_first"))
        from patchkit.backends import schedule_action as sa, schedule_end

        self._action = sa
        self.end = schedule_end(*self.sched)
        self.n = 0
        self.window = None  # (first, last) recorded step of the open window
        self.in_step = False  # a per-step range is open
        self.ended = False
        self.recorded = []
        self.traces = []
        self.error = None

    def action(self, n):
        return self._action(n, *self.sched)

    def begin(self):
        p = self.program
        p.snapshot()
        p.run("create")
        p.run("begin")
        self._settle(None, self.action(0))

    def advance(self):
        prev = self.action(self.n)
        if self.in_step:
            self.in_step = False
            self.program.run("step_exit", self.n)
        self.n += 1
        self.program.run("advance", self.n)
        self._settle(prev, self.action(self.n))

    def _settle(self, prev, cur):
        n = self.n
        if prev == RECORD_AND_SAVE and self.window is not None:
            self._close(n - 1)
        if cur in (RECORD, RECORD_AND_SAVE) and self.window is None:
            last = n
            while self.action(last) != RECORD_AND_SAVE:
                last += 1
            self.window = (n, last)
            self.window_started = time.time()  # for the capture's manifest
            self.program.run("window_open", n)
            where = self.program.trace_dir or f"the {self.backend} report"
            _say(f"{self.key}: recording {_span(n, last)} (rank {self.rank}, {self.backend}) -> {where}")
        if self.end is not None and n >= self.end:
            self.finish("schedule over")
            return
        if self.window is not None and self.program.has("step_enter"):
            self.program.run("step_enter", n)
            self.in_step = True

    def _close(self, last):
        first = self.window[0]
        self.window = None
        self.program.run("window_close", last)
        self.recorded.append((first, last))
        self._log_close(first, last, "")

    def _log_close(self, first, last, why):
        new = self.program.new_traces()
        self.traces += new
        _write_manifest(self, first, last, new, why)
        if self.program.trace_dir is None:
            where = f"written by {self.backend} itself"
        elif new:
            where = ", ".join(new)
        else:
            where = f"none found in {self.program.trace_dir}"
        _say(f"{self.key}: window closed after step {last}{why} ({_span(first, last)} recorded); trace: {where}")
        for path in new:
            if _cut_short(path):
                _say(f"{self.key}: {path} ends in the middle of its data: the disk was full or a file size limit "
                     "was hit while it was written; free space and capture again")

    def finish(self, reason):
        """Stop for good: close an open window (flushing it), stop the profiler, mark the key finished."""
        with _lock:
            if self.ended:
                return
            p = self.program
            if self.in_step:
                self.in_step = False
                p.run("step_exit", self.n)
            window = self.window
            self.window = None
            if window is not None:
                p.run("window_close", self.n)
            self.ended = True
            p.run("end", self.n)
            if window is not None:
                self.recorded.append((window[0], self.n))
                self._log_close(window[0], self.n, f" at {reason}")
            p.namespace.clear()  # let the profiler and its events go
            _captures.pop(self.key, None)
            _done[self.key] = self
            _finished.add(self.key)
            if _state["active"] == self.key:
                _state["active"] = None

    def quiet_end(self):
        """After a failure: release the profiler, say nothing, never raise."""
        if self.ended or self.program is None or self.thread != threading.get_ident():
            self.ended = True  # (a profiler must not be stopped from another thread: torch may crash)
            return
        self.ended = True
        for section in (("step_exit",) if self.in_step else ()) + (("window_close",) if self.window else ()) + ("end",):
            try:
                self.program.run(section, self.n)
            except Exception:
                pass
        self.in_step = False
        self.window = None
        self.program.namespace.clear()


def _cut_short(path):
    """A JSON trace whose last bytes do not close it was cut off (profilers write it without checking)."""
    if not path.endswith(".json"):
        return False
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64))
            tail = handle.read().rstrip()
    except OSError:
        return False
    return not tail.endswith((b"}", b"]"))


def _span(a, b):
    return f"step {a}" if a == b else f"steps {a}-{b}"


def _write_manifest(cap, first, last, traces, why):
    """The capture's manifest next to its traces (patchkit.manifest); a failure is one line, never raised."""
    try:
        from patchkit import manifest

        manifest.record_window(cap.key, cap.backend, cap.rank, cap.s, first, last,
                               getattr(cap, "window_started", None), traces, why.replace(" at ", "", 1))
    except Exception as exc:
        _say(f"{cap.key}: the capture's manifest was not written: {type(exc).__name__}: {exc}")
        if _strict():
            raise
