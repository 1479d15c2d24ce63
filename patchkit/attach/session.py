"""``patchkit attach``, ``detach`` and ``attach --status`` as an API: check every process, plan, get in, wait, get out.

:class:`Session` holds the processes one command attaches to.  :meth:`Session.prepare` makes every check
(:func:`patchkit.attach.access.check`, one process after the other, while the recipe is planned) before
anything is injected; :meth:`Session.inject` writes each process's request folder and queues the code;
:meth:`Session.wait` follows what each agent writes (attached, recording, restored, refused, failed) until
every one is done (restored: once it also says ``clean``, the name it put in the job out too; or its job ended,
or :data:`SETTLING` passed), calling ``on_change`` at each change; :meth:`Session.detach` asks every agent to
put the job's own code back (a window in progress is closed at its next step and its trace kept).

While attached, a record in the state folder names the request folder, so ``patchkit attach --status PID`` and
``patchkit detach PID`` (:mod:`patchkit.attach.records`) find the agent.  What the job writes is read through :mod:`patchkit.attach.channel` (typed, bounded;
an unreadable status fails that process, in one line, and asks it out); the folders go through
:mod:`patchkit.attach.sweep` (taken back from the job's user first), and the agent restores when its channel goes.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Sequence

from patchkit.attach import access, channel, gdbrun, inject, passover, payload, plans
from patchkit.attach.passover import Passed, check_all, nothing_left
from patchkit.attach.process import AttachError, Process, alive, read, where
from patchkit.attach.records import DONE, POLL, ask_detach, read_status, records_dir, write_record
from patchkit.core.errors import PatchkitError
from patchkit.runtime.attach import protocol



ORDER = protocol.ORDER  # the agent's states in the order it writes them
SETTLING = 10.0  # seconds "restored" waits for "clean" (the agent says it within runtime.attach.agent.SETTLE, 5 s)


class Attached:
    """One process: where it is, its request folder, and the last status its agent wrote."""

    def __init__(self, target: access.Target, folder: Optional[payload.Folder] = None,
                 spec: Optional[Dict[str, Any]] = None):
        self.target, self.folder = target, folder
        self.spec: Dict[str, Any] = spec or {}  # the request planned for it (each job's own files)
        self.status: Dict[str, Any] = {}
        self.state = "queued"
        self.closed = False  # its request folder and record removed (Session.close)
        self.save_folder = ""  # the capture's folder, as this user named it (the recipe's save path), at injection
        self.settled_by = 0.0  # (monotonic) "restored" is done without "clean" after this, or once the job ended

    @property
    def pid(self) -> int:
        return self.target.proc.pid

    @property
    def done(self) -> bool:
        if self.state == protocol.State.RESTORED and "clean" not in self.status:  # the code is back; "clean" (the
            return time.monotonic() > self.settled_by or not alive(self.target.proc)  # name out too) comes soon
        return self.state in DONE


class Session:
    def __init__(self, pids: Sequence[int], recipe: str, overrides: Sequence[str] = (), backend: Optional[str] = None,
                 root: Optional[str] = None, versions=(False, None), steps: int = 1):
        self.pids, self.recipe, self.overrides, self.backend = list(pids), recipe, list(overrides), backend
        self.root, self.versions, self.steps = root, versions, steps
        self.attached: List[Attached] = []
        self.left: List[str] = []  # what close() could not remove, one line each
        self.spec: Dict[str, Any] = {}

    passed: Sequence[Passed] = ()  # the processes prepare() passed over (--match), each with why
    pass_over = False  # a --match session: one process's refusal passes that process over, not the command

    def prepare(self, pass_over: bool = False) -> None:
        """Every check and the plan; :class:`AttachError` (or the plan's error) before anything is injected.

        ``pass_over`` (``--match``): a process refused by a check of its own (not Python, stopped, traced,
        remote debugging turned off, its interpreter...) is passed over, in :attr:`passed` with why, and the
        others go on; a refusal that is the same for every process (:func:`for_every_process`) and the plan's
        still refuse the command, and :class:`PassedOver` names each process when none is left."""
        from patchkit.engine.lines import LINES

        self.pass_over, self.passed = pass_over, []
        s = payload.settings(self.recipe, self.overrides, self.backend, self.steps)
        self.plans = plans.Plans(s, self.steps, self.root, self.versions)
        self.plans.find(self.pids)
        self.passed, found = check_all(self.pids, LINES, pass_over, lambda pids: self.plans.plan(
            [pid for pid in pids if passover.own(pid)] or pids[:1]))  # others' once checked
        targets = self._planned(found)
        unread: Dict[int, AttachError] = {}
        for spec, group in plans.groups({t.proc.pid: self.plans.spec(t.proc.pid) for t in targets}):
            unread.update(access.owners_read([t for t in targets if t.proc.pid in group], spec))
        if unread and not pass_over:  # a process is handed only what its owner may read
            raise next(iter(unread.values()))
        self.passed += [Passed(t.proc.pid, t.proc.command, unread[t.proc.pid]) for t in targets if t.proc.pid in unread]
        targets = [t for t in targets if t.proc.pid not in unread]
        if self.passed and not targets:
            raise nothing_left([(p.pid, p.why) for p in self.passed])
        self.attached = [Attached(t, spec=self.plans.spec(t.proc.pid)) for t in targets]
        self.spec = self.attached[0].spec if self.attached else {}

    def _planned(self, targets: List[access.Target]) -> List[access.Target]:
        """The targets whose plan was made; a plan's error refuses the command, except (``--match``) for another
        user's process, passed over with it: a stranger's environment never stops the command."""
        out = []
        for t in targets:
            error = self.plans.failed(t.proc.pid)
            if error is None:
                out.append(t)
            elif self.pass_over and not passover.own(t.proc.pid):
                self.passed.append(Passed(t.proc.pid, t.proc.command, AttachError(error.message, error.where,
                                                                                   error.hint)))
            else:
                raise error
        return out

    def inject(self) -> None:
        """Write each request and queue it; on a failure, withdraw every request and raise it (``--match``: that
        process is said failed, its request withdrawn, and :func:`patchkit.attach.flow.run` decides)."""
        def one(a: Attached) -> None:
            spec = a.spec or self.spec
            a.save_folder = channel.save_folder(str(spec.get("save_path") or ""), a.pid)
            a.folder = payload.folder(a.target.proc, spec, a.target.python.runtime_from)
            write_record(a, spec["recipe"])
            inject.send(a.target, a.folder, a.target.python.runtime_from)

        with ThreadPoolExecutor(max_workers=8) as pool:
            try:
                said = list(pool.map(_caught(one), self.attached))
            except KeyboardInterrupt:  # each gdb still in a job leaves it first (gdbrun.settle), then it goes on
                gdbrun.settle(pool)
                raise
        errors = [e for e in said if e is not None]
        if errors and not self.pass_over:
            self.close()
            raise errors[0]
        for a, e in zip(self.attached, said):  # --match: that process failed; flow.run passes it over, or not
            if e is not None:
                if a.folder is not None:
                    payload.withdraw(a.folder)
                a.state, a.status = "failed", {"error": e.message}

    def poll(self, on_change: Optional[Callable[[Attached], None]] = None) -> None:
        for a in self.attached:
            if a.done or a.folder is None:
                continue
            status = read_status(a.folder.base)
            if status is not None and status.get("unreadable"):  # trusted no more: asked out (never waited on)
                status = dict(a.status, **status)
                ask_detach(a.folder.base)
            state = status["state"] if status else a.state
            if state in ORDER and ORDER.index(state) < ORDER.index(a.state):  # an agent only goes forwards
                state = "failed"
                status = dict(a.status, state=state, error=f"its status went back from {a.state} to {status['state']}"
                              ": not the agent's; asked out")
                ask_detach(a.folder.base)
            if state not in DONE and not alive(a.target.proc):  # before it answered, or with its window open
                state, status = "gone", dict(status or a.status, state="gone", error="the process ended")
            if status is not None:
                a.status = status
                if a.state == "queued":
                    payload.withdraw(a.folder)  # read and checked by now: the request goes
            if state != a.state:
                if state == protocol.State.RESTORED:
                    a.settled_by = time.monotonic() + SETTLING
                a.state = state
                if on_change is not None:
                    on_change(a)

    def wait(self, on_change: Optional[Callable[[Attached], None]] = None, timeout: Optional[float] = None,
             until: Sequence[str] = ()) -> bool:
        """Poll until each process is done, or in a state of ``until``; False when ``timeout`` passed first.
        A process whose agent never answered within ``timeout`` of being asked is "no answer"."""
        start = time.time()
        while True:
            self.poll(on_change)
            if all(a.done or a.state in until for a in self.attached):
                return True
            if timeout is not None and time.time() - start > timeout:
                for a in self.attached:
                    if a.state == "queued":
                        payload.withdraw(a.folder)
                        a.state, a.status = "no answer", {"error": f"it ran no Python for {timeout:g} s"}
                        if on_change is not None:
                            on_change(a)
                return all(a.done or a.state in until for a in self.attached)
            time.sleep(POLL)

    def detach(self, on_change=None, timeout: float = 60) -> bool:
        """Ask every agent still in to put the job's own code back; wait up to ``timeout``."""
        for a in self.attached:
            if a.folder is not None and not a.done:
                if a.state == "queued":
                    payload.withdraw(a.folder)
                why = ask_detach(a.folder.base)
                if why:  # its channel goes now instead: the agent restores when it does
                    left = payload.remove(a.folder)
                    a.state, a.status = "failed", dict(a.status, state="failed", error=f"{why}: not followed; its "
                                                       "channel was removed instead, which asks it out too" +
                                                       (f" ({left})" if left else ""))
                    if on_change is not None:
                        on_change(a)
        return self.wait(on_change, timeout)

    def close(self) -> List[str]:
        """Remove the request folders and records (an agent still in sees its channel go, and restores); never
        raises.  One line for each folder the bounds left behind (:func:`patchkit.attach.sweep.remove`), also
        kept in ``self.left``; a second call removes nothing again."""
        for a in self.attached:
            if a.folder is None or getattr(a, "closed", False):
                continue
            left, a.closed = payload.remove(a.folder), True
            if left:
                self.left.append(f"pid {a.pid}: {left}")
            try:
                with records_dir() as folder:
                    folder.unlink(f"{a.pid}-{a.target.proc.started}.json")
            except (OSError, PatchkitError):
                pass
        return self.left


def _caught(fn):
    def run(a):
        try:
            fn(a)
            return None
        except AttachError as exc:
            return exc
        except Exception as exc:  # noqa: BLE001 - said as an error of that process
            return AttachError(f"{type(exc).__name__}: {exc}", where(a.pid))
    return run


def processes(pid: Optional[int], pids: Sequence[int], match: Optional[str]) -> List[Process]:
    """The processes asked for: a pid, a list, or every one whose command line holds ``match``."""
    from patchkit.attach.process import matching

    if match:
        found = matching(match)
        if not found:
            raise AttachError(f"no process of yours has {match!r} in its command line", None,
                              "check with `ps -ef`; --match compares the whole command line")
        return found
    return [read(p) for p in ([pid] if pid is not None else []) + list(pids)]

