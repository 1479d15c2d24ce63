"""What this PATCHKIT_HOME attached, for ``patchkit attach --status PID`` and ``patchkit detach PID``.

While attached, ``$PATCHKIT_HOME/attached/<pid>-<start>.json`` (private) names the request folder, so both find the
agent from another terminal, or after the attaching command was killed.  What the job writes is read through
:mod:`patchkit.attach.channel` (typed, bounded: an unreadable status is "failed", in one line), and a request
folder whose attaching command no longer runs goes through :mod:`patchkit.attach.sweep` once its agent is done.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List, NamedTuple, Optional

from patchkit.attach import channel, payload
from patchkit.attach.process import AttachError, read, where
from patchkit.core import private
from patchkit.core.errors import PatchkitError
from patchkit.runtime.attach import protocol

POLL = 0.05
DONE = protocol.DONE
RECORDS = "attached"


def read_status(base: str) -> Optional[Dict[str, Any]]:
    """The agent's last status in the request folder ``base`` (typed: :func:`patchkit.attach.channel.read`), or None
    while there is none; one the job made unreadable is "failed", with ``unreadable`` True."""
    status = channel.read(base)
    if status is not None and status["state"] == channel.UNREADABLE:
        return {"state": "failed", "error": status["error"], "unreadable": True}
    return status


def records_dir():
    """The folder of attach's records in the state folder, open and checked (:func:`patchkit.core.private.open_state`)."""
    return private.open_state(RECORDS, create=True)


class Record(NamedTuple):
    pid: int
    started: int
    base: str
    out: str
    recipe: str
    attacher: int
    path: str
    attacher_started: int = -1  # the attaching command's start (clock ticks after boot): with its pid, names it


def write_record(a, recipe: str) -> None:
    rec = {"pid": a.pid, "started": a.target.proc.started, "base": a.folder.base, "out": a.folder.out,
           "recipe": recipe, "attacher": os.getpid(), "attacher_started": _started(os.getpid()), "time": time.time()}
    with records_dir() as folder:
        private.write(folder, f"{a.pid}-{a.target.proc.started}.json", json.dumps(rec).encode("utf-8"))


def records(pid: int) -> List[Record]:
    """What this PATCHKIT_HOME attached to ``pid`` (the process still running: not an earlier one of that pid)."""
    out = []
    with records_dir() as folder:
        for name in sorted(folder.names()):
            if not name.startswith(f"{pid}-") or not name.endswith(".json"):
                continue
            try:
                data = json.loads(private.read(folder, name, 1 << 16) or b"{}")
                rec = Record(int(data["pid"]), int(data["started"]), str(data["base"]), str(data["out"]),
                             str(data["recipe"]), int(data["attacher"]), folder.join(name),
                             int(data.get("attacher_started", -1)))
            except (ValueError, KeyError, TypeError, PatchkitError):
                continue
            try:
                running = read(pid).started == rec.started
            except AttachError:
                running = False
            if running:
                out.append(rec)
            else:  # the job ended: nothing attached any more
                forget(rec)
    return out


def forget(rec: Record) -> None:
    try:
        with records_dir() as folder:
            folder.unlink(os.path.basename(rec.path))
    except (OSError, PatchkitError):
        pass


ask_detach = channel.ask_detach  # "" when asked; else why not (nothing the job put there followed or waited on)


def detach(pid: int, timeout: float = 60) -> List[Dict[str, Any]]:
    """``patchkit detach PID``: the agents this home attached to ``pid`` put the job's own code back.  Where the
    attaching command no longer runs, the request folder goes once the agent is done, or could not be asked, or
    wrote an unreadable status, or did not answer within ``timeout`` (the agent then restores when it sees it go)."""
    found = records(pid)
    if not found:
        raise AttachError(f"nothing is attached to process {pid} from this PATCHKIT_HOME", where(pid),
                          f"`patchkit attach --status {pid}` says what is")
    asked = {rec.path: ask_detach(rec.base) for rec in found}
    deadline = time.time() + timeout
    out = []
    for rec in found:
        if asked[rec.path]:
            status = {"state": "failed", "error": f"{asked[rec.path]}: not followed"}
        else:
            status = read_status(rec.base) or {}
        while status.get("state") not in DONE and time.time() < deadline:
            time.sleep(POLL)
            if not os.path.isdir(rec.base):  # the attaching command saw the end first, said it, and cleaned up
                status = dict(status, state="handed over", attacher=rec.attacher)
                break
            status = read_status(rec.base) or status
        out.append(dict(status, recipe=rec.recipe, **cleaned(rec)))
    return out


def cleaned(rec: Record) -> Dict[str, str]:
    """The request folder of ``rec`` removed and its record forgotten, unless the attaching command still runs (it
    does that itself); what the bounds left behind, if anything, as ``{"left": line}``."""
    if _running(rec.attacher, rec.attacher_started):
        return {}
    left = payload.remove(payload.Folder(rec.base, rec.out, "", "", ""))
    forget(rec)
    return {"left": left} if left else {}


def _started(pid: int) -> int:
    try:
        return read(pid).started
    except AttachError:
        return -1


def _running(pid: int, started: int) -> bool:
    """Whether the attaching command ``pid`` that started at ``started`` still runs (not a later process that got
    its pid: the same check as a job's, :func:`patchkit.attach.process.alive`)."""
    return started >= 0 and _started(pid) == started


def status(pid: int) -> List[Dict[str, Any]]:
    """``patchkit attach --status PID``: what this home attached to ``pid``, as its agents last said; the request
    folder of one that is done (or wrote an unreadable status) goes when its attaching command no longer runs."""
    out = []
    for rec in records(pid):
        said = read_status(rec.base) or {"state": "queued"}
        out.append(dict(said, recipe=rec.recipe, **(cleaned(rec) if said["state"] in DONE else {})))
    return out
