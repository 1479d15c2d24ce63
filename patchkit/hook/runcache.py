"""The run cache of `patchkit run`: each patched module's text, by the sha256 of its source and the recipe's key.

``$PATCHKIT_HOME/run-cache/<source sha256>-<recipe key>.py``, written
atomically by `patchkit run` (or, on a node without it, by the first process
that imports the module: :func:`rebuild`) and read by every later process.
An entry is data, not trusted code: the import hook executes it only when
its sha256 is the one the planning process recorded (:func:`text_sha256`).

Standard library only, but :func:`rebuild`, which imports the engine.
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
    from patchkit.runtime.manifest import home  # standard library only

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
    """The patched text of module ``name`` from its ``source``, made with the engine and stored at ``path``.

    With ``expected`` (the sha256 the planning process recorded), a text that is not that one is returned
    but not stored: the caller refuses it, and no later process reads it from the cache.
    """
    from patchkit.engine.codemod import transform
    from patchkit.core.model import Applied
    from patchkit.engine.marks import decode
    from patchkit.recipe.load import parse_recipe
    from patchkit.recipe.yamlpos import load

    data, marks = load(spec["recipe"], spec["path"])
    settings = parse_recipe(data, marks, spec["path"], spec["overrides"])
    points = settings.active_points()
    text, _encoding = decode(source, Path(path))
    result = transform(text, settings, [points[i] for i in spec["modules"][name]["points"]], path)
    if not isinstance(result, Applied):
        raise RuntimeError(f"the recipe does not apply to {name} here: {getattr(result, 'reason', 'already applied')}")
    if expected is None or text_sha256(result.text) == expected:
        write(path, result.text)
    return result.text


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
