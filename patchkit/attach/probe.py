"""The job's own interpreter asked, as the job's own user: its version and flavour, and whether it imports the runtime.

``/proc/PID/exe`` is run with ``-I -S -c`` (no environment, no site, no current folder), as the uid, gid and
groups of the process (when patchkit runs as root), so nothing runs with more rights than the job has: it
prints its version, whether it is a free-threaded build, and whether ``patchkit.runtime`` (and the attach
agent) import from patchkit's own install folder.  When they do not (a folder that user cannot read), it is
asked again with the job's own environment, from its working folder: a job whose environment has patchkit
gets it from there.  Only a file that is a Python interpreter by its name is ever run (see
:func:`patchkit.attach.process.python_name`).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Dict, NamedTuple, Optional, Tuple

from patchkit.attach.process import AttachError, Process, environ, path, where

# Where patchkit itself is imported from: the folder that holds the ``patchkit`` package.
INSTALL = str(Path(__file__).resolve().parent.parent.parent)

CODE = r"""
import json, sys, sysconfig
out = {"version": list(sys.version_info[:3]), "implementation": sys.implementation.name,
       "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")), "executable": sys.executable}
try:
    if sys.argv[1]:
        sys.path.insert(0, sys.argv[1])
    import patchkit, patchkit.runtime, patchkit.attach.agent
    patchkit.runtime.require(int(sys.argv[2]))
    out["patchkit"] = patchkit.__file__
    out["patchkit_version"] = getattr(patchkit, "__version__", "")
except BaseException as exc:
    out["import_error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


class Interpreter(NamedTuple):
    version: Tuple[int, int, int]
    free_threaded: bool
    executable: str
    runtime_from: str  # the folder the agent puts first on sys.path to import patchkit ("" : the job's own)

    @property
    def shown(self) -> str:
        return "Python " + ".".join(map(str, self.version)) + (" (free-threaded)" if self.free_threaded else "")


def _as_user(proc: Process) -> Dict[str, object]:
    """subprocess arguments that run a command as the process's own user (only root can switch)."""
    if os.geteuid() != 0 or proc.uid == 0:
        return {}
    return {"user": proc.uid, "group": proc.gids[0] if proc.gids else proc.uid, "extra_groups": list(proc.groups)}


def _run(proc: Process, exe: str, args, env: Dict[str, str], cwd: str) -> Dict[str, object]:
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=60,
                              **_as_user(proc))
    except (OSError, subprocess.SubprocessError) as exc:
        raise AttachError(f"cannot run the job's interpreter {exe} as uid {proc.uid}: {exc}", where(proc.pid),
                          "is the process a Python interpreter that this machine can start?") from None
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise AttachError(f"the job's interpreter {exe} did not answer as a Python does ({tail[:300]})",
                          where(proc.pid), "attach works with CPython 3.10 and later") from None


def ask(proc: Process, lines: int, install: Optional[str] = None) -> Interpreter:
    """What the job's interpreter is, and where it imports patchkit from; :class:`AttachError` when it cannot."""
    install = INSTALL if install is None else install
    exe = proc.exe if os.path.isfile(proc.exe) else path(proc.pid, "exe")
    first = _run(proc, exe, ["-I", "-S", "-c", CODE, install, str(lines)], {"PATH": os.defpath}, "/")
    if first.get("implementation") != "cpython":
        raise AttachError(f"process {proc.pid} runs {first.get('implementation')}, not CPython", where(proc.pid),
                          "attach works with CPython 3.10 and later")
    version = tuple(int(v) for v in first["version"])  # type: ignore[union-attr]
    found = Interpreter(version, bool(first["free_threaded"]), exe, install)  # type: ignore[arg-type]
    if "import_error" not in first:
        return found
    try:  # the job's own environment, from its own folder: where the job itself would import patchkit from
        cwd = os.readlink(path(proc.pid, "cwd"))
        second = _run(proc, exe, ["-c", CODE, "", str(lines)], environ(proc.pid), cwd)
    except (OSError, AttachError):
        second = {"import_error": "not tried"}
    if "import_error" not in second:
        return found._replace(runtime_from="")
    raise AttachError(f"{found.shown} of process {proc.pid} (uid {proc.uid}) cannot import patchkit's runtime from "
                      f"{install} ({first['import_error']}), nor from its own environment ({second['import_error']})",
                      where(proc.pid), f"the runtime needs only the standard library: make {install} readable by "
                      f"uid {proc.uid}, or install the same patchkit in the job's environment")
