"""Whether this user may get into a process, and how: every check made before anything is injected.

:func:`check` reads ``/proc`` (:mod:`patchkit.attach.process`), asks the job's interpreter about itself
(:mod:`patchkit.attach.probe`) and returns a :class:`Target`; each reason not to go on is an
:class:`~patchkit.attach.process.AttachError` (exit 1) that names the cause and the fix:

- the process exists, is not this command or one of its parents, nor traced by a debugger already, and is a
  CPython 3.10+ interpreter whose file is still on disk, seeing the same files as this command (no container
  between them);
- only its owner or root may attach; the kernel must let this user trace it: Yama's ``ptrace_scope``, and
  ``CAP_SYS_PTRACE`` (missing in a default container, even as root);
- the job has not asked to be left alone: ``PYTHON_DISABLE_REMOTE_DEBUG`` in its environment (unless it
  runs with ``-E`` or ``-I``), or ``-X disable-remote-debug`` on its command line;
- the way in is there: gdb for Python 3.10 to 3.13, and for 3.14+ an interpreter of the same version and
  flavour to call ``sys.remote_exec`` from;
- its user can import patchkit's runtime from patchkit's install folder (:mod:`patchkit.attach.probe`: its Python
  is read from its files, never run);

and, once the recipe is planned, :func:`owners_read`: its user can read every file the request carries.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import sysconfig
from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple

from patchkit.attach.probe import Interpreter, ask, ids, unreadable
from patchkit.attach.process import (AttachError, Process, ancestors, embeds_python, environ, interpreter_options,
                                     python_name, read, same_mounts, where)

YAMA = "/proc/sys/kernel/yama/ptrace_scope"
CAP_SYS_PTRACE = 1 << 19
GDB_PACKAGE = "install gdb: `apt-get install gdb` (the Debian and Ubuntu package gdb; `dnf install gdb` elsewhere)"
REMOTE_EXEC = (3, 14)  # sys.remote_exec (PEP 768); before it, gdb and the interpreter's pending calls


class Target(NamedTuple):
    proc: Process
    python: Interpreter
    way: str  # "gdb" or "remote_exec"
    tool: str  # gdb's path, or the interpreter that calls sys.remote_exec


def my_caps() -> int:
    with open("/proc/self/status", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def yama_scope() -> Optional[int]:
    try:
        with open(YAMA, encoding="utf-8") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None  # no Yama: the classic rules (same user, or CAP_SYS_PTRACE)


def ptrace_problem(proc: Process, uid: int, caps: int, scope: Optional[int], descendant: bool) -> Optional[Tuple[str, str]]:
    """(why this user may not trace ``proc``, what to do), or None."""
    can = bool(caps & CAP_SYS_PTRACE)
    if uid != 0 and any(u != uid for u in proc.uids):
        return (f"process {proc.pid} runs as uid {proc.uid}: only its owner or root may attach",
                f"run patchkit attach as uid {proc.uid} or as root")
    if scope == 3:
        return ("the kernel's Yama ptrace_scope is 3: no process may be traced until the next reboot",
                "use `patchkit run` or `patchkit capture` (schedule.trigger=manual) for jobs you start")
    if scope == 2 and not can:
        return ("the kernel's Yama ptrace_scope is 2: only a process holding CAP_SYS_PTRACE may trace",
                "run patchkit attach as root (with CAP_SYS_PTRACE)")
    if scope == 1 and not can and not descendant:
        return ("the kernel's Yama ptrace_scope is 1 (Ubuntu's default): a process may trace only its own children",
                "run patchkit attach as root (sudo), or allow it for everyone: `sudo sysctl kernel.yama.ptrace_scope=0`")
    if not can and (any(u != uid for u in proc.uids) or proc.permitted & ~caps):
        inside = "you are root, but without CAP_SYS_PTRACE (a container drops it by default)" if uid == 0 else \
            f"process {proc.pid} holds capabilities you do not"
        return (f"the kernel will not let this command trace process {proc.pid}: {inside}",
                "give the container the capability (docker run --cap-add SYS_PTRACE; Kubernetes: "
                "securityContext.capabilities.add: [SYS_PTRACE]), or attach as the job's own user")
    return None


def remote_debug_problem(proc: Process, env) -> str:
    """How the job asked that no debugger get in ("" when it did not)."""
    flags, xopts = interpreter_options(proc.argv)
    if any(x.partition("=")[0] == "disable-remote-debug" for x in xopts):
        return "it runs with -X disable-remote-debug"
    if env.get("PYTHON_DISABLE_REMOTE_DEBUG") and not set(flags) & {"E", "I"}:
        return "PYTHON_DISABLE_REMOTE_DEBUG is set in its environment"
    return ""


def trusted_interpreter(exe: str) -> bool:
    """Whether ``exe`` (the file it leads to) and every folder above it, up to ``/``, along its path and along its
    real path, are root's or this user's and writable by nobody else: safe to run as this user."""
    try:
        chain = []
        for start in (os.path.abspath(exe), os.path.realpath(exe)):
            chain.append(start)
            folder = os.path.dirname(start)
            while True:
                chain.append(folder)
                if folder == os.path.dirname(folder):
                    break
                folder = os.path.dirname(folder)
        for place in chain:
            st = os.stat(place)
            if st.st_uid not in (0, os.geteuid()) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return False
    except OSError:
        return False
    return True


def sender(proc: Process, python: Interpreter) -> str:
    """An interpreter of the job's version and flavour to call ``sys.remote_exec`` from (3.14+)."""
    mine = (sys.version_info[:2], bool(sysconfig.get_config_var("Py_GIL_DISABLED")))
    if mine == (python.version[:2], python.free_threaded):
        return sys.executable
    if trusted_interpreter(python.executable):
        return python.executable
    raise AttachError(f"getting into {python.shown} takes sys.remote_exec from the same version and flavour; this "
                      f"command runs {sys.version.split()[0]}, and the job's {python.executable} is writable by "
                      "another user, so it is not run as you", where(proc.pid),
                      f"run patchkit attach with a {python.shown} (e.g. python3.{python.version[1]} -m patchkit attach)")


