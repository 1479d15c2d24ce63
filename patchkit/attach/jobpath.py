"""Where a running job's code is: its ``sys.path`` as its interpreter builds it, read from ``/proc`` as data.

A job runs in its own environment: a venv or conda env other than patchkit's, a package on ``PYTHONPATH``, a
script's folder.  :func:`of` rebuilds the folders of the job's ``sys.path`` the way CPython's start-up does,
from what ``/proc/PID`` says (its command line and interpreter options, working folder, environment, the
executable it was started as and that file's ``pyvenv.cfg``), without running anything of the job's:

1. the script's folder (``python FILE``) or the working folder (``-m``, ``-c``), unless ``-P``, ``-I`` or
   ``PYTHONSAFEPATH``;
2. ``PYTHONPATH`` (unless ``-E`` or ``-I``);
3. the site folders: the venv's (``pyvenv.cfg`` beside or above the executable), the user's
   (``~/.local/lib/pythonX.Y/site-packages``: not in a venv, nor with ``-s``, ``-I`` or ``PYTHONNOUSERSITE``),
   the base prefix's (``PYTHONHOME``, or two folders above the interpreter: ``site-packages`` and Debian's
   ``dist-packages``); none with ``-S``.  Each site folder's ``.pth`` files add the folders they name (a line
   that imports runs code: never followed).

:func:`find` is the first folder on it that holds a package.  What is read is a stranger's: every file is
bounded, and a wrong guess costs nothing, since the job's agent checks that the module it imported is the file
planned, byte for byte (:mod:`patchkit.runtime.attach.agent`).
"""

from __future__ import annotations

import os
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from patchkit.attach.process import Process, environ, invocation, path as proc_path, python_name

MAX_PTH = 64  # .pth files read in one site folder
PTH_LIMIT = 64 << 10  # bytes read of each
MAX_ENTRIES = 256  # folders of one job's path


class JobPath(NamedTuple):
    entries: Tuple[str, ...]  # the folders of the job's sys.path, in order (those that exist)
    script: str  # the __main__ file of `python FILE`, absolute ("" for -m, -c, stdin)
    cwd: str  # the job's working folder ("" when it cannot be read)

    def find(self, package: str) -> Optional[str]:
        """The folder on the path the job imports ``package`` from, as the import system picks it: the first that
        holds it as a regular package (``package/__init__.py``) or a module (``package.py``); else, a namespace
        package, the first folder of that name.  None when none holds it."""
        for entry in self.entries:
            if os.path.isfile(os.path.join(entry, package, "__init__.py")) or \
                    os.path.isfile(os.path.join(entry, package + ".py")):
                return entry
        return next((e for e in self.entries if os.path.isdir(os.path.join(e, package))), None)


def command(argv: Sequence[str]) -> Tuple[str, str, str]:
    """(the interpreter's single-letter flags, what it runs: ``script``, ``module``, ``command`` or ``stdin``,
    and the script's or module's name) from the job's command line (:func:`~patchkit.attach.process.invocation`)."""
    found = invocation(tuple(argv))
    runs = {"script": "script", "-m": "module", "-c": "command"}.get(found.how, "stdin")
    return found.flags, runs, found.what if runs in ("script", "module") else ""


def _read_link(pid: int, name: str) -> str:
    try:
        return os.readlink(proc_path(pid, name))
    except OSError:
        return ""


def _under(folder: str, name: str) -> str:
    return os.path.normpath(os.path.join(folder, name)) if folder or os.path.isabs(name) else ""


def executable(argv0: str, cwd: str, env: Dict[str, str]) -> str:
    """The path the job was started as (what ``sys.executable`` becomes): a venv's ``bin/python`` is a link to
    the base interpreter, which ``/proc/PID/exe`` names instead."""
    if "/" in argv0:
        return _under(cwd, argv0)
    for folder in env.get("PATH", "").split(os.pathsep)[:64]:
        candidate = _under(cwd, os.path.join(folder or ".", argv0))
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return ""


def venv_of(exe: str) -> Tuple[str, Dict[str, str]]:
    """(the venv's folder, its ``pyvenv.cfg`` settings) when ``exe`` is a venv's interpreter, else ("", {})."""
    if not exe:
        return "", {}
    for folder in (os.path.dirname(exe), os.path.dirname(os.path.dirname(exe))):
        cfg = os.path.join(folder, "pyvenv.cfg")
        text = _small(cfg)
        if text is not None:
            settings = {}
            for line in text.splitlines():
                key, eq, value = line.partition("=")
                if eq:
                    settings[key.strip().lower()] = value.strip()
            return folder, settings
    return "", {}


