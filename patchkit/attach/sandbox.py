"""A helper of patchkit's own, run as another user and kept apart from this command: :func:`run`.

What attach must ask as a job's user (can that user import patchkit's runtime, read these files) is asked of
patchkit's own interpreter (``sys.executable``: root's choice), never of the job's, with:

- ``-I -S -B``: no environment variable of Python's, no current folder or script folder on ``sys.path``, no
  ``site``, no bytecode written; the environment itself is ``PATH`` alone;
- stdin from ``/dev/null``, a new session (``setsid``: no controlling terminal, so nothing it runs can read or
  push into this command's terminal, nor get its terminal's signals), no descriptor of this command's but the
  two files its output goes to, and a working folder made empty for it (root's, 0700: nothing can be put there);
- the user's uid, gid and groups (``ids``): when this command is root it is started as root and drops them all
  (``setgroups``, ``setresgid``, ``setresuid``) as its first act, before it reads anything the question names,
  so a user who cannot reach patchkit's interpreter (under ``/root``) is still asked.  The modules the code
  needs (``warm``: of the standard library, or patchkit's own from patchkit's own install folder, code this
  command runs already) are imported before the drop, and patchkit's forgotten again, so the answer is about
  the user's rights on what the question names, not on patchkit's interpreter;
- a bounded time (its whole process group killed at the end, and on the timeout), bounded output
  (``RLIMIT_FSIZE``), no core file; its answer, the last line of its output, must be a JSON object; anything
  else is one :class:`SandboxError` line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple

# The folder that holds the ``patchkit`` package this command runs.
INSTALL = str(Path(__file__).resolve().parent.parent.parent)
ENV = {"PATH": "/usr/bin:/bin"}
POLL = 0.01

PRELUDE = r'''
import importlib, json, os, resource, sys
sys.dont_write_bytecode = True
_h = json.loads(sys.argv.pop(1))
resource.setrlimit(resource.RLIMIT_FSIZE, (_h["limit"], _h["limit"]))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
if _h["warm"]:
    sys.path.insert(0, _h["own"])
    for _m in _h["warm"]:
        __import__(_m)
    sys.path.remove(_h["own"])
    for _m in [m for m in sys.modules if m == "patchkit" or m.startswith("patchkit.")]:
        del sys.modules[_m]
    sys.path_importer_cache.clear()
if _h["ids"]:
    _u, _g, _gs = _h["ids"]
    os.setgroups(_gs)
    os.setresgid(_g, _g, _g)
    os.setresuid(_u, _u, _u)
    if os.getresuid() != (_u, _u, _u) or os.getresgid() != (_g, _g, _g) or sorted(os.getgroups()) != sorted(_gs):
        raise SystemExit("the helper could not become uid %d" % _u)
importlib.invalidate_caches()
del _h


def answer(out):
    sys.stdout.write("\n" + json.dumps(out) + "\n")
    sys.stdout.flush()

'''


class SandboxError(Exception):
    """The helper did not answer: it could not start, ran out of time, or said something that is no answer."""


class Ids(NamedTuple):
    uid: int
    gid: int
    groups: Tuple[int, ...]


def _last_line(handle, limit: int) -> str:
    handle.seek(0)
    data = handle.read(limit + 1)
    lines = [ln for ln in data[:limit].decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _wait(proc: subprocess.Popen, timeout: float) -> bool:
    """Until the helper ended (not reaped yet: its pid, and so its group's, stays taken); False on the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL)


def drops(ids: Optional[Ids]) -> bool:
    """Whether :func:`run` would run as another user than this command's: only root drops to a job's user's ids."""
    return ids is not None and os.geteuid() == 0 and ids.uid != 0


def run(code: str, args: Sequence[str] = (), ids: Optional[Ids] = None, timeout: float = 20.0,
        limit: int = 1 << 16, warm: Sequence[str] = ()) -> Dict[str, Any]:
    """Run ``code`` (Python, which calls ``answer(dict)``) with ``sys.argv[1:] == args``, as ``ids`` (None, or
    when this command is not root: as this user); its answer, or :class:`SandboxError`."""
    drop = list(ids[:2]) + [list(ids.groups)] if ids is not None and drops(ids) else None
    head = json.dumps({"ids": drop, "warm": list(warm), "own": INSTALL, "limit": limit})
    folder = tempfile.mkdtemp(prefix="patchkit-helper-")
    try:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            try:
                proc = subprocess.Popen([sys.executable, "-I", "-S", "-B", "-c", PRELUDE + code, head, *args],
                                        stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=folder, env=ENV,
                                        start_new_session=True, close_fds=True)
            except OSError as exc:
                raise SandboxError(f"cannot start {sys.executable}: {exc.strerror or exc}") from None
            ended = _wait(proc, timeout)
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # whatever it left in its group; the group is still its own
            except OSError:
                pass
            proc.wait()
            if not ended:
                raise SandboxError(f"it did not finish within {timeout:g} s")
            said = _last_line(out, limit)
            try:
                data = json.loads(said)
            except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
                data = None
            if not isinstance(data, dict):
                tail = _last_line(err, limit) or "no output"
                raise SandboxError(f"it gave no answer (exit {proc.returncode}: {tail[:300]})")
            return data
    finally:
        try:
            os.rmdir(folder)
        except OSError:
            pass
