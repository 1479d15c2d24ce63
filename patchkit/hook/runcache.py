"""The run cache of `patchkit run`: each patched module's text, by the sha256 of its source and the recipe's key.

``$PATCHKIT_HOME/run-cache/<source sha256>-<recipe key>.py``, written
atomically by `patchkit run` (or, on a node without it, by the first process
that imports the module: :func:`rebuild`, in a process of its own) and read by every later process.
It is written only into a state folder opened as
:func:`patchkit.core.private.open_state` opens it (yours, reached through no
link another user controls); a job whose state folder is refused uses the
text it rebuilt without storing it, and says so once.
An entry is data, not trusted code: the import hook executes it only when
its sha256 is the one the planning process recorded (:func:`text_sha256`).

Standard library only: the engine runs in :mod:`patchkit.hook.rebuild`'s process, never in the job's.
"""

from __future__ import annotations

import hashlib
import os
import stat
from typing import Any, Dict, List, Optional, Tuple

CACHE = "run-cache"
MAX_BYTES = 64 * 1024 * 1024  # a patched module is a few hundred KiB at most; anything far larger is not ours
NOTE = "patchkit-rebuild: "  # how the rebuilding process marks a line of its stderr for the job to say


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


def rebuild(spec: Dict[str, Any], name: str, source: bytes, path: str,
            expected: Optional[str] = None) -> Tuple[str, List[str]]:
    """The patched text of module ``name``, made by ``python -m patchkit.hook.rebuild`` in a process of its own
    (which stores it at ``path`` when its sha256 is ``expected``): the engine never loads in the job's process.
    With it, what that process had to say (that the text could not be stored, say), one line each."""
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
        lines = done.stderr.decode("utf-8", "replace").strip().split("\n")  # "\n" only: a module's U+2028 ends no line
        raise RuntimeError(f"rebuilding its patched text failed: {lines[-1] or done.returncode}")
    notes = [ln for ln in done.stderr.decode("utf-8", "replace").split("\n") if ln.startswith(NOTE)]
    return done.stdout.decode("utf-8"), [ln[len(NOTE):] for ln in notes]



def write(path: str, text: str) -> None:
    """The entry ``path`` (in :func:`cache_dir`) written whole (0600): a reader never sees half a file, and two
    processes writing the same entry both succeed.  A refused state folder (another user's) raises
    :class:`patchkit.core.private.NotPrivate`; a full disk, say, a located error: nothing of the entry is left."""
    from patchkit.core import private  # standard library only

    if os.path.dirname(os.path.abspath(path)) != os.path.abspath(cache_dir()):
        raise ValueError(f"{path} is not an entry of the run cache {cache_dir()}")
    with private.open_state(CACHE, create=True) as folder:
        private.write(folder, os.path.basename(path), text.encode("utf-8"))
