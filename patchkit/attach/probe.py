"""What the job runs and what its user may read, learnt without running anything of the job's.

The job's Python (version and flavour) is read from its files as data (:mod:`patchkit.attach.elfinfo`): its
``/proc/PID/maps`` and the ELF of its libpython or interpreter.  Its executable is never run: a process any user
can name ``python`` and put in front of ``--match``.

What only the job's user can answer is asked of patchkit's own interpreter run as that user, sandboxed
(:mod:`patchkit.attach.sandbox`): whether patchkit's runtime and the attach agent import from patchkit's install
folder (:func:`ask`), and whether the files a request carries can be read (:func:`unreadable`).  Where that
helper would run as this command's own user anyway (root's job, or a command that is not root), this process
answers the first question itself, on the install folder it imported patchkit from.  A job whose
user cannot read patchkit's install folder is refused with what to do; whether a job's own environment holds a
patchkit is not looked into (that would run the job's interpreter, or read its folders as root).
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from patchkit.attach import elfinfo, sandbox
from patchkit.attach.process import AttachError, Process, where
from patchkit.core.printable import printable

INSTALL = sandbox.INSTALL  # where patchkit itself is imported from: the folder that holds the ``patchkit`` package
RUNTIME = ("patchkit", "patchkit.runtime", "patchkit.runtime.attach.agent")  # what the job imports, as bootstrap does

IMPORTS = r'''
out = {}
try:
    sys.path.insert(0, sys.argv[1])
    import patchkit, patchkit.runtime, patchkit.runtime.attach.agent
    patchkit.runtime.require(int(sys.argv[2]))
    out["patchkit"] = str(patchkit.__file__)
except BaseException as exc:
    out["import_error"] = "%s: %s" % (type(exc).__name__, exc)
answer(out)
'''

READS = r'''
out = []
for name in json.loads(sys.argv[1]):
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)
        try:
            os.read(fd, 1)
        finally:
            os.close(fd)
        out.append("")
    except OSError as exc:
        out.append(exc.strerror or type(exc).__name__)
answer({"unreadable": out})
'''


class Interpreter(NamedTuple):
    version: Tuple[int, int, int]  # micro -1: not known
    free_threaded: bool
    executable: str
    runtime_from: str  # the folder the agent puts first on sys.path to import patchkit

    @property
    def shown(self) -> str:
        numbers = self.version if self.version[2] >= 0 else self.version[:2]
        return "Python " + ".".join(map(str, numbers)) + (" (free-threaded)" if self.free_threaded else "")


def ids(proc: Process) -> Optional[sandbox.Ids]:
    """The process's user, as the helper runs (None: root's job, nothing to drop)."""
    if proc.uid == 0:
        return None
    return sandbox.Ids(proc.uid, proc.gids[0] if proc.gids else proc.uid, tuple(proc.groups))


def _as_user(proc: Process, code: str, args: Sequence[str], warm: Sequence[str] = ()) -> Dict[str, object]:
    try:
        return sandbox.run(code, args, ids(proc), warm=warm)
    except sandbox.SandboxError as exc:
        raise AttachError(f"patchkit's helper, run as uid {proc.uid} for process {proc.pid}, failed: "
                          f"{printable(str(exc))}", where(proc.pid), "nothing was sent") from None


def ask(proc: Process, lines: int, install: Optional[str] = None) -> Interpreter:
    """What the job's interpreter is, and that its user can import patchkit from ``install``; :class:`AttachError`
    when not."""
    install = INSTALL if install is None else install
    found = elfinfo.python_of(proc.pid, proc.exe)
    python = Interpreter(found.version, found.free_threaded, proc.exe or found.file, install)
    if python.version[:2] < (3, 10):
        return python  # access.check refuses it with its own line
    if install == INSTALL and not sandbox.drops(ids(proc)):
        said = _answered_here(lines)
    else:
        said = _as_user(proc, IMPORTS, [install, str(lines)], warm=RUNTIME)
    error = said.get("import_error")
    if error is None and isinstance(said.get("patchkit"), str):
        return python
    error = printable(error if isinstance(error, str) else "no answer")[:300]
    raise AttachError(f"{python.shown} of process {proc.pid} (uid {proc.uid}) cannot import patchkit's runtime from "
                      f"{install} ({error})", where(proc.pid),
                      f"the runtime needs only the standard library: make {install} readable by uid {proc.uid} "
                      "(a patchkit in the job's own environment is not looked for: attach never runs the job's "
                      "interpreter or its files)")


def _answered_here(lines: int) -> Dict[str, object]:
    """What :data:`IMPORTS` would answer, answered by this process.  Asked only where the helper would run as this
    very user, with this command's ids, groups and capabilities (the job is root's and this command is root's, or
    this command is not root and may attach only to its user's jobs), on the folder this process imported patchkit
    from already: the same question about the same files for the same user, without starting an interpreter (a
    tenth of a second and more of a busy machine, on the way to every attach to one's own job)."""
    import importlib

    try:
        modules = [importlib.import_module(name) for name in RUNTIME]  # what the job imports, as IMPORTS does
        modules[1].require(lines)
        return {"patchkit": str(modules[0].__file__)}
    except Exception as exc:  # noqa: BLE001 - said as the helper says it
        return {"import_error": f"{type(exc).__name__}: {exc}"}


def unreadable(proc: Process, files: Sequence[str]) -> List[Tuple[str, str]]:
    """(file, why) for each of ``files`` that the process's user cannot read (none for root's own job; none when
    this command is not root: it runs as the job's own user, who planned on them)."""
    if not files or ids(proc) is None or os.geteuid() != 0:
        return []
    said = _as_user(proc, READS, [json.dumps(list(files))]).get("unreadable")
    if not isinstance(said, list) or len(said) != len(files) or not all(isinstance(s, str) for s in said):
        raise AttachError(f"patchkit's helper, run as uid {proc.uid} for process {proc.pid}, gave no answer",
                          where(proc.pid), "nothing was sent")
    return [(f, why) for f, why in zip(files, said) if why]
