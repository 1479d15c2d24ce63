"""A running process as ``/proc`` shows it: owner, interpreter, command line, environment, parent; and ``--match``.

Nothing here writes, signals or traces.  What the kernel hides from a user who may not trace the process
(``environ`` of another user's process) reads as :class:`AttachError` naming the file, since it is the same
question (may this user get into that process?) that :mod:`patchkit.attach.access` answers.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from patchkit.core.errors import Location, PatchkitError

PROC = "/proc"
# The interpreter's file name: python, python3, python3.11, python3.13t (free-threaded), python3.12d (debug)
PYTHON_NAME = re.compile(r"^python(?:(\d+)(?:\.(\d+))?)?(t)?(?:d|-dbg)?$")
# Interpreter options that take a value (the next word, or the rest of this one): -X opt, -W arg, -c cmd, -m mod
WITH_VALUE = "XWcm"


class AttachError(PatchkitError):
    """Attaching cannot go ahead: nothing was injected, the job runs as it was."""

    title = "attach"

    def render(self) -> str:
        """As every error, but the message and the hint each on one line: they hold text of other users' (a
        command line, an executable's file name, what a job wrote), whose line break must not start a line of
        its own (a forged ``hint:``)."""
        from patchkit.core.printable import printable

        head = printable(f"{self.where}: {self.message}" if self.where else self.message)
        return f"{head}\n  hint: {printable(self.hint)}" if self.hint else head


def where(pid: int) -> Location:
    return Location(f"pid {pid}")


class Process(NamedTuple):
    pid: int
    uids: Tuple[int, ...]  # real, effective, saved, filesystem
    gids: Tuple[int, ...]
    groups: Tuple[int, ...]
    ppid: int
    exe: str  # what /proc/PID/exe leads to ("" when it cannot be read)
    exe_deleted: bool  # the interpreter's file was removed or replaced on disk since it started
    argv: Tuple[str, ...]
    started: int  # clock ticks after boot: with the pid, names the process (a pid is reused)
    caps: int  # effective capabilities
    permitted: int
    name: str
    tracer: int = 0  # the pid of a debugger tracing it already (0: none)
    state: str = ""  # /proc/PID/status's State letter: R running, S sleeping, T stopped, t stopped by a tracer...

    @property
    def uid(self) -> int:
        return self.uids[0]

    @property
    def command(self) -> str:
        return " ".join(self.argv)

    @property
    def stopped(self) -> bool:
        """Stopped (SIGSTOP, Ctrl-Z: ``T``; held by a tracer: ``t``): it runs no Python until it is continued."""
        return self.state in ("T", "t")


def path(pid: int, name: str) -> str:
    return os.path.join(PROC, str(pid), name)


def _status(pid: int) -> Dict[str, str]:
    with open(path(pid, "status"), encoding="utf-8", errors="replace") as handle:
        return dict(line.rstrip("\n").split(":\t", 1) for line in handle if ":\t" in line)


def _ints(text: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in text.split())


def read(pid: int) -> Process:
    """The process ``pid``; :class:`AttachError` when there is none."""
    try:
        status = _status(pid)
        with open(path(pid, "cmdline"), "rb") as handle:
            argv = tuple(a.decode("utf-8", "surrogateescape") for a in handle.read().split(b"\0") if a)
        with open(path(pid, "stat"), encoding="utf-8", errors="replace") as handle:
            fields = handle.read().rpartition(")")[2].split()
    except FileNotFoundError:
        raise AttachError(f"there is no process {pid}", where(pid), "check the pid (`ps -ef | grep python`)") from None
    except ProcessLookupError:
        raise AttachError(f"process {pid} ended", where(pid), "check the pid") from None
    if status.get("State", "").startswith(("Z", "X")):
        raise AttachError(f"process {pid} has ended (its parent has not collected it yet)", where(pid),
                          "check the pid")
    try:
        exe = os.readlink(path(pid, "exe"))
    except OSError:
        exe = ""  # another user's process and no right to trace it: access.check says so
    deleted = exe.endswith(" (deleted)")
    return Process(pid, _ints(status.get("Uid", "")), _ints(status.get("Gid", "")), _ints(status.get("Groups", "")),
                   int(status.get("PPid", "0")), exe[: -len(" (deleted)")] if deleted else exe, deleted, argv,
                   int(fields[19]), int(status.get("CapEff", "0"), 16), int(status.get("CapPrm", "0"), 16),
                   status.get("Name", ""), int(status.get("TracerPid", "0") or 0), status.get("State", "")[:1])


def refuse_stopped(proc: Process) -> None:
    """:class:`AttachError` when ``proc`` is stopped: its interpreter would run nothing sent to it, and gdb's attach
    would wait on it or leave it as it found it only by chance."""
    if proc.stopped:
        how = "by a debugger (state t)" if proc.state == "t" else "(state T: SIGSTOP, or Ctrl-Z in its terminal)"
        raise AttachError(f"process {proc.pid} is stopped {how}: it runs no Python until it is continued",
                          where(proc.pid), f"attach once it runs again (`kill -CONT {proc.pid}` continues it)")


def environ(pid: int) -> Dict[str, str]:
    """The environment the process started with (what it changed since is not in /proc)."""
    try:
        with open(path(pid, "environ"), "rb") as handle:
            data = handle.read()
    except PermissionError:
        raise AttachError(f"cannot read /proc/{pid}/environ: you may not look into process {pid}", where(pid),
                          "attach as its owner or as root") from None
    out = {}
    for item in data.split(b"\0"):
        key, eq, value = item.partition(b"=")
        if eq:
            out[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
    return out


class Invocation(NamedTuple):
    """What a Python command line asks of the interpreter, read as words (nothing is run or opened)."""

    flags: str  # the single-letter flags before the program
    xopts: List[str]  # the -X options
    how: str  # "-m" (a module), "-c" (code), "script" (a file), "" (none: stdin, or an interactive prompt)
    what: str  # the module's name, the code, or the script's path
    args: Tuple[str, ...]  # the words after it: the program's own arguments


def invocation(argv: Tuple[str, ...]) -> Invocation:
    """``argv`` of a Python interpreter read as Python reads it: its own options, then the program and its words."""
    flags, xopts = "", []
    words = list(argv[1:])
    while words:
        word = words.pop(0)
        ended = word == "--"  # what follows is the script, even when it starts with a dash
        if ended:
            word = words.pop(0) if words else "-"
        if word == "-":  # the program from stdin
            return Invocation(flags, xopts, "", "", tuple(words))
        if ended or not word.startswith("-"):
            return Invocation(flags, xopts, "script", word, tuple(words))
        if word.startswith("--"):  # --check-hash-based-pycs MODE, --help...
            if word == "--check-hash-based-pycs" and words:
                words.pop(0)
            continue
        letters = word[1:]
        for i, letter in enumerate(letters):
            if letter in WITH_VALUE:
                value = letters[i + 1:] or (words.pop(0) if words else "")
                if letter == "X":
                    xopts.append(value)
                if letter in "cm":
                    return Invocation(flags, xopts, f"-{letter}", value, tuple(words))
                break
            flags += letter
    return Invocation(flags, xopts, "", "", tuple(words))


def interpreter_options(argv: Tuple[str, ...]) -> Tuple[str, List[str]]:
    """(the single-letter flags, the ``-X`` options) given to the interpreter before the script, -c or -m."""
    found = invocation(argv)
    return found.flags, found.xopts


def python_name(exe: str) -> Optional[Tuple[Optional[str], bool]]:
    """(``"3.11"`` or None when the name says no version, free-threaded) when ``exe`` is a Python interpreter by
    its name; None otherwise."""
    found = PYTHON_NAME.match(os.path.basename(exe))
    if not found:
        return None
    major, minor, t = found.groups()
    return (f"{major}.{minor}" if major and minor else None), bool(t)


def embeds_python(pid: int) -> bool:
    """Whether the process maps a libpython (an application embedding Python, or a shared-library build)."""
    try:
        with open(path(pid, "maps"), encoding="utf-8", errors="replace") as handle:
            return any("libpython3" in line for line in handle)
    except OSError:
        return False


def ancestors(pid: int) -> List[int]:
    """``pid``'s parent, its parent, ... up to the first process."""
    out = []
    while pid > 1 and len(out) < 256:
        try:
            pid = read(pid).ppid
        except AttachError:
            break
        out.append(pid)
    return out


