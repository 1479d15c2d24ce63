"""One plan for each place the processes' jobs hold the recipe's code.

Without ``--root`` (or ``$PATCHKIT_ROOT``), each process says where its code is: the first folder of its own
``sys.path`` (:mod:`patchkit.attach.jobpath`) that holds the recipe's package, planned on as a stranger's files
(:mod:`patchkit.attach.jobfiles`).  A process whose path has no such folder is planned on patchkit's own
environment, as before; ``--root`` wins over both.  Processes of one job share one plan; each plan is made once,
this user's own processes' first, and at most :data:`MAX_PLANS` of them (``--match`` may find strangers' jobs in
as many environments as they like: theirs past the bound are passed over).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from patchkit.attach import jobfiles, jobpath
from patchkit.attach.process import AttachError, Process, read, where
from patchkit.core.errors import PatchkitError, TargetError
from patchkit.core.model import Settings

MAX_PLANS = 8
Key = Tuple[Optional[str], int]  # (the job's folder holding the package, None: patchkit's own or --root; its uid)


def job_root(proc: Process, settings: Settings) -> Tuple[Optional[str], Tuple[str, ...]]:
    """(the folder on the job's path holding the recipe's package, or the folder of the script it runs for a
    script's recipe; None when none; the path's folders)."""
    try:
        job = jobpath.of(proc)
    except (AttachError, OSError, ValueError):
        return None, ()
    script = settings.recipe.target.script
    if script is not None:  # the folder of the script the job runs, when it has the recipe's script's name
        runs = job.script and os.path.basename(job.script) == script.name
        return (os.path.dirname(job.script) if runs else None), job.entries
    return job.find(settings.recipe.target.package), job.entries


class Plans:
    """The plans of one command: :meth:`find` where each process's code is, :meth:`plan` each plan once,
    :meth:`spec` a process's request (or its plan's error)."""

    def __init__(self, settings: Settings, steps: int, root: Optional[str], versions=(False, None)):
        from patchkit.state.targets import default_root

        self.settings, self.steps, self.root, self.versions = settings, steps, root, versions
        self.given = root is not None or default_root() is not None  # --root or $PATCHKIT_ROOT: the job is not asked
        self.keys: Dict[int, Key] = {}
        self.paths: Dict[int, Tuple[str, ...]] = {}
        self.done: Dict[Key, Union[Dict[str, Any], PatchkitError]] = {}

    def find(self, pids: Sequence[int]) -> None:
        """Where each process's job holds the code (reads /proc only)."""
        for pid in pids:
            try:
                proc = read(pid)
            except AttachError:
                continue
            found, entries = (None, ()) if self.given else job_root(proc, self.settings)
            self.keys[pid], self.paths[pid] = (found, proc.uid if found else -1), entries

    def plan(self, pids: Sequence[int]) -> None:
        """Each plan the processes ``pids`` need (in their order), once; errors are kept for :meth:`spec`."""
        for pid in pids:
            key = self.keys.get(pid, (None, -1))
            if key in self.done:
                continue
            if len(self.done) >= MAX_PLANS:
                self.done[key] = AttachError(f"the processes found run from more than {MAX_PLANS} environments: "
                                             "this one was not planned on", where(pid),
                                             "name the job's processes with --pids, or a --match TEXT only they hold")
                continue
            try:
                if key[0] is None:
                    self.done[key] = self._here(pid)
                else:
                    self.done[key] = jobfiles.request(self.settings, self.steps, key[0], key[1], self.versions)
            except PatchkitError as exc:
                self.done[key] = exc

    def _here(self, pid: int) -> Dict[str, Any]:
        from patchkit.attach import payload

        try:
            return payload.request(self.settings, self.steps, self.root, self.versions)
        except TargetError as exc:
            if self.given or not self.paths.get(pid) or "not installed in this environment" not in exc.message:
                raise
            raise jobfiles.not_found(pid, self.settings.recipe.target.package, self.paths[pid]) from None

    def spec(self, pid: int) -> Dict[str, Any]:
        """The request planned for ``pid``; the plan's error when it failed."""
        key = self.keys.get(pid, (None, -1))
        if key not in self.done:
            self.plan([pid])
        found = self.done[key]
        if isinstance(found, PatchkitError):
            raise found
        return found

    def failed(self, pid: int) -> Optional[PatchkitError]:
        try:
            self.spec(pid)
            return None
        except PatchkitError as exc:
            return exc


def groups(specs: Dict[int, Dict[str, Any]]) -> List[Tuple[Dict[str, Any], List[int]]]:
    """The processes by the request planned for them."""
    out: List[Tuple[Dict[str, Any], List[int]]] = []
    for pid, spec in specs.items():
        for s, pids in out:
            if s is spec:
                pids.append(pid)
                break
        else:
            out.append((spec, [pid]))
    return out

