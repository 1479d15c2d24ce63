"""Capture on demand, in the patched process: a manual-trigger key waits, parked, until `patchkit capture` asks.

A key whose recipe says ``schedule.trigger: manual`` is registered (see
:mod:`patchkit.runtime.requests`) the first time it is stepped, then *parked*: put
in the finished set, so its steps cost what a step after its window costs
(one set lookup, no lock).  A daemon thread polls the requests folder every
``$PATCHKIT_POLL`` seconds (0.5); for a request that asks this process, it
notes the steps asked and un-parks the key, so the next step starts a capture
recording exactly that many steps.  When the window closes, the answer (the
steps and traces, or the error) is written for `patchkit capture`, and the
key is parked again.  No signal handler: nothing that could clash with the
host's.  Standard library only; nothing here raises into the job.

A request is read, not trusted (:func:`requests`): it is taken only from a
plain file in ``requests/`` (a symbolic link is not followed), of at most
``ondemand.MAX_FILE_BYTES``, owned by this process's user and writable by
nobody else, holding a JSON object whose ``id`` is a plain name equal to the
file's and whose ``steps`` are 1 to ``ondemand.MAX_STEPS``.  Any other file
there is ignored, with one line on stderr (once per file).
"""

from __future__ import annotations

import atexit
import math
import os
import threading
import time

from patchkit.runtime import requests as ondemand
from patchkit.runtime.process import captures, finished, lock, once, reason, say

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
        try:
            _entries[key] = ondemand.register(key, rank)
        except Exception as exc:  # a refused state folder (another user's), a full disk: no capture on demand
            finished.add(key)
            once((key, "manual"), f"{key}: `patchkit capture` cannot reach this process, so nothing is recorded "
                 f"(schedule.trigger manual): its registration was not written: {reason(exc)}")
            return
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
            once((key, "answer"), f"{key}: could not write the answer to `patchkit capture`: {reason(exc)}")
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
        except Exception as exc:  # pragma: no cover - poll() says its own failures; the thread never ends
            _poll_failed(exc)


def _poll_failed(exc):
    once(("ondemand", "poll"), f"reading capture requests failed ({reason(exc)}); will keep trying")


def check_request(data, file_name):
    """Why the request ``data``, read from ``requests/<file_name>``, is refused; "" when it is well formed."""
    if not isinstance(data, dict):
        return "it is not a JSON object"
    if not ondemand.valid_id(data.get("id")):
        return "its id is not a plain name (letters, digits, '.', '_', '-'; at most 64; no '..')"
    if file_name != f"{data['id']}.json":
        return "its id is not its file's name"
    if not ondemand.valid_steps(data.get("steps")):
        return f"its steps are not a whole number from 1 to {ondemand.MAX_STEPS} (a profiler window holds " \
               "every event of its steps in memory until it closes)"
    ranks = data.get("ranks") or []
    when = data.get("time")
    if (not isinstance(data.get("recipe"), str) or not isinstance(data.get("role") or "", str)
            or not isinstance(ranks, list) or not all(ondemand.whole(r, 0, 2 ** 31) for r in ranks)
            or not isinstance(when, (int, float)) or isinstance(when, bool) or not math.isfinite(when)):
        return "its recipe, role, ranks or time are not what `patchkit capture` writes"
    return ""


def requests(refused=None):
    """The well-formed requests; each refused file is added to the list ``refused`` as (path, why).
    A state folder that is refused (another user's, or reached through their link) raises: nothing is read."""
    folder, out = ondemand.state_folder(ondemand.REQUESTS), []
    if folder is None:
        return out
    with folder:
        for name in ondemand.json_names(folder):
            path = folder.join(name)
            try:
                data, why = ondemand.read_file(name, private=True, folder=folder)
            except FileNotFoundError:  # withdrawn since the listing
                continue
            why = why or check_request(data, name)
            if why:
                if refused is not None:
                    refused.append((path, why))
                continue
            data["file"] = path
            out.append(data)
    return out


def poll():
    """Act on the requests that ask this process and that it has not seen yet; say once why a file is ignored."""
    refused = []
    try:
        found = requests(refused)
    except Exception as exc:  # a state folder refused (another user's), a requests/ that is not a folder
        _poll_failed(exc)
        return
    for request in found:
        try:
            _act(request)
        except Exception as exc:  # one request gone wrong keeps no other from being taken
            once(("request", request["file"]), f"capture request {request['file']!r} failed ({reason(exc)})")
    for path, why in refused:
        once(("request", path), f"ignoring the capture request {path!r}: {why}")


def _act(request):
    rid, steps = request["id"], request["steps"]
    if rid in _taken:
        return
    asked = [k for k, entry in list(_entries.items()) if ondemand.matches(request, entry)]
    if not asked:
        return
    _taken.add(rid)
    with lock:
        for key in asked:
            if key in captures or key in pending:
                answerer(key, rid)(error="busy: a window asked for earlier is still being recorded")
                continue
            pending[key] = (rid, steps)
            finished.discard(key)
    say(f"{', '.join(asked)}: `patchkit capture` asks for {steps} step(s) (request {rid})")
