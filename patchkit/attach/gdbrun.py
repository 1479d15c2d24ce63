"""A tool that gets into a job (gdb, or 3.14's ``sys.remote_exec`` sender), run apart from this command's terminal and
signals, and made to let go of the job cleanly.

:func:`run` starts the tool in its own session and process group (``start_new_session``), stdin ``/dev/null``, no
descriptor of this command's but its output file: a closed terminal (SIGHUP), Ctrl-C or a SIGTERM sent to this
command's group never reaches it.  gdb ended by SIGHUP, SIGTERM or SIGKILL while it runs a function in the job (a
call gdb makes there) leaves the job in that call with gdb's registers: the job dies (SIGSEGV) or stays stopped.

- **Interrupted** (Ctrl-C, or SIGTERM and SIGHUP, which the command turns into KeyboardInterrupt) while the tool is
  in the job: the request is withdrawn at once (the lines the tool may still queue find nothing and say so), one
  line says that this command waits, the tool ends on its own (bounded by its time limit), and then the interrupt
  goes on.  An interrupt that reaches the main thread while other threads run the tools: :func:`settle`.
- **Too slow** (``PATCHKIT_GDB_TIMEOUT`` seconds, :func:`limit`): the tool is asked to leave, gently first.
  SIGINT, to the tool alone: gdb's ``set unwindonsignal on`` makes it give up a call in progress and put the job's
  registers back, and ``handle SIGINT ... nopass`` keeps the SIGINT that gdb uses to stop the job from reaching it;
  gdb's commands after the interrupted one then run, ``detach`` and ``quit`` last.  Then SIGTERM (gdb detaches
  when it quits, but without giving up a call in progress: the job may die); only then SIGKILL, said as what
  it may leave: the job stopped (``kill -CONT PID``) or ended.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

from patchkit.attach.process import AttachError, where

LIMIT = 120.0  # seconds gdb may take in a job by default (PATCHKIT_GDB_TIMEOUT)
ASKS = ((signal.SIGINT, 10.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0))  # each sign to leave, and how long it gets


def limit(default: float = LIMIT) -> float:
    """Seconds a tool may stay in a job: ``$PATCHKIT_GDB_TIMEOUT``, else ``default``."""
    text = os.environ.get("PATCHKIT_GDB_TIMEOUT", "").strip()
    if not text:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < 1e6:
        raise AttachError(f"PATCHKIT_GDB_TIMEOUT={text[:40]!r} is not a number of seconds", None,
                          f"give seconds (the default is {default:g}), or unset it")
    return seconds


_tell: Callable[[str], None] = lambda line: None  # noqa: E731 - the command line hands its own (tell_with)


def tell_with(say: Callable[[str], None]) -> None:
    """Where the line that says this command waits for a tool goes (the command line's stderr)."""
    global _tell
    _tell = say


class _InJob:
    def __init__(self, pid: int, tool: str, withdraw: Callable[[], None], ends_by: float):
        self.pid, self.tool, self.withdraw, self.ends_by = pid, tool, withdraw, ends_by
        self.done, self.stopped = threading.Event(), False

    def stop(self) -> None:
        """The request withdrawn and the wait said, once."""
        if self.done.is_set() or self.stopped:
            return
        self.stopped = True
        try:
            self.withdraw()
        except OSError:
            pass
        _tell(f"waiting for {self.tool} to leave process {self.pid} before stopping")


_in_jobs: Dict[int, _InJob] = {}  # id -> a tool in a job now
_lock = threading.Lock()


def grace() -> float:
    return sum(seconds for _, seconds in ASKS) + 5.0


def run(command: List[str], pid: int, seconds: float, withdraw: Callable[[], None], tool: str = "gdb",
        env: Optional[Dict[str, str]] = None) -> Tuple[int, str]:
    """The tool's exit status and what it said (stdout and stderr), once it has ended; see the module's text for an
    interrupt (withdrawn, waited for, raised again) and for a tool past ``seconds`` (asked to leave, then
    :class:`AttachError` saying how it left)."""
    entry = _InJob(pid, tool, withdraw, time.monotonic() + seconds + grace())
    with tempfile.TemporaryFile() as said:
        with _lock:
            _in_jobs[id(entry)] = entry
        try:
            try:
                proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=said, stderr=subprocess.STDOUT,
                                        start_new_session=True, close_fds=True, env=env)
            except OSError as exc:
                raise AttachError(f"cannot run {tool} ({command[0]}): {exc}", where(pid)) from None
            interrupted, how = _wait(proc, entry, seconds)
        finally:
            entry.done.set()
            with _lock:
                _in_jobs.pop(id(entry), None)
        said.seek(0)
        text = said.read(1 << 20).decode("utf-8", "replace")
    if interrupted:
        if how:
            _tell(f"{tool} did not finish within {seconds:g} s in process {pid}; {how}")
        raise KeyboardInterrupt
    if how:
        raise AttachError(f"{tool} did not finish within {seconds:g} s; {how}", where(pid),
                          "is the process stopped, or traced by another debugger? (PATCHKIT_GDB_TIMEOUT sets the "
                          "seconds)")
    return proc.returncode, text


def _wait(proc: subprocess.Popen, entry: _InJob, seconds: float) -> Tuple[bool, str]:
    """(whether an interrupt came meanwhile, "" or how the tool was made to leave once past ``seconds``)."""
    interrupted = False
    end = time.monotonic() + seconds
    while True:
        try:
            proc.wait(timeout=max(0.0, end - time.monotonic()))
            return interrupted, ""
        except subprocess.TimeoutExpired:
            break
        except KeyboardInterrupt:
            interrupted = True
            entry.stop()
    for sign, given in ASKS:
        try:
            os.kill(proc.pid, sign)  # the tool alone: it leads its own group, which holds nothing else of ours
        except ProcessLookupError:
            pass
        end = time.monotonic() + given
        while True:
            try:
                proc.wait(timeout=max(0.0, end - time.monotonic()))
                return interrupted, _left(sign, entry)
            except subprocess.TimeoutExpired:
                break
            except KeyboardInterrupt:
                interrupted = True
                entry.stop()
    return interrupted, _left(signal.SIGKILL, entry)


def _left(sign: int, entry: _InJob) -> str:
    if sign == signal.SIGINT:
        return "it was interrupted and let go of the process, which runs on as it was"
    if sign == signal.SIGTERM:
        return (f"it did not leave when interrupted and was terminated; process {entry.pid} runs on unless "
                f"{entry.tool} was inside a call in it, which ends it")
    return (f"it was killed: process {entry.pid} may be left stopped (`kill -CONT {entry.pid}` resumes it) or may "
            "have ended")


def settle(pool=None) -> None:
    """An interrupt in the main thread while other threads run tools in jobs: no tool starts any more (``pool``'s
    calls not begun are cancelled), each request in flight is withdrawn, and this waits, one line said per
    process, until every tool has ended (each bounded by its own time limit); interrupts meanwhile are waited
    through.  The caller then raises the interrupt again."""
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)
    with _lock:
        waiting = list(_in_jobs.values())
    for entry in waiting:
        entry.stop()
    for entry in waiting:
        while not entry.done.is_set():
            try:
                entry.done.wait(max(0.0, entry.ends_by - time.monotonic()))
                break
            except KeyboardInterrupt:
                continue
