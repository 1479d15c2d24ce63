"""One attach from the first injection to the last window closed, as ``patchkit attach`` runs it on this machine
and each node of ``patchkit attach --ray`` runs it on its own (:mod:`patchkit.cluster.attach`).

:func:`run` gets into every process a prepared :class:`~patchkit.attach.session.Session` holds, and waits until
each window has closed; a process that refused, failed or did not answer makes every process come out again
before anything is recorded.  With ``--match``, a process that does not run the recipe's code (a launcher such as
torchrun's, which imports no training module) is passed over rather than refused: :func:`passed_over`.
:func:`ended_well` says whether a process gave the job its own code back; :func:`note_folders` adds the capture
folders to this home's index, so ``patchkit traces`` finds them: only those inside the folder root named for the
capture (a job's status may name any path).  A job's text in an error is escaped onto one line.
"""

from __future__ import annotations

import os
import stat
from typing import Any, Callable, Dict, List, Optional

from patchkit.attach.process import AttachError
from patchkit.attach.session import Attached, Session
from patchkit.core.errors import PatchkitError
from patchkit.core.printable import printable

SKIPPED = "has not imported"  # the agent's refusal of a process that does not run the recipe's code
IN = ("attached", "recording", "closing")  # the code is in: a window waits, is open, or is closing
FAILED = ("refused", "failed", "no answer", "gone")


def passed_over(a: Attached, match: Optional[str]) -> bool:
    """With ``match`` (``--match``), a process that has not imported the recipe's module is passed over."""
    return bool(match) and SKIPPED in str(a.status.get("error"))


def ended_well(a: Attached) -> bool:
    """The window closed (or was closed) and every function has its own code back."""
    return a.state == "restored" and a.status.get("original_code") is True


REMIND = 60.0  # seconds a window may wait for its first call before the caller is told; then twice as long each time


def run(s: Session, on_change: Optional[Callable[[Attached], None]] = None, timeout: float = 60,
        match: Optional[str] = None, on_waiting: Optional[Callable[[List[Attached], float], None]] = None,
        remind: float = REMIND) -> None:
    """Get into every process of ``s`` (prepared), then wait until every window has closed.

    A process that refused, failed, ended or did not take the code within ``timeout`` seconds (one ``match``
    passes over aside), or none in at all: every process is asked out again, the request folders go, and
    :class:`AttachError` names the first one and why; nothing stays changed.  ``on_change`` is told each process
    whose state changed; ``on_waiting`` is told the processes whose window still waits for its first call, with
    the seconds waited, after ``remind`` seconds, then twice as long each time.  KeyboardInterrupt is left to the
    caller, which asks every process out (:meth:`Session.detach`)."""
    s.inject()
    s.wait(on_change, timeout, until=IN)
    bad = [a for a in s.attached if a.state in FAILED and not passed_over(a, match)]
    if bad or not any(a.state in IN + ("restored",) for a in s.attached):
        s.detach(on_change)
        s.close()
        first = bad[0] if bad else s.attached[0]
        raise AttachError(printable(f"pid {first.pid}: {first.state}: {first.status.get('error')}"), None,
                          "nothing stays changed in any process; fix the cause and attach again")
    waited = 0.0
    while not s.wait(on_change, remind if on_waiting else None):
        waited += remind
        remind *= 2
        waiting = [a for a in s.attached if a.state == "attached"]
        if waiting:
            on_waiting(waiting, waited)


def note_folders(s: Session) -> None:
    """Each capture's folder, in this home's index too (the job noted it in its own, which may be another): only
    the folders of traces :func:`trace_folders` finds inside the folder this command named for the capture."""
    from patchkit.core import manifest

    for a in s.attached:
        for folder in trace_folders(a.status, getattr(a, "save_folder", ""), a.target.proc.uid):
            try:
                manifest.note_folder(folder)
            except (OSError, PatchkitError):
                pass


def trace_folders(status: Dict[str, Any], folder: str, uid: int) -> List[str]:
    """The folders of the traces ``status`` names that are this capture's: the trace, resolved, inside ``folder``
    (the save folder this user named, resolved at injection: one that resolves elsewhere now takes nothing), a
    regular file of the job's user ``uid``.  Nothing else a job says goes into this home's index."""
    from patchkit.core.confined import within

    real = os.path.normpath(folder) if folder else ""
    if not real or real == os.sep or os.path.realpath(real) != real:
        return []
    found: List[str] = []
    for c in status.get("captures") or []:
        for trace in c.get("traces") or [] if isinstance(c, dict) else []:
            path = os.path.realpath(trace) if isinstance(trace, str) and os.path.isabs(trace) else ""
            if not path or not within(path, real):
                continue
            try:
                st = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_uid == uid and os.path.dirname(path) not in found:
                found.append(os.path.dirname(path))
    return found
