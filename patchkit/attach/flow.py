"""One attach from the first injection to the last window closed, as ``patchkit attach`` runs it on this machine
and each node of ``patchkit attach --ray`` runs it on its own (:mod:`patchkit.cluster.attach`).

:func:`run` gets into every process a prepared :class:`~patchkit.attach.session.Session` holds, and waits until
each window has closed; a process that refused, failed or did not answer makes every process come out again
before anything is recorded.  With ``--match``, a process that does not run the recipe's code (a launcher such as
torchrun's, which imports no training module), that did not take the code in time (its main thread blocked in a
call), or another user's that refused, failed or ended is passed over rather than refused: :func:`passed_over`.
:func:`ended_well` says whether a process gave the job its own code back with what it recorded kept
(:func:`unrecorded`: what it failed to record, and what to do; :func:`all_recorded`: the command's verdict, which
fails it too when no process recorded a step); :func:`note_folders` adds the capture folders to this home's index,
so ``patchkit traces`` finds them: only those inside the folder root named for the capture (a job's status may name
any path).  A job's text in an error is escaped onto one line.
"""

from __future__ import annotations

import os
import stat
from typing import Any, Callable, Dict, List, Optional, Tuple

from patchkit.attach.passover import nothing_left
from patchkit.attach.process import AttachError
from patchkit.attach.records import DONE
from patchkit.attach.session import Attached, Session
from patchkit.core.errors import PatchkitError
from patchkit.core.printable import printable
from patchkit.runtime.attach import protocol
from patchkit.runtime.attach.protocol import Reason, State

IN = protocol.IN  # the code is in: a window waits, is open, or is closing
FAILED = protocol.FAILING


def passed_over(a: Attached, match: Optional[str]) -> bool:
    """With ``match`` (``--match``), a process that has not imported the recipe's module, did not answer within the
    timeout, or is another user's and refused, failed or ended before it was in (it may say anything it likes:
    no other user's process stops the command) is passed over.  A process of this user's own that refused,
    failed or ended still brings every process out: the ranks of one job record together, or none does."""
    if not match or a.state not in FAILED:
        return False
    return a.state == State.NO_ANSWER or skipped(a.status) or not _own(a)


def skipped(status: Dict[str, Any]) -> bool:
    """The agent refused because the job does not run the recipe's code (it has not imported its module)."""
    return status.get("reason") == Reason.NOT_IMPORTED


def _own(a: Attached) -> bool:
    target = getattr(a, "target", None)
    return target is None or target.proc.uid == os.geteuid()


def why_passed(state: str, error: object, reason: object = None) -> str:
    """Why a process in ``state`` (its agent's ``error`` and ``reason``) was passed over, as said on its line."""
    if state == "no answer":
        return (f"no answer: {error} (its main thread is blocked in a call, or stopped?); the request was withdrawn, "
                "nothing changed")
    return str(error) if state == "passed over" or reason == Reason.NOT_IMPORTED else f"{state}: {error}"


def ended_well(a: Attached) -> bool:
    """The window closed (or was closed), every function has its own code back, and what the process recorded was
    kept (:func:`unrecorded`)."""
    return a.state == "restored" and a.status.get("original_code") is True and unrecorded(a.status) is None


START = "could not start the profiler"  # how the runtime's error begins when a profiler does not start


def unrecorded(status: Dict[str, Any]) -> Optional[Tuple[str, str]]:
    """What a process that gave the job its code back failed to record, and what to do, from its agent's ``status``:
    its capture failed (a profiler that could not start, ...), a trace was not written whole, or its window was
    closed before a step ended.  None when it recorded, or when its capture never started there (the recipe's
    ``profiler.ranks`` leave it out, ...): whether any process recorded is :func:`all_recorded`'s question."""
    captures = [c for c in status.get("captures") or [] if isinstance(c, dict)]
    spans = [f"{a}-{b}" if a != b else str(a) for c in captures for a, b in c.get("recorded") or []]
    errors = [str(c["error"]) for c in captures if c.get("error")]
    lost = [f for c in captures for f in c.get("failed") or [] if isinstance(f, (list, tuple)) and len(f) == 2]
    if errors:
        what = (f"the capture failed after recording steps {', '.join(spans)}" if spans else
                "nothing recorded: the capture failed") + f" ({'; '.join(errors)})"
        other = " (or pick a profiler the job has with --backend)" * any(e.startswith(START) for e in errors)
        return what, ("what it recorded may be lost; " if spans else "") + \
            f"fix its cause (the job's stderr says it too){other} and attach again"
    if lost:
        return (f"steps {', '.join(spans)} recorded, but {len(lost)} trace(s) were not written whole "
                f"({lost[0][0]}: {lost[0][1]})", "nothing of them is kept; make room where profiler.save_path "
                "points and attach again")
    if captures and not spans:
        return ("nothing recorded: the window was closed before its first step ended",
                "attach again, and let the window close by itself after --steps steps")
    return None


