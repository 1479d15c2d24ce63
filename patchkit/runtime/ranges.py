"""Labelled ranges and marks (a recipe's ``action: range`` and ``action: mark`` points), inside capture windows.

``range_start``/``range_end`` go before and after a statement, ``ranged`` is
the decorator around a whole method, ``mark`` an instant; a guard and a role
chosen where the line runs come as callables, as for ``step``.  Each does
something only while a capture window of ``key`` is open in this process, and
runs the backend's ``range_open`` / ``range_close`` / ``mark`` code: a
``record_function`` span on torch, an mstx range or mark on npu, an NVTX
range or mark on nsys.  A range whose ``range_end`` an exception skipped is
closed at the next ``range_start`` of the same name, or when the window
closes; ``ranged`` closes its range in a ``finally``.  Nothing here raises
into the host program: a failure is one line on stderr, once per key.

Standard library only.
"""

from __future__ import annotations

import functools

from patchkit.runtime.process import captures, chosen, holds, once, strict, where


def _window(key):
    """The capture of ``key`` while one of its windows is open, else None."""
    cap = captures.get(key) if isinstance(key, str) else None
    return cap if cap is not None and cap.window is not None and cap.program is not None else None


def _failed(key, what, exc):
    if strict():
        raise exc
    if callable(key):  # a role chosen where the line runs: the line is the point
        key = f"the line at {where(key)}"
    once((key, "ranges"), f"{key}: {what} failed ({type(exc).__name__}: {exc}); its ranges and marks are left out")


def _open(key, guard):
    """The capture whose window a guarded point at ``key`` acts in, else None: ``guard`` and a callable ``key`` as
    for :func:`patchkit.runtime.step` (the guard first, and for a plain key only while a window is open)."""
    if callable(key):
        if guard is not None and not holds(guard):
            return None
        key, guard = chosen(key), None
    cap = _window(key)
    return cap if cap is not None and (guard is None or holds(guard, key)) else None


def range_start(key, name, guard=None):
    """Open the range ``name`` (closing one of that name an exception left open)."""
    try:
        cap = _open(key, guard)
        if cap is not None:
            cap.close_ranges(name)
            cap.open_range(name)
    except Exception as exc:
        _failed(key, f"opening the range {name!r}", exc)


def range_end(key, name):
    """Close the range ``name`` opened last (nothing when none is open)."""
    try:
        key = chosen(key) if callable(key) else key
        cap = captures.get(key) if isinstance(key, str) else None
        if cap is not None and cap.program is not None:
            open_ = [e for e in cap.ranges if e[0] == name]
            if open_:
                cap.close_range(open_[-1])
    except Exception as exc:
        _failed(key, f"closing the range {name!r}", exc)


def mark(key, name, guard=None):
    """An instant labelled ``name`` in the window."""
    try:
        cap = _open(key, guard)
        if cap is not None:
            cap.mark(name)
    except Exception as exc:
        _failed(key, f"the mark {name!r}", exc)


def ranged(key, name, guard=None):
    """A decorator: every call of the function is inside the range ``name`` (closed on every way out).

    ``key`` and ``guard`` as for :func:`patchkit.runtime.on_exit`: a key or a
    callable of the function's arguments returning one, and an optional
    condition on them; either raising counts as no range (said once).
    """
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            entry = cap = None
            try:
                if guard is None or holds(guard, key, args, kwargs):
                    cap = _window(chosen(key, args, kwargs) if callable(key) else key)
                    entry = cap.open_range(name) if cap is not None else None
            except Exception as exc:
                _failed(key, f"opening the range {name!r}", exc)
            try:
                return fn(*args, **kwargs)
            finally:
                if entry is not None:
                    try:
                        cap.close_range(entry)
                    except Exception as exc:
                        _failed(cap.key, f"closing the range {name!r}", exc)
        return wrapper
    return decorate
