"""The run cache of `patchkit run`: each patched module's text, by the sha256 of its source and the recipe's key.

``$PATCHKIT_HOME/run-cache/<source sha256>-<recipe key>.py``, written
atomically by `patchkit run` (or, on a node without it, by the first process
that imports the module: :func:`rebuild`, in a process of its own) and read by every later process.
An entry is data, not trusted code: the import hook executes it only when
its sha256 is the one the planning process recorded (:func:`text_sha256`).

Standard library only: the engine runs in :mod:`patchkit.hook.rebuild`'s process, never in the job's.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Dict, Optional

CACHE = "run-cache"
MAX_BYTES = 64 * 1024 * 1024  # a patched module is a few hundred KiB at most; anything far larger is not ours


def cache_dir() -> str:
    from patchkit.core.manifest import home  # standard library only

    return os.path.join(home(), CACHE)


def cache_name(sha: str, key: str) -> str:
    return f"{sha}-{key}.py"


def text_sha256(text: str) -> str:
    """The sha256 of a patched text as it is stored (UTF-8, newlines as they are): what the hook compares."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read(path: str) -> bytes:
    """An entry's bytes, at most :data:`MAX_BYTES` of them (a larger one is read that far: its hash will not match).

    Opened without blocking, so a FIFO put in its place cannot hang the job's start; anything but a plain file
    is an OSError (FileNotFoundError only when there is nothing there: the caller then rebuilds the entry).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a plain file")
        return handle.read(MAX_BYTES + 1)


def rebuild(spec: Dict[str, Any], name: str, source: bytes, path: str, expected: Optional[str] = None) -> str:
    """The patched text of module ``name``, made by ``python -m patchkit.hook.rebuild`` in a process of its own
    (which stores it at ``path`` when its sha256 is ``expected``): the engine never loads in the job's process."""
    import base64
    import json
    import subprocess
    import sys

    ask = {"spec": spec, "name": name, "source": base64.b64encode(source).decode("ascii"), "path": path,
           "expected": expected}
    env = {k: v for k, v in os.environ.items() if k != "PATCHKIT_RUN"}  # the rebuilding process is not patched
    done = subprocess.run([sys.executable, "-m", "patchkit.hook.rebuild"], input=json.dumps(ask).encode("utf-8"),
                          capture_output=True, env=env, timeout=300)
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(f"rebuilding its patched text failed: {lines[-1] if lines else done.returncode}")
    return done.stdout.decode("utf-8")


def write(path: str, text: str) -> None:
    """Atomically: a reader never sees half a file, and two processes writing the same entry both succeed."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)  # inside the private state folder (patchkit.core.private)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".py")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
