"""Capture on demand, in the patched process: a manual-trigger key waits, parked, until `patchkit capture` asks.

A key whose recipe says ``schedule.trigger: manual`` is registered (see
:mod:`patchkit.ondemand`) the first time it is stepped, then *parked*: put
in the finished set, so its steps cost what a step after its window costs
(one set lookup, no lock).  A daemon thread polls the requests folder every
``$PATCHKIT_POLL`` seconds (0.5); for a request that asks this process, it
notes the steps asked and un-parks the key, so the next step starts a capture
recording exactly that many steps.  When the window closes, the answer (the
steps and traces, or the error) is written for `patchkit capture`, and the
key is parked again.  No signal handler: nothing that could clash with the
host's.  Standard library only; nothing here raises into the job.
"""

from __future__ import annotations

import atexit
import os
import threading
import time

from . import ondemand
from .runtime_registry import captures, finished, lock, once, say

pending = {}  # key -> (request id, steps asked), set by the watcher, taken by the next start of the key
_entries = {}  # key -> its registration
_taken = set()  # request ids this process has acted on
_thread = []


def poll_interval():
    try:
        return max(0.01, float(os.environ.get("PATCHKIT_POLL", "0.5")))
    except ValueError:
        return 0.5


def take(key):
    """The request waiting for ``key`` (id, steps), or None."""
    return pending.pop(key, None)


def park(key, rank):
    """``key`` waits for a request: registered (once), watched, its steps returning at once."""
    if key not in _entries:
        _entries[key] = ondemand.register(key, rank)
        once((key, "manual"), f"{key}: waiting for `patchkit capture {key.partition('/')[0]}` "
             "(schedule.trigger manual); nothing is recorded until then")
        _start()
    finished.add(key)


def answerer(key, request_id):
    """What a capture started for a request calls when its window closes, or when it fails."""
    def answer(first=None, last=None, traces=(), error=None):
        try:
            ondemand.answer(request_id, key, first=first, last=last, traces=list(traces), error=error)
        except Exception as exc:  # a full disk, a removed home: the job goes on
            once((key, "answer"), f"{key}: could not write the answer to `patchkit capture`: {exc}")
    return answer


def _start():
    if _thread:
        return
    thread = threading.Thread(target=_watch, name="patchkit-capture-requests", daemon=True)
    _thread.append(thread)
    atexit.register(_unregister)
    thread.start()


def _unregister():
    for key in list(_entries):
        ondemand.unregister(key)


def _watch():
    while True:
        time.sleep(poll_interval())
        try:
            poll()
        except Exception as exc:
            once(("ondemand", "poll"), f"reading capture requests failed ({type(exc).__name__}: {exc}); "
                 "will keep trying")


def poll():
    """Act on the requests that ask this process and that it has not seen yet."""
    for request in ondemand.requests():
        rid = request.get("id")
        if rid in _taken:
            continue
        asked = [k for k, entry in list(_entries.items()) if ondemand.matches(request, entry)]
        if not asked:
            continue
        _taken.add(rid)
        try:
            steps = max(1, int(request.get("steps", 1)))
        except (TypeError, ValueError):
            steps = 1
        with lock:
            for key in asked:
                if key in captures or key in pending:
                    answerer(key, rid)(error="busy: a window asked for earlier is still being recorded")
                    continue
                pending[key] = (rid, steps)
                finished.discard(key)
        say(f"{', '.join(asked)}: `patchkit capture` asks for {steps} step(s) (request {rid})")
