"""Capture on demand: the files through which `patchkit capture` asks running processes for a window.

Under ``$PATCHKIT_HOME`` (each node its own)::

    processes/<host>_<pid>_<key>.json       a patched process with a manual-trigger key, registered when the key
                                            is first stepped: pid, host, recipe, key, role, rank, time
    requests/<id>.json                      what `patchkit capture` asks: recipe, steps, ranks, role, time
    answers/<id>/<host>_<pid>_<key>.json    what a process recorded for that request: steps, traces, error

Every file is written whole (a temporary file, then a rename), in a folder
opened as :func:`patchkit.core.private.open_state` opens the state folder:
reached without following a link another user controls, owned by this
process's user and writable by nobody else, no link inside followed.  A
request is taken only by processes registered before it was made, and each
process takes each request once.  Standard library only: the patched process reads
these from a daemon thread (:mod:`patchkit.runtime.ondemand`).

Nothing read here is trusted (the job may run as root): a file is read only
if plain (no link followed) and small (:data:`MAX_FILE_BYTES`); a request
id is a plain name (:data:`ID_PATTERN`, no ``..``); steps are bounded by
:data:`MAX_STEPS`; an answer is written only inside ``answers/``.  What a process takes as a request: see
:func:`patchkit.runtime.ondemand.requests`.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import stat
import time
import uuid
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from patchkit.core.folders import Folder
    from patchkit.core.progress import Progress

PROCESSES, REQUESTS, ANSWERS = "processes", "requests", "answers"
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # whole ids only (fullmatch), and no ".."
# The most steps one request may ask for.  A torch / torch_npu profiler keeps every event of its window in the
# job's memory until the window closes and the trace is written: a training step of a large model records tens
# of thousands of operator and kernel events (far more with shapes, stacks or memory), some MB a step, so 1000
# steps already means many GB of host memory and a trace no viewer opens (10 million steps took even the small
# demo job to 8 GB in 45 s).  The captures people use hold 1 to 10 steps.
MAX_STEPS = 1000
MAX_FILE_BYTES = 64 * 1024  # a request, registration or answer is a few hundred bytes


def valid_id(request_id: Any) -> bool:
    """Whether ``request_id`` is a plain name, safe as a file and folder name under ``requests/`` and ``answers/``."""
    return isinstance(request_id, str) and ID_PATTERN.fullmatch(request_id) is not None and ".." not in request_id


def _plain_id(request_id: Any) -> str:
    if not valid_id(request_id):
        raise ValueError(f"{request_id!r} is not a plain request id")
    return request_id


def whole(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def valid_steps(steps: Any) -> bool:
    return whole(steps, 1, MAX_STEPS)


def home() -> str:
    from patchkit.core.manifest import home as patchkit_home  # standard library only

    return patchkit_home()


def _safe(key: str) -> str:
    return key.replace("/", ".")


def state_folder(*names: str, create: bool = False) -> Optional[Folder]:
    """The folder ``names`` lead to in the state folder, opened and checked (None: missing and not made); refused
    (:class:`patchkit.core.private.NotPrivate`) when another user owns, can write or redirects it."""
    from patchkit.core.private import open_state  # standard library only

    return open_state(*names, create=create)


def write_json(where: Sequence[str], name: str, data: Dict[str, Any]) -> str:
    """``name`` in the state folder's ``where`` (made 0700 where missing), written whole (0600); its path.
    A full disk, say, is a located error (:func:`patchkit.core.private.write`), and nothing of the file is left."""
    from patchkit.core.private import write

    with state_folder(*where, create=True) as folder:
        write(folder, name, json.dumps(data).encode("utf-8"))
        return folder.join(name)


def read_file(path: str, private: bool = False, folder: Optional[Folder] = None) -> Tuple[Optional[Any], str]:
    """``(data, "")`` from the JSON file at ``path`` (a name in ``folder`` when given), or ``(None, why)``.

    A plain file only (a link is not followed, a FIFO cannot block), at most :data:`MAX_FILE_BYTES`; with
    ``private``, also owned by this process's user and writable by nobody else.  FileNotFoundError when the
    file is gone (withdrawn between listing and reading: nothing to say).
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0),
                     dir_fd=None if folder is None else folder.fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if os.path.islink(path if folder is None else folder.join(path)):
            return None, "it is a symbolic link (not followed)"
        return None, f"it cannot be opened ({exc.strerror})"
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "it is not a plain file"
        if private and st.st_uid != os.geteuid():
            return None, f"it is owned by uid {st.st_uid}, not by this job's user (uid {os.geteuid()})"
        if private and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None, f"others can write it (mode {stat.S_IMODE(st.st_mode):o}); it must be 0600 or 0644"
        if st.st_size > MAX_FILE_BYTES:
            return None, f"it is larger than {MAX_FILE_BYTES} bytes"
        raw = handle.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        return None, f"it is larger than {MAX_FILE_BYTES} bytes"
    try:
        return json.loads(raw.decode("utf-8")), ""
    except (ValueError, RecursionError) as exc:  # bad UTF-8 or JSON, a 5000-digit number, nesting too deep
        return None, f"it is not valid JSON ({type(exc).__name__}: {str(exc)[:80]})"


def json_names(folder: Folder) -> List[str]:
    return sorted(n for n in folder.names() if n.endswith(".json") and not n.startswith("."))