def check(pid: int, lines: int, install: Optional[str] = None) -> Target:
    """Every check, in order; the process as a :class:`Target`, or the first :class:`AttachError`."""
    proc = read(pid)
    if pid == os.getpid() or pid in ancestors(os.getpid()):
        raise AttachError(f"process {pid} is this command or one of its parents", where(pid),
                          "give the pid of the training job")
    problem = ptrace_problem(proc, os.geteuid(), my_caps(), yama_scope(), os.getpid() in ancestors(pid))
    if problem:
        raise AttachError(problem[0], where(pid), problem[1])
    if proc.tracer:
        raise AttachError(f"process {pid} is being traced already, by process {proc.tracer} (a debugger, or a "
                          "profiler such as py-spy --native)", where(pid), "attach once that one has let go of it")
    if python_name(proc.exe) is None:
        if embeds_python(pid):
            raise AttachError(f"process {pid} runs {proc.exe or proc.name}, which embeds Python: attach gets only into a "
                              "Python interpreter", where(pid), "use `patchkit run` or `patchkit apply` for it")
        raise AttachError(f"process {pid} is not a Python interpreter (it runs {proc.exe or proc.name})", where(pid),
                          "give the pid of the Python process that trains (`ps -ef | grep python`)")
    if proc.exe_deleted:
        raise AttachError(f"the interpreter of process {pid} ({proc.exe}) was removed or replaced on disk since it "
                          "started (an upgrade?)", where(pid), "restart the job, or use `patchkit run` next time")
    if not same_mounts(pid):
        raise AttachError(f"process {pid} sees other files than this command (it runs in another mount namespace: a "
                          "container, or a private /tmp)", where(pid),
                          "run patchkit attach inside the job's container (docker exec / kubectl exec)")
    why = remote_debug_problem(proc, environ(pid))
    if why:
        raise AttachError(f"process {pid} asked that no debugger get in: {why}", where(pid),
                          "respect it; start the job without it, or profile with `patchkit run` / `capture`")
    python = ask(proc, lines, install)
    if python.version[:2] < (3, 10):
        raise AttachError(f"process {pid} runs {python.shown}: attach needs Python 3.10 or later", where(pid),
                          "use `patchkit run` or `patchkit apply` for it")
    if python.version[:2] >= REMOTE_EXEC:
        return Target(proc, python, "remote_exec", sender(proc, python))
    gdb = shutil.which("gdb")
    if gdb is None:
        raise AttachError(f"gdb is not installed: getting into {python.shown} goes through gdb", where(pid),
                          GDB_PACKAGE)
    return Target(proc, python, "gdb", gdb)


def owners_read(targets: Sequence[Target], spec: Dict[str, Any]) -> Dict[int, AttachError]:
    """Each process's user can read every file whose instrumented text its request carries (root's own jobs need no
    check): a process is handed only what its owner may read.  The refusal of each process whose user cannot, by
    pid, naming the first such file (none: every one may)."""
    files = [str(m["file"]) for m in spec.get("modules", ())]
    asked: Dict[Any, Optional[Tuple[str, str]]] = {}
    refused: Dict[int, AttachError] = {}
    for t in targets:
        key = ids(t.proc)
        if key not in asked:
            try:
                found = unreadable(t.proc, files)
            except AttachError as exc:  # the helper run as that user failed: she may stop or kill it
                found = [("", exc.message)]
            asked[key] = found[0] if found else None
        if asked[key] is None:
            continue
        name, why = asked[key]
        if not name:
            refused[t.proc.pid] = AttachError(f"{why}; so it is not known whether uid {t.proc.uid} may read what the "
                                              "request would carry", where(t.proc.pid), "nothing was sent")
            continue
        refused[t.proc.pid] = AttachError(
            f"the job's user uid {t.proc.uid} cannot read {name} ({why}): attach hands a process only what its "
            "owner may read; nothing was sent", where(t.proc.pid),
            f"let uid {t.proc.uid} read it, or plan on a copy that user can read (--root)")
    return refused
