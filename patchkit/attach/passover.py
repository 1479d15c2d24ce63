"""``--match`` among strangers: each process it found checked on its own, and one that a check of its own refuses
passed over with why, rather than refusing the whole command.

Any user may start a process whose command line holds the text root matches on: a ``sleep`` or a shell, a
stopped Python, a Python blocked in a call.  :func:`checked` checks one process (stopped first, then every check
of :func:`patchkit.attach.access.check`) and never raises: it returns the target, or the refusal as
:class:`Passed`.  :func:`for_every_process` tells the refusals that are the same for every process (gdb
missing, the kernel's Yama setting), which still refuse the command; :func:`nothing_left` is the error when
every process was passed over, each named with why, on one line.
"""

from __future__ import annotations

import os
from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple, Union

from patchkit.attach import access
from patchkit.attach.process import AttachError, read, refuse_stopped, where


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
        return self.error.message

    def as_json(self) -> Dict[str, Any]:
        return {"pid": self.pid, "state": "passed over", "passed_over": True, "error": self.why,
                "command": self.command[:300]}


def checked(pid: int, lines: int, install: Optional[str] = None) -> Union[access.Target, Passed]:
    """The process as a :class:`~patchkit.attach.access.Target`, or its refusal; never raises.  A stopped process is
    refused first: its interpreter would run nothing sent to it, and gdb would wait on it."""
    command = ""
    try:
        proc = read(pid)
        command = proc.command
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
