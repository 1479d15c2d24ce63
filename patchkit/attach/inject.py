"""Getting the request into the job: gdb and the interpreter's pending calls (3.10 to 3.13), ``sys.remote_exec`` (3.14+).

Both hand the job the same few lines (:func:`bootstrap`), which its main thread runs between two bytecodes,
never inside whatever call the process was stopped in: they read the request file, run it only if its
sha256 is the one written into them, and import the agent (:mod:`patchkit.runtime.attach.agent`), which checks
everything and changes nothing on any refusal.  Whatever happens they return normally: the outer ``try``
catches every exception, ``SystemExit`` included (``PyRun_SimpleString`` would exit the job on it, and a
pending call that returned -1 would become a ``SystemError`` in the job).

Through gdb (:func:`through_gdb`): gdb attaches (``ptrace``), loads the ELF symbols of the interpreter and libc
only (never those of torch's libraries, never any debug information: seconds), maps one page in the job with ``mmap`` (a system call: no
lock of the job's is taken, where ``malloc`` could deadlock on one the stopped thread holds), writes the
lines there with its own memory access, and calls ``Py_AddPendingCall(PyRun_SimpleString, page)``; it then
detaches.  The job was stopped for about a tenth of a second (:func:`gdb_command`).  The page (4 KiB) stays mapped.

Through ``sys.remote_exec`` (:func:`through_remote_exec`): the lines are a file (0600, the job's user's)
that an interpreter of the job's version runs ``sys.remote_exec(pid, file)`` on (PEP 768).

Either tool runs apart from this command (:mod:`patchkit.attach.gdbrun`): no signal of its terminal or group
reaches it; an interrupt withdraws the request and waits for the tool to leave the job; one past its time is
interrupted, never killed mid-call first.  A request withdrawn before the job ran the lines: they say so, in
the channel too (refused), and do nothing.  A KeyboardInterrupt the lines catch is the job's own Ctrl-C (no
signal of this command's reaches the job: gdb has let go before they run, and never passes on the SIGINT it
stops the job with), so it is given back to the job once they have returned, as the agent does.
"""

from __future__ import annotations

import os
from functools import partial
from typing import List, Optional

from patchkit.attach import gdbrun
from patchkit.attach.access import Target
from patchkit.attach.payload import Folder
from patchkit.attach.process import AttachError, where

LIMIT = 64 * 1024 * 1024  # a request is the instrumented text of a few modules: far less
QUEUED = "PATCHKIT-QUEUED"
NO_LIBRARY = "/proc"  # a folder no one can make a file in: gdb finds no libthread_db there to load

BOOT_FILE = "boot.py"  # in patchkit/runtime/attach: its text is what the job runs, with the call below


def boot_text() -> str:
    """The text of :mod:`patchkit.runtime.attach.boot`, read from patchkit's own install (ASCII)."""
    from patchkit.runtime import attach as in_job

    with open(os.path.join(os.path.dirname(in_job.__file__), BOOT_FILE), encoding="ascii") as handle:
        return handle.read()


def bootstrap(f: Folder, runtime_from: str) -> str:
    """The lines the job runs: ASCII, no name left behind in ``__main__``, never an exception out of them."""
    inner = boot_text() + (f"\n\ntry:\n    _attach({ascii(f.request)}, {ascii(f.digest)}, {ascii(runtime_from)}, {LIMIT}, "
                    f"{ascii(f.out)})\n"
                    f"except BaseException as exc:\n    _failed({ascii(f.out)}, exc)\n")
    return f"try:\n    exec({ascii(inner)}, {{'__name__': 'patchkit_attach'}})\nexcept BaseException:\n    pass\n"


def gdb_script(code_file: str, size: int) -> str:
    """gdb's commands: an error in any of them (a symbol not found) ends the file before anything is changed."""
    return "\n".join([
        "set pagination off", "set confirm off", "set unwindonsignal on",
        "sharedlibrary libc[.-]", "sharedlibrary libpython",
        "print (long) &Py_AddPendingCall", "print (long) &PyRun_SimpleString", "print (long) &mmap",
        f"set $patchkit_page = ((void *(*)(void *, unsigned long, int, int, int, long)) mmap)(0, {size}, 3, 34, -1, 0)",
        "if $patchkit_page == (void *) -1",
        "  echo PATCHKIT-NO-PAGE\\n",
        "else",
        f"  restore {code_file} binary $patchkit_page",
        "  set $patchkit_rc = ((int (*)(void *, void *)) Py_AddPendingCall)((void *) PyRun_SimpleString, "
        "$patchkit_page)",
        "  if $patchkit_rc == 0",
        f"    echo {QUEUED}\\n",
        "  else",
        "    echo PATCHKIT-QUEUE-FULL\\n",
        "  end",
        "end", ""])


