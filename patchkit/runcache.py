"""The run cache of `patchkit run`: each patched module's text, by the sha256 of its source and the recipe's key.

``$PATCHKIT_HOME/run-cache/<source sha256>-<recipe key>.py``, written
atomically by `patchkit run` (or, on a node without it, by the first process
that imports the module: :func:`rebuild`) and read by every later process.

Standard library only, but :func:`rebuild`, which imports the engine.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Dict

CACHE = "run-cache"


def cache_dir() -> str:
    from .manifest import home  # standard library only

    return os.path.join(home(), CACHE)


def cache_name(sha: str, key: str) -> str:
    return f"{sha}-{key}.py"


def rebuild(spec: Dict[str, Any], name: str, source: bytes, path: str) -> str:
    """The patched text of module ``name`` from its ``source``, made with the engine and stored at ``path``."""
    from .engine import transform
    from .model import Applied
    from .marks import decode
    from .recipe import parse_recipe
    from .yamlpos import load

    data, marks = load(spec["recipe"], spec["path"])
    settings = parse_recipe(data, marks, spec["path"], spec["overrides"])
    points = settings.active_points()
    text, _encoding = decode(source, Path(path))
    result = transform(text, settings, [points[i] for i in spec["modules"][name]["points"]], path)
    if not isinstance(result, Applied):
        raise RuntimeError(f"the recipe does not apply to {name} here: {getattr(result, 'reason', 'already applied')}")
    write(path, result.text)
    return result.text


def write(path: str, text: str) -> None:
    """Atomically: a reader never sees half a file, and two processes writing the same entry both succeed."""
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".py")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
