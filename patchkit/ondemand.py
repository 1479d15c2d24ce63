"""Capture on demand: the files through which `patchkit capture` asks running processes for a window.

Under ``$PATCHKIT_HOME`` (each node its own)::

    processes/<host>_<pid>_<key>.json       a patched process with a manual-trigger key, registered when the key
                                            is first stepped: pid, host, recipe, key, role, rank, time
    requests/<id>.json                      what `patchkit capture` asks: recipe, steps, ranks, role, time
    answers/<id>/<host>_<pid>_<key>.json    what a process recorded for that request: steps, traces, error

Every file is written whole (a temporary file, then a rename).  A request
is taken only by processes registered before it was made, and each process
takes each request once.  Standard library only: the patched process reads
these from a daemon thread (:mod:`patchkit.runtime_ondemand`).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
import uuid
from typing import Any, Dict, List, Optional, Sequence

PROCESSES, REQUESTS, ANSWERS = "processes", "requests", "answers"


def home() -> str:
    from .manifest import home as patchkit_home  # standard library only

    return patchkit_home()


def _path(*parts: str) -> str:
    return os.path.join(home(), *parts)


def _safe(key: str) -> str:
    return key.replace("/", ".")


def write_json(path: str, data: Dict[str, Any]) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _read_all(folder: str) -> List[Dict[str, Any]]:
    out = []
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json") and not n.startswith("."))
    except FileNotFoundError:
        return out
    for name in names:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            continue  # being replaced, or not ours
        if isinstance(data, dict):
            data["file"] = os.path.join(folder, name)
            out.append(data)
    return out


# ---------------------------------------------------------------- in the patched process


def register(key: str, rank: int, pid: Optional[int] = None) -> Dict[str, Any]:
    pid = os.getpid() if pid is None else pid
    host = socket.gethostname()
    entry = {"pid": pid, "host": host, "recipe": key.partition("/")[0], "key": key, "role": key.partition("/")[2],
             "rank": rank, "time": time.time()}
    write_json(_path(PROCESSES, f"{host}_{pid}_{_safe(key)}.json"), entry)
    return entry


def unregister(key: str) -> None:
    try:
        os.unlink(_path(PROCESSES, f"{socket.gethostname()}_{os.getpid()}_{_safe(key)}.json"))
    except OSError:
        pass


def requests() -> List[Dict[str, Any]]:
    return _read_all(_path(REQUESTS))


def matches(request: Dict[str, Any], entry: Dict[str, Any]) -> bool:
    """Whether ``request`` asks the process ``entry`` (a registration) for a window."""
    if request.get("recipe") != entry["recipe"] or request.get("time", 0) < entry["time"]:
        return False
    if request.get("role") and request["role"] != entry["role"]:
        return False
    ranks = request.get("ranks")
    return not ranks or entry["rank"] in ranks


def answer(request_id: str, key: str, **result: Any) -> None:
    data = {"pid": os.getpid(), "host": socket.gethostname(), "key": key, "time": time.time(), **result}
    write_json(_path(ANSWERS, request_id, f"{data['host']}_{data['pid']}_{_safe(key)}.json"), data)


# ---------------------------------------------------------------- in `patchkit capture`


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def registered(recipe: str, ranks: Sequence[int] = (), role: str = "") -> List[Dict[str, Any]]:
    """The living processes of ``recipe`` here that such a request would ask; the files of dead ones are removed."""
    host = socket.gethostname()
    out = []
    for entry in _read_all(_path(PROCESSES)):
        if entry.get("host") == host and not alive(int(entry.get("pid", 0))):
            try:
                os.unlink(entry["file"])
            except OSError:
                pass
            continue
        if matches({"recipe": recipe, "ranks": list(ranks), "role": role, "time": entry.get("time", 0)}, entry):
            out.append(entry)
    return out


def ask(recipe: str, steps: int, ranks: Sequence[int] = (), role: str = "") -> Dict[str, Any]:
    request = {"id": f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}", "recipe": recipe, "steps": steps,
               "ranks": list(ranks), "role": role, "time": time.time()}
    write_json(_path(REQUESTS, f"{request['id']}.json"), request)
    return request


def answers(request_id: str) -> Dict[str, Dict[str, Any]]:
    """``host_pid_key`` -> the answer written for the request."""
    return {os.path.basename(a["file"])[:-5]: a for a in _read_all(_path(ANSWERS, request_id))}


def withdraw(request_id: str) -> None:
    """The request is over: no process takes it any more (its answers stay, for the record)."""
    try:
        os.unlink(_path(REQUESTS, f"{request_id}.json"))
    except OSError:
        pass


def name(entry: Dict[str, Any]) -> str:
    return f"{entry['host']}_{entry['pid']}_{_safe(entry['key'])}"


def ask_and_wait(recipe: str, steps: int, ranks: Sequence[int] = (), role: str = "", timeout: float = 300.0,
                 poll: float = 0.2) -> Dict[str, Any]:
    """Ask every matching process here for ``steps`` steps and wait for each to answer, die, or time out.

    Returns ``{"host", "request", "asked": [registration...], "answers": {name: answer}, "dead": [name...],
    "late": [name...]}`` (names as :func:`name` makes them).
    """
    targets = registered(recipe, ranks, role)
    out: Dict[str, Any] = {"host": socket.gethostname(), "request": None, "asked": targets, "answers": {},
                           "dead": [], "late": []}
    if not targets:
        return out
    request = ask(recipe, steps, ranks, role)
    out["request"] = request["id"]
    deadline = time.time() + timeout
    try:
        while True:
            got = answers(request["id"])
            waiting = [e for e in targets if name(e) not in got]
            dead = [e for e in waiting if e["host"] == out["host"] and not alive(int(e["pid"]))]
            if len(waiting) == len(dead) or time.time() >= deadline:
                break
            time.sleep(poll)
    finally:
        withdraw(request["id"])
    out["answers"] = {name(e): got[name(e)] for e in targets if name(e) in got}
    out["dead"] = [name(e) for e in dead]
    out["late"] = [name(e) for e in waiting if e not in dead]
    return out