def _private(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _withdraw(f: Folder) -> None:
    """On an interrupt, while gdb is still in the job: the request goes, gdb's own files stay, so gdb ends as it
    would have and the lines it queues find nothing, say so in the channel, and do nothing."""
    try:
        os.unlink(f.request)
    except FileNotFoundError:
        pass


def gdb_command(t: Target, script: str) -> List[str]:
    """Set before gdb attaches, since everything gdb reads after it stops the job: no file of the job's read (no
    ``.gdbinit``, no auto-loaded script), no symbols but those asked for, and of those only the ELF symbol tables
    (``-readnever``: no DWARF debug information, in the file or apart from it, which the Debian and Ubuntu debug
    packages put under ``/usr/lib/debug``, and no debuginfod server asked); no ``libthread_db`` loaded into gdb to
    walk the job's threads (its search path is ``/proc``, where no such file can ever be made; gdb attaches every
    thread from ``/proc`` without it).  Together they keep the stop to about a tenth of a second, where reading libc's and
    libpython's debug information took half a second and more.  A call that a signal stops is given up with the
    job's registers put back, and the SIGINT gdb stops the job with is never passed on
    (:mod:`patchkit.attach.gdbrun` interrupts gdb so when it must leave)."""
    return [t.tool, "-nx", "-batch", "-readnever", "-iex", "set confirm off", "-iex", "set auto-load off",
            "-iex", "set auto-solib-add off", "-iex", "set debuginfod enabled off",
            "-iex", f"set libthread-db-search-path {NO_LIBRARY}", "-iex", "set unwindonsignal on",
            "-iex", "handle SIGINT stop print nopass", "-p", str(t.proc.pid), "-x", script,
            "-ex", "detach", "-ex", "quit"]


def through_gdb(t: Target, f: Folder, runtime_from: str, timeout: Optional[float] = None) -> None:
    """Queue the bootstrap as a pending call of the job's interpreter; :class:`AttachError` if gdb could not."""
    code = bootstrap(f, runtime_from).encode("ascii") + b"\0"
    size = (len(code) + 4095) // 4096 * 4096
    code_file, script = os.path.join(f.base, "code.bin"), os.path.join(f.base, "inject.gdb")
    _private(code_file, code)
    _private(script, gdb_script(code_file, size).encode("utf-8"))
    try:
        _, said = gdbrun.run(gdb_command(t, script), t.proc.pid, gdbrun.limit() if timeout is None else timeout,
                             partial(_withdraw, f), "gdb", dict(os.environ, LC_ALL="C"))
    finally:
        for name in (code_file, script):
            os.unlink(name)
    if QUEUED in said:
        return
    raise gdb_error(t, said)


def gdb_error(t: Target, said: str) -> AttachError:
    pid = t.proc.pid
    if "ptrace: No such process" in said:
        return AttachError(f"process {pid} ended before gdb got in", where(pid), "nothing was queued")
    if "ptrace: Operation not permitted" in said or "ptrace: Permission denied" in said:
        return AttachError(f"the kernel refused gdb's ptrace on process {pid}", where(pid),
                           "a seccomp profile or security module forbids ptrace here: in docker, run with "
                           "--cap-add SYS_PTRACE (and --security-opt seccomp=unconfined on old kernels)")
    if "No symbol" in said:
        return AttachError(f"gdb found no Py_AddPendingCall, PyRun_SimpleString or mmap in process {pid} "
                           f"({t.proc.exe}): an interpreter built without its dynamic symbols?", where(pid),
                           "use `patchkit run` or `patchkit capture` for this job")
    if "unrecognized option" in said and "readnever" in said:
        return AttachError(f"{t.tool} is older than gdb 8.2: it has no -readnever, which keeps the stop of process "
                           f"{pid} short", where(pid), "install gdb 8.2 or later; nothing was queued")
    if "PATCHKIT-QUEUE-FULL" in said:
        return AttachError(f"the interpreter's queue of pending calls is full in process {pid}", where(pid),
                           "try again in a moment")
    lines = [ln for ln in said.strip().splitlines() if ln.strip()][-3:]
    return AttachError(f"gdb could not queue the code in process {pid}: {' / '.join(lines) or 'no output'}",
                       where(pid), "nothing was queued; run with --debug for gdb's whole output")


def through_remote_exec(t: Target, f: Folder, runtime_from: str, timeout: Optional[float] = None) -> None:
    """``sys.remote_exec(pid, file)`` from an interpreter of the job's version (Python 3.14+), run apart as gdb is."""
    script = os.path.join(f.base, f"boot-{f.id}.py")
    _private(script, bootstrap(f, runtime_from).encode("ascii"))
    if os.geteuid() == 0 and t.proc.uid != 0:
        os.chown(script, t.proc.uid, t.proc.gids[0] if t.proc.gids else t.proc.uid)
    code, said = gdbrun.run([t.tool, "-I", "-c", "import sys; sys.remote_exec(int(sys.argv[1]), sys.argv[2])",
                             str(t.proc.pid), script], t.proc.pid, gdbrun.limit(60) if timeout is None else timeout,
                            partial(_withdraw, f), "sys.remote_exec")
    if code == 0:
        return
    last = (said.strip().splitlines() or ["no output"])[-1]
    hint = "the job turned remote debugging off: start it without that" if "not enabled" in last else \
        "see `patchkit attach --help` on tracing rights" if "ermission" in last else "nothing was sent"
    raise AttachError(f"sys.remote_exec into process {t.proc.pid} failed: {last}", where(t.proc.pid), hint)


def send(t: Target, f: Folder, runtime_from: str) -> None:
    (through_gdb if t.way == "gdb" else through_remote_exec)(t, f, runtime_from)