def all_recorded(attached: List[Attached]) -> bool:
    """Whether each of ``attached`` gave the job its code back with nothing of what it recorded lost (False: one did
    not, and its line says why: :func:`unrecorded`).  :class:`AttachError` when each did but none recorded a step:
    no capture started in one (the recipe's ``profiler.ranks`` or ``profiler.replicas`` leave each out, it refused
    to start there, or it was detached before its window opened)."""
    if any(a.state != "restored" or unrecorded(a.status) for a in attached):
        return False
    if not any(c.get("recorded") for a in attached for c in a.status.get("captures") or [] if isinstance(c, dict)):
        raise AttachError("nothing recorded in any process: no capture started in one", None,
                          "the recipe's profiler.ranks or profiler.replicas leave every process out, or it was "
                          "detached before its window opened (the job's stderr says why a capture did not start): "
                          "attach again with settings that take these processes in")
    return True


REMIND = 60.0  # seconds a window may wait for its first call before the caller is told; then twice as long each time


def run(s: Session, on_change: Optional[Callable[[Attached], None]] = None, timeout: float = 60,
        match: Optional[str] = None, on_waiting: Optional[Callable[[List[Attached], float], None]] = None,
        remind: float = REMIND) -> None:
    """Get into every process of ``s`` (prepared), then wait until every window has closed.

    A process that refused, failed, ended or did not take the code within ``timeout`` seconds (those ``match``
    passes over aside), or none in at all: every process is asked out again, the request folders go, and
    :class:`AttachError` names the first one and why (:class:`~patchkit.attach.passover.PassedOver` each one,
    when ``match`` passed over every process); nothing stays changed.  ``on_change`` is told each process
    whose state changed; ``on_waiting`` is told the processes whose window still waits for its first call, with
    the seconds waited, after ``remind`` seconds, then twice as long each time.  KeyboardInterrupt is left to the
    caller, which asks every process out (:meth:`Session.detach`)."""
    s.inject()
    for a in s.attached:  # with --match, a process the code could not be sent to is said failed here
        if a.state in FAILED and on_change is not None:
            on_change(a)
    s.wait(on_change, timeout, until=IN)
    bad = [a for a in s.attached if a.state in FAILED and not passed_over(a, match)]
    if not bad and not any(a.state in IN + ("restored",) for a in s.attached):  # --match passed over every one
        s.detach(on_change)
        s.close()
        raise nothing_left([(p.pid, p.why) for p in getattr(s, "passed", ())] +
                           [(a.pid, why_passed(a.state, a.status.get("error"), a.status.get("reason"))) for a in s.attached])
    if bad or not any(a.state in IN + ("restored",) for a in s.attached):
        s.detach(on_change)
        s.close()
        first = bad[0] if bad else s.attached[0]
        raise AttachError(printable(f"pid {first.pid}: {first.state}: {first.status.get('error')}"), None,
                          "nothing stays changed in any process; fix the cause and attach again")
    waited = 0.0
    while not s.wait(on_change, remind if on_waiting or match else None):
        waited += remind
        remind *= 2
        others = others_left(s) if match else []
        if others:  # a decoy may say "attached" for ever: once this user's own are done, it is not waited for
            return let_go(s, others, on_change)
        waiting = [a for a in s.attached if a.state == "attached"]
        if waiting and on_waiting is not None:
            on_waiting(waiting, waited)