def _read_all(*where: str) -> List[Dict[str, Any]]:
    folder, out = state_folder(*where), []
    if folder is None:  # none yet
        return out
    with folder:
        for name in json_names(folder):
            try:
                data, _why = read_file(name, folder=folder)
            except FileNotFoundError:
                continue
            if isinstance(data, dict):  # else refused, or not ours
                data["file"] = folder.join(name)
                out.append(data)
    return out


def _remove(*where: str) -> None:
    """The file ``where`` names in the state folder, removed if it is there (nothing said: it is over)."""
    try:
        folder = state_folder(*where[:-1])
        if folder is not None:
            with folder:
                folder.unlink(where[-1])
    except Exception:  # noqa: BLE001 - gone already, or a state folder that is refused elsewhere
        pass


# ---------------------------------------------------------------- in the patched process


def register(key: str, rank: int, pid: Optional[int] = None) -> Dict[str, Any]:
    pid = os.getpid() if pid is None else pid
    host = socket.gethostname()
    entry = {"pid": pid, "host": host, "recipe": key.partition("/")[0], "key": key, "role": key.partition("/")[2],
             "rank": rank, "time": time.time()}
    write_json((PROCESSES,), f"{host}_{pid}_{_safe(key)}.json", entry)
    return entry


def unregister(key: str) -> None:
    _remove(PROCESSES, f"{socket.gethostname()}_{os.getpid()}_{_safe(key)}.json")


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
    write_json((ANSWERS, _plain_id(request_id)), f"{data['host']}_{data['pid']}_{_safe(key)}.json", data)


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
    for entry in _read_all(PROCESSES):
        if not _registration(entry):
            continue  # not one `register` wrote
        if entry.get("host") == host and not alive(entry["pid"]):
            _remove(PROCESSES, os.path.basename(entry["file"]))
            continue
        if matches({"recipe": recipe, "ranks": list(ranks), "role": role, "time": entry.get("time", 0)}, entry):
            out.append(entry)
    return out


def _registration(entry: Dict[str, Any]) -> bool:
    """Whether ``entry`` has the fields `register` writes, of their types (a pid `os.kill` takes)."""
    return (whole(entry.get("pid"), 1, 2 ** 31 - 1) and whole(entry.get("rank"), 0, 2 ** 31)
            and all(isinstance(entry.get(k), str) for k in ("host", "recipe", "key", "role"))
            and isinstance(entry.get("time"), (int, float)) and math.isfinite(entry["time"]))


def ask(recipe: str, steps: int, ranks: Sequence[int] = (), role: str = "") -> Dict[str, Any]:
    if not valid_steps(steps):
        raise ValueError(f"steps must be a whole number from 1 to {MAX_STEPS}")  # (no repr: 5000 digits raise)
    request = {"id": f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}", "recipe": recipe, "steps": steps,
               "ranks": list(ranks), "role": role, "time": time.time()}
    write_json((REQUESTS,), f"{request['id']}.json", request)
    return request


def answers(request_id: str) -> Dict[str, Dict[str, Any]]:
    """``host_pid_key`` -> the answer written for the request."""
    return {os.path.basename(a["file"])[:-5]: a for a in _read_all(ANSWERS, _plain_id(request_id))}


def withdraw(request_id: str) -> None:
    """The request is over: no process takes it any more (its answers stay, for the record)."""
    _remove(REQUESTS, f"{_plain_id(request_id)}.json")


def name(entry: Dict[str, Any]) -> str:
    return f"{entry['host']}_{entry['pid']}_{_safe(entry['key'])}"


def ask_and_wait(recipe: str, steps: int, ranks: Sequence[int] = (), role: str = "", timeout: float = 300.0,
                 poll: float = 0.2, progress: Optional[Progress] = None) -> Dict[str, Any]:
    """Ask every matching process here for ``steps`` steps and wait for each to answer, die, or time out.

    Returns ``{"host", "request", "asked": [registration...], "answers": {name: answer}, "dead": [name...],
    "late": [name...]}`` (names as :func:`name` makes them).  ``progress`` is told the processes asked, then
    each one that answered or died.
    """
    targets = registered(recipe, ranks, role)
    out: Dict[str, Any] = {"host": socket.gethostname(), "request": None, "asked": targets, "answers": {},
                           "dead": [], "late": []}
    if not targets:
        return out
    request = ask(recipe, steps, ranks, role)
    out["request"] = request["id"]
    deadline = time.time() + timeout
    if progress is not None:
        progress.start(len(targets), f"waiting for {len(targets)} process(es) to record {steps} step(s)", "answers")
    told = 0
    try:
        while True:
            got = answers(request["id"])
            waiting = [e for e in targets if name(e) not in got]
            dead = [e for e in waiting if e["host"] == out["host"] and not alive(int(e["pid"]))]
            finished = len(targets) - len(waiting) + len(dead)  # answered, or ended before it could
            if progress is not None and finished > told:
                progress.advance(finished - told)
                told = finished
            if len(waiting) == len(dead) or time.time() >= deadline:
                break
            time.sleep(poll)
    finally:
        withdraw(request["id"])
    out["answers"] = {name(e): got[name(e)] for e in targets if name(e) in got}
    out["dead"] = [name(e) for e in dead]
    out["late"] = [name(e) for e in waiting if e not in dead]
    return out