def _small(path: str, limit: int = PTH_LIMIT) -> Optional[str]:
    """The text of the regular file ``path``, at most ``limit`` bytes read (None when it is not one)."""
    from patchkit.core.confined import Refused, open_regular

    try:
        with os.fdopen(open_regular(path), "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except (OSError, Refused):
        return None


def site_folders(prefix: str, names: Sequence[str]) -> List[str]:
    """Where an installation at ``prefix`` keeps packages: ``site-packages`` (pip, conda, pyenv, venvs) and
    Debian's ``dist-packages``; ``names`` the interpreter's folder names (``python3.11``; none known: every
    ``python3.*`` folder of the prefix)."""
    if not names:
        try:
            names = sorted(n for n in os.listdir(os.path.join(prefix, "lib")) if n.startswith("python3."))[:8]
        except OSError:
            names = []
    out = []
    for name in names:
        out += [os.path.join(prefix, lib, name, "site-packages") for lib in ("lib", "lib64")] + [
            os.path.join(prefix, "local", "lib", name, "dist-packages"), os.path.join(prefix, "lib", name, "dist-packages")]
    return out + [os.path.join(prefix, "lib", "python3", "dist-packages")]


def names_of(exe: str) -> List[str]:
    """The interpreter's library folder name, from its file's name (``python3.11``, ``python3.13t``)."""
    named = python_name(exe)
    return [f"python{named[0]}" + ("t" if named[1] else "")] if named and named[0] else []


def with_pth(folder: str) -> List[str]:
    """``folder`` and the folders its ``.pth`` files name, in the order ``site`` adds them."""
    out = [folder]
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".pth"))[:MAX_PTH]
    except OSError:
        return out
    for name in names:
        text = _small(os.path.join(folder, name)) or ""
        for line in text.splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "import ", "import\t")):
                out.append(_under(folder, line))
    return out


def of(proc: Process) -> JobPath:
    """The job's ``sys.path`` folders, rebuilt from ``/proc`` (see the module's docstring)."""
    env = environ(proc.pid)
    cwd = _read_link(proc.pid, "cwd")
    flags, runs, name = command(proc.argv)
    isolated = "I" in flags
    use_env = not ("E" in flags or isolated)
    entries: List[str] = []
    script = ""
    if runs == "script" and name:
        script = os.path.realpath(_under(cwd, name)) if cwd or os.path.isabs(name) else ""
    if not (isolated or "P" in flags or (use_env and env.get("PYTHONSAFEPATH"))):
        entries.append(os.path.dirname(script) if runs == "script" else cwd)
    if use_env:
        entries += [_under(cwd, p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if "S" not in flags:
        entries += _sites(proc, env, cwd, flags, use_env)
    seen, out = set(), []
    for entry in entries:
        if entry and entry not in seen and os.path.isdir(entry):
            seen.add(entry)
            out.append(entry)
    return JobPath(tuple(out[:MAX_ENTRIES]), script, cwd)


def _sites(proc: Process, env: Dict[str, str], cwd: str, flags: str, use_env: bool) -> List[str]:
    venv, cfg = venv_of(executable(proc.argv[0] if proc.argv else "", cwd, env))
    home = env.get("PYTHONHOME", "").split(os.pathsep)[0] if use_env else ""
    base = home or (os.path.dirname(os.path.dirname(proc.exe)) if proc.exe else "")
    user = not ("s" in flags or "I" in flags or (use_env and env.get("PYTHONNOUSERSITE")))
    folders: List[str] = []
    if venv:
        folders += site_folders(venv, names_of(proc.exe))
        system = cfg.get("include-system-site-packages", "false").lower() == "true"
        user = user and system
        if not system:
            base = ""
        elif cfg.get("home") and not home:
            base = os.path.dirname(cfg["home"].rstrip("/"))
    if user and env.get("HOME"):
        folders += [f for f in site_folders(os.path.join(env["HOME"], ".local"), names_of(proc.exe))
                    if f.endswith("site-packages")]
    if base:
        folders += site_folders(base, names_of(proc.exe))
    out: List[str] = []
    for folder in folders:
        if os.path.isdir(folder):
            out += with_pth(folder)
    return out
