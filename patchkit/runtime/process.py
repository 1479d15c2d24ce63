"""The process-wide state of :mod:`patchkit.runtime`, its messages and its failure handling.

Every table here is created once and only ever mutated in place, so
``patchkit.runtime`` and ``patchkit.runtime.capture`` share the same objects.
Standard library only.
"""

from __future__ import annotations

import os
import sys
import threading

# Keys that are done, or will never run in this process.  ``None`` is in it so
# that step(None) ("not this time") takes the same one-lookup path.
finished = {None}
settings = {}  # recipe id -> settings given to configure()
refused = {}  # recipe id -> why it must not start in this process
captures = {}  # key -> Capture, created and not finished
quick = {}  # key -> the capture's quick_step, for the per-step path of a running capture
done = {}  # key -> Capture, finished (for report())
said = set()  # (key, topic): lines printed once
checked = {}  # key -> (settings, normalised settings, rank) of a start that had to wait
closing = {}  # key -> why: the capture finishes at its next step, in its own thread (patchkit detach)
lock = threading.RLock()
state = {"active": None, "strict": False, "atexit": False}


def clear():
    """Forget every table (the caller holds :data:`lock`)."""
    for table in (captures, quick, done, settings, refused, said, checked, finished, closing):
        table.clear()
    finished.add(None)
    state["active"] = None
    state["strict"] = False


def recipe_of(key):
    """``"verl-fsdp-update/actor"`` -> ``"verl-fsdp-update"``; None for anything that is not a key."""
    return key.partition("/")[0] if isinstance(key, str) else None


def forget(recipe_id):
    """Forget every key of ``recipe_id`` that is not capturing: finished, refused, said lines, checks.  So a
    recipe attached again to a running job (``patchkit attach``) starts afresh; a running capture is kept."""
    with lock:
        for table in (finished, done, checked, closing):
            for key in [k for k in table if recipe_of(k) == recipe_id and k not in captures]:
                table.discard(key) if isinstance(table, set) else table.pop(key, None)
        refused.pop(recipe_id, None)
        for topic in [t for t in said if isinstance(t, tuple) and t and recipe_of(t[0]) == recipe_id]:
            said.discard(topic)


def strict():
    return state["strict"] or os.environ.get("PATCHKIT_STRICT", "") not in ("", "0")


def say(msg):
    try:
        sys.stderr.write(f"[patchkit] {msg}\n")
        sys.stderr.flush()
    except Exception:
        pass


def reason(exc):
    """``exc`` in one line: a located error (a refused state folder or folder on the way) with its place, else
    ``Type: message``."""
    where = getattr(exc, "where", None)
    if where or getattr(exc, "located", False):
        text = f"{where}: {exc}" if where else str(exc)
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text.strip().splitlines()[0]


def once(topic, msg):
    if topic not in said:
        said.add(topic)
        say(msg)


def where(fn):
    """``file:line`` where ``fn`` was written: for the lambda an inserted line passes, that line of the target."""
    code = getattr(fn, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else repr(fn)


def _raised(fn, key, what, exc, meaning):
    """One line, once per point (the lambda's code is the point's own), for a guard or role that raised."""
    detail = f"{type(exc).__name__}: {exc}".strip().splitlines()[0] if str(exc) else type(exc).__name__
    whose = f"{key}: " if isinstance(key, str) else ""
    once((what, getattr(fn, "__code__", fn)), f"{whose}{what} at {where(fn)} raised {detail}; {meaning} there "
         "whenever it raises (said once), the job runs on")


def holds(guard, key=None, args=(), kwargs=None):
    """Whether a point's guard is true (called with ``args``): one that raises is false, said once, never raised."""
    try:
        return bool(guard(*args, **kwargs) if kwargs else guard(*args) if args else guard())
    except Exception as exc:
        _raised(guard, key, "the guard", exc, "read as false")
        return False


def chosen(key, args=(), kwargs=None):
    """The key a callable chooses where the line runs (from the roles' expressions): a str, or None for "not this
    time" (also when it raises, or gives something else; said once)."""
    try:
        k = key(*args, **kwargs) if kwargs else key(*args) if args else key()
    except Exception as exc:
        _raised(key, None, "choosing the role", exc, "read as no role (not this time)")
        return None
    if k is None or k.__class__ is str:
        return k
    if not isinstance(k, str):
        once(("key-type", getattr(key, "__code__", key)), f"the capture key chosen at {where(key)} is {k!r}, "
             "not a string; ignored")
        return None
    return k


def retire(key, cap):
    """``key`` is finished for good: no capture runs for it, no later call does anything."""
    with lock:
        captures.pop(key, None)
        quick.pop(key, None)
        if cap is not None:
            done[key] = cap
        finished.add(key)
        if state["active"] == key:
            state["active"] = None


def fail(key, what, exc):
    """One line, the key finished, the job goes on (strict mode: raise)."""
    with lock:
        cap = captures.get(key)
        if cap is not None:
            cap.error = f"{what}: {type(exc).__name__}: {exc}"
            cap.quiet_end()
            if getattr(cap, "answer", None) is not None:  # a window `patchkit capture` waits for
                try:
                    cap.answer(error=cap.error)
                except Exception:
                    pass
        retire(key, cap)
    say(f"{key}: {what}: {reason(exc)}; not profiling {key} in this process, the job runs on")
    if strict():
        raise exc