def children(pid: int) -> List[int]:
    """The processes ``pid`` started and that still run (from each of its threads' ``children`` in /proc; none
    where the kernel does not say)."""
    found = set()
    try:
        tasks = os.listdir(path(pid, "task"))
    except OSError:
        return []
    for task in tasks[:4096]:
        try:
            with open(os.path.join(path(pid, "task"), task, "children"), encoding="ascii") as handle:
                found.update(int(word) for word in handle.read(1 << 20).split())
        except (OSError, ValueError):
            continue
    return sorted(found)


def matching(text: str, spared: Sequence[int] = ()) -> List[Process]:
    """The processes whose command line holds ``text``, run by this user (every user's, for root); not this one or
    its ancestors, nor ``spared`` and theirs (the command that asked, from another process: ``attach --ray``'s
    driver), nor a process forked from a matched parent with the same command line (a DataLoader worker)."""
    me = os.getpid()
    skip = {me, *ancestors(me)}
    for pid in spared:
        skip.update((pid, *ancestors(pid)))
    found: Dict[int, Process] = {}
    for name in os.listdir(PROC):
        if not name.isdigit() or int(name) in skip:
            continue
        try:
            proc = read(int(name))
        except (AttachError, OSError, ValueError, IndexError):
            continue
        if text in proc.command and (os.geteuid() == 0 or proc.uid == os.geteuid()):
            found[proc.pid] = proc
    return [p for p in sorted(found.values()) if not (p.ppid in found and found[p.ppid].argv == p.argv)]


def machine() -> str:
    """The boot of this kernel and this process's pid namespace: where two processes say the same, a pid names
    the same process for both ("" when either cannot be read)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        return f"{boot} {os.readlink(path(os.getpid(), 'ns/pid'))}" if boot else ""
    except OSError:
        return ""


def same_mounts(pid: int) -> bool:
    """Whether the process sees the same files at the same paths as this one (no container, no private /tmp)."""
    try:
        return os.readlink(path(pid, "ns/mnt")) == os.readlink(path(os.getpid(), "ns/mnt"))
    except OSError:
        return True  # cannot tell (an old kernel): the probe will find out


def alive(proc: Process) -> bool:
    """Whether ``proc`` still runs (the same process, not a later one with its pid)."""
    try:
        return read(proc.pid).started == proc.started
    except AttachError:
        return False
