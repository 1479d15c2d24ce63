"""``--match`` among strangers: each process it found checked on its own, and one that a check of its own refuses
passed over with why, rather than refusing the whole command.

A job is rarely alone under its text: the shell, ``timeout``, torchrun or ``srun`` that started it holds the same
words in its command line, and so may any user's ``sleep``, shell, stopped Python or Python blocked in a call.
:func:`launcher` tells a launcher (and Ray's own processes) from ``/proc`` alone, as data: the executable the
kernel names for a program that is not Python (a shell, ``env``, ``nohup``, ``timeout``, ``setsid``, ``srun``,
``mpirun``, ``raylet``...), and for a Python the shape of its command line (``-m torch.distributed.run``, a
``torchrun``, ``deepspeed`` or ``accelerate launch`` script, Ray's dashboard, an idle worker titled ``ray::IDLE``).
Such a process runs no training code itself: it is passed over with one line (:class:`Launcher`) before any
other check, so no helper runs for it and no gdb stops it; its Python children are matched on their own.
Anything less certain is left to the checks (a Python launcher not in the table is passed over once its agent
says it has not imported the recipe's module).  :func:`checked` checks one process (a launcher first, then
stopped, then every check of :func:`patchkit.attach.access.check`) and never raises: it returns the target, or
the refusal as :class:`Passed`; :func:`check_all` checks every process found, in parallel and bounded.
:func:`for_every_process` tells the refusals that are the same for every process (gdb
missing, the kernel's Yama setting), which still refuse the command; :func:`nothing_left` is the error when
every process was passed over, each named with why, on one line.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from patchkit.attach import access
from patchkit.attach.process import (AttachError, Process, ancestors, children, invocation, python_name, read,
                                     refuse_stopped, where)

# Programs that are not Python and start the job, known by the file the kernel says they run (/proc/PID/exe).
LAUNCHERS = frozenset({
    "sh", "ash", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "fish", "csh", "tcsh",  # shells
    "env", "nohup", "timeout", "setsid", "nice", "ionice", "taskset", "numactl", "stdbuf", "chrt", "time",
    "sudo", "su", "runuser", "setpriv", "flock",  # run a command and wait for it, or hand it their place
    "srun", "salloc", "slurmstepd", "mpirun", "mpiexec", "mpiexec.hydra", "hydra_pmi_proxy", "orterun", "orted",
    "prterun", "prted", "prte",  # Slurm's and MPI's
})
RAY_PROGRAMS = frozenset({"raylet", "gcs_server", "plasma_store_server"})  # Ray's own, not Python
# Python launchers, by their command line: python [options] -m MODULE, or python [options] SCRIPT (a console
# script: the kernel runs the interpreter its first line names, with the script's path as the next word).
LAUNCHER_MODULES = {"torch.distributed.run": "torchrun", "torch.distributed.launch": "torch.distributed.launch",
                    "accelerate.commands.launch": "accelerate launch", "deepspeed.launcher.runner": "deepspeed",
                    "deepspeed.launcher.launch": "deepspeed.launcher.launch"}
LAUNCHER_SCRIPTS = {"torchrun": "torchrun", "deepspeed": "deepspeed"}
SUBCOMMANDS = {"accelerate": ("launch", "accelerate launch"),  # (the word that launches, the launcher's name)
               "accelerate.commands.accelerate_cli": ("launch", "accelerate launch")}
RAY_SCRIPTS = ("ray/dashboard/dashboard.py", "ray/dashboard/agent.py", "ray/_private/log_monitor.py",
               "ray/autoscaler/_private/monitor.py", "ray/_private/runtime_env/agent/main.py")
# The titles Ray gives its own Python processes (a worker that runs a task or an actor is named after it instead)
RAY_TITLES = frozenset({"ray::IDLE", "ray::DashboardAgent", "ray::RuntimeEnvAgent", "ray::IDLE_SpillWorker",
                        "ray::IDLE_RestoreWorker", "ray::SPILL_SpillWorker", "ray::RESTORE_RestoreWorker",
                        "ray::DELETE_SpillWorker", "ray::DELETE_RestoreWorker"})


class PassedOver(AttachError):
    """``--match`` found processes, and every one was passed over (each named with why): nothing to attach."""


class Passed(NamedTuple):
    """A process refused by a check of its own, as ``--match`` passes it over: why, and its command line (a
    stranger's text: printed through :func:`patchkit.core.printable.printable`)."""

    pid: int
    command: str
    error: AttachError

    @property
    def why(self) -> str:
        return self.error.passed if isinstance(self.error, Launcher) else self.error.message

    def as_json(self) -> Dict[str, Any]:
        return {"pid": self.pid, "state": "passed over", "passed_over": True, "error": self.why,
                "command": self.command[:300]}


class Launcher(AttachError):
    """A process that ``/proc`` shows to be a launcher, or one of Ray's own: it runs no training code itself.  Named
    by pid it is refused, naming the processes it started; ``--match`` passes it over (:attr:`passed`)."""

    def __init__(self, proc: Process, kind: str, name: str):
        self.kind, self.name = kind, name
        what = f"a launcher ({name})" if kind == "launcher" else f"Ray's own process ({name})"
        kids = [f"{pid} ({_command(pid)})" for pid in children(proc.pid)[:SHOWN_CHILDREN]]
        hint = (f"give the pid of the process it started that trains: {', '.join(kids)}" if kids else
                "give the pid of the Python process that trains (`ps -ef | grep python`)")
        super().__init__(f"process {proc.pid} is {what}, not a process that trains", where(proc.pid),
                         hint + "; or --match TEXT: it passes launchers over and attaches to each process whose "
                         "command line holds TEXT")
        self.passed = (f"{what}, its Python children are matched on their own" if kind == "launcher" else
                       f"{what}, not the job's: the job's workers are matched on their own")


SHOWN_CHILDREN = 4


def _command(pid: int) -> str:
    try:
        return read(pid).command[:80]
    except AttachError:
        return "ended"


def launcher(proc: Process) -> Optional[Tuple[str, str]]:
    """("launcher" or "ray", its name) when ``/proc`` says for certain that ``proc`` is a launcher or one of Ray's own
    processes; None when it does not.  Read as data: the executable's file name the kernel gives (an empty one, as
    for another user's process this user may not look into, says nothing), and for a Python its words, as the
    interpreter reads them (a title the process gave itself is one word: only :data:`RAY_TITLES` are known)."""
    if not proc.exe:
        return None
    name = os.path.basename(proc.exe)
    if python_name(proc.exe) is None:
        if name in RAY_PROGRAMS:
            return "ray", name
        return ("launcher", name) if name in LAUNCHERS else None
    if len(proc.argv) == 1 and proc.argv[0].rstrip(" ") in RAY_TITLES:
        return "ray", proc.argv[0].rstrip(" ")
    call = invocation(proc.argv)
    if call.how == "-m":
        program = call.what
        found = LAUNCHER_MODULES.get(program)
    elif call.how == "script":
        program = os.path.basename(call.what)
        found = LAUNCHER_SCRIPTS.get(program)
        ray = [tail for tail in RAY_SCRIPTS if call.what == tail or call.what.endswith("/" + tail)]
        if ray:
            return "ray", ray[0]
    else:
        return None
    word, named = SUBCOMMANDS.get(program, ("", ""))
    if found is None and word and call.args[:1] == (word,):
        found = named
    return ("launcher", found) if found else None


def checked(pid: int, lines: int, install: Optional[str] = None) -> Union[access.Target, Passed]:
    """The process as a :class:`~patchkit.attach.access.Target`, or its refusal; never raises.  A launcher is refused
    first, from ``/proc`` alone (:func:`launcher`); then a stopped process: its interpreter would run nothing sent to
    it, and gdb would wait on it."""
    command = ""
    try:
        proc = read(pid)
        command = proc.command
        found = launcher(proc)
        if found and pid != os.getpid() and pid not in ancestors(os.getpid()):  # this command's own: access says so
            raise Launcher(proc, *found)
        refuse_stopped(proc)
        return access.check(pid, lines, install)
    except AttachError as exc:
        return Passed(pid, command, exc)
    except Exception as exc:  # noqa: BLE001 - a stranger's process may answer anything: that process's refusal
        return Passed(pid, command, AttachError(f"{type(exc).__name__}: {exc}", where(pid)))


CHECKS = 30.0  # seconds --match gives the checks of every process found; one still going on then is passed over


def own(pid: int) -> bool:
    """Whether ``pid`` runs as this user (root's own job, for root): checked first, so that no number of other
    users' processes can keep it from its place among the checks."""
    try:
        return read(pid).uid == os.geteuid()
    except AttachError:
        return False


def unchecked(pid: int, seconds: float) -> Passed:
    """A process whose checks had not ended ``seconds`` after ``--match`` began them (another user can stop or
    slow the helper that asks its questions as her): passed over."""
    try:
        command = read(pid).command
    except AttachError:
        command = ""
    return Passed(pid, command, AttachError(f"process {pid} was not checked within {seconds:g} s (its user's helper "
                                            "did not answer in time)", where(pid)))


def check_all(pids: Sequence[int], lines: int, pass_over: bool, meanwhile: Callable[[Sequence[int]], None] =
              lambda pids: None) -> Tuple[List[Passed], List[access.Target]]:
    """Every process's own checks, 8 at a time (this user's first: checked before decoys; ``meanwhile`` runs with
    them, given that order): (those passed over, the targets).  Their first refusal raises, unless ``pass_over``
    (``--match``) and it is the process's own, not :func:`for_every_process`'s; with ``pass_over``, a check still
    going on after :data:`CHECKS` seconds passes its process over."""
    from concurrent.futures import ThreadPoolExecutor, wait

    pids = sorted(pids, key=lambda pid: not own(pid))
    pool = ThreadPoolExecutor(max_workers=8)
    try:
        checks = [pool.submit(checked, pid, lines) for pid in pids]
        meanwhile(pids)
        wait(checks, timeout=CHECKS if pass_over else None)
    finally:  # past the bound (--match), a check still going on is that process's, passed over below
        pool.shutdown(wait=not pass_over, cancel_futures=True)
    found = [c.result() if c.done() and not c.cancelled() else unchecked(pid, CHECKS) for pid, c in zip(pids, checks)]
    refused = [p.error for p in found if isinstance(p, Passed) and (not pass_over or for_every_process(p.error))]
    if refused:
        raise refused[0]  # a process's comes first
    return [p for p in found if isinstance(p, Passed)], [t for t in found if not isinstance(t, Passed)]


def for_every_process(exc: AttachError) -> bool:
    """A refusal that is the same for every process (gdb is missing; the kernel's Yama lets this user trace none):
    the command's, which ``--match`` does not pass over."""
    return exc.hint == access.GDB_PACKAGE or exc.message.startswith("the kernel's Yama ptrace_scope")


SHOWN = 20  # processes named in the error when every one was passed over


def nothing_left(passed: Sequence[Tuple[int, str]]) -> PassedOver:
    """The error when ``--match`` passed over every process it found: each ``(pid, why)``, on one line."""
    from patchkit.core.printable import printable

    each = "; ".join(f"pid {pid}: {printable(why)[:300]}" for pid, why in passed[:SHOWN])
    more = f"; and {len(passed) - SHOWN} more" if len(passed) > SHOWN else ""
    return PassedOver(f"every process matched was passed over: {each}{more}", None,
                      "nothing was attached; --match compares the whole command line: give a TEXT that only the job's "
                      "processes hold (`ps -ef` shows them), or the job's pid, which is refused with what to do")