def through(s: Session, on_change: Optional[Callable[[Attached], None]] = None, timeout: float = 60,
            match: Optional[str] = None, on_waiting: Optional[Callable[[List[Attached], float], None]] = None,
            on_interrupt: Optional[Callable[[bool], None]] = None) -> bool:
    """One attach from the first injection to the end, as the command line and each node of ``--ray`` run it:
    :func:`run`; on KeyboardInterrupt (Ctrl-C, SIGTERM as the command line turns it, Ray's cancel on a node)
    every process is asked out and waited for, ``on_interrupt(False)`` told first, ``on_interrupt(True)`` when a
    second interrupt stops the wait (each job then restores at its next step by itself).  Whatever happened, the
    request folders go (:meth:`Session.close`: what the bounds left, in ``s.left``) and the captures are indexed
    (:func:`note_folders`).  True when interrupted; a refusal is raised as :func:`run` raises it."""
    try:
        run(s, on_change, timeout, match, on_waiting)
        return False
    except KeyboardInterrupt:
        if on_interrupt is not None:
            on_interrupt(False)
        try:
            s.detach(on_change, timeout=max(timeout, 30))
        except KeyboardInterrupt:
            if on_interrupt is not None:
                on_interrupt(True)
        return True
    finally:
        s.close()
        note_folders(s)


LET_GO = 30.0  # seconds another user's process still in is given to come out, once this user's own are done


def others_left(s: Session) -> List[Attached]:
    """With ``--match``, once every process of this user's own is done: another user's processes still in (a
    window that waits or records).  None while one of this user's own is not done, or when there is none of
    them (you asked for another user's job: it is waited for)."""
    own = [a for a in s.attached if _own(a)]
    if not own or any(a.state not in DONE for a in own):
        return []
    return [a for a in s.attached if not _own(a) and a.state in IN]


def let_go(s: Session, others: List[Attached], on_change: Optional[Callable[[Attached], None]]) -> None:
    """``others`` asked out (a window in progress closes at its next step), waited for :data:`LET_GO` seconds at
    most, and the ones still in passed over: a process of another user's never holds the command."""
    s.detach(on_change, LET_GO)
    for a in others:
        if a.state in IN:
            a.state, a.status = "no answer", dict(a.status, error="still in after your own processes were done: "
                                                  "asked out, and not waited for")
            if on_change is not None:
                on_change(a)


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


SYSTEM = ("/proc", "/sys", "/dev")  # no capture's folder: a job's own files there are regular files of its user


def indexable(folder: str, uid: int) -> bool:
    """Whether the save folder ``folder`` may take captures into this home's index on a job's word: a folder of
    root's or of the job's user ``uid``, writable by nobody else (a shared folder such as ``/tmp`` is never walked
    by ``patchkit traces`` because a job said so), and not under /proc, /sys or /dev."""
    from patchkit.core.confined import within

    if any(folder == top or within(folder, top) for top in SYSTEM):
        return False
    try:
        st = os.stat(folder, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid in (0, uid) and not st.st_mode & 0o022


def trace_folders(status: Dict[str, Any], folder: str, uid: int) -> List[str]:
    """The folders of the traces ``status`` names that are this capture's: the trace, resolved, inside ``folder``
    (the save folder this user named, resolved at injection: one that resolves elsewhere now takes nothing), a
    regular file of the job's user ``uid``, its path one line (:func:`~patchkit.core.manifest.one_line`: no
    control character, no U+2028 to end its line in the index).  Nothing else a job says goes into this home's
    index."""
    from patchkit.core.confined import within
    from patchkit.core.manifest import one_line

    real = os.path.normpath(folder) if folder else ""
    if not real or real == os.sep or os.path.realpath(real) != real or not indexable(real, uid):
        return []
    found: List[str] = []
    for c in status.get("captures") or []:
        for trace in c.get("traces") or [] if isinstance(c, dict) else []:
            path = os.path.realpath(trace) if isinstance(trace, str) and os.path.isabs(trace) else ""
            if not path or not one_line(trace) or not one_line(path) or not within(path, real):
                continue
            try:
                st = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_uid == uid and os.path.dirname(path) not in found:
                found.append(os.path.dirname(path))
    return found
