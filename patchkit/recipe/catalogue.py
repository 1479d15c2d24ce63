"""The built-in recipes at a glance: what each targets, read without validating them.

``list`` and ``status`` only need each built-in recipe's id, description and
target; loading every recipe in full (positions for error messages, points,
guards, examples) costs several times more.  The built-in recipes are
validated by the test suite and by every command that uses one, so here
their YAML is read as plain data, and what it gives is kept in
``$PATCHKIT_HOME/catalogue.json``, keyed by the recipe files' names, sizes and
modification times: a later command reads that instead of parsing YAML.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, NamedTuple, Optional, Tuple

from patchkit.core.errors import LedgerError

CACHE_LIMIT = 4 * 1024 * 1024  # bytes; the cache of the built-in recipes is a few kB


class Entry(NamedTuple):
    id: str
    description: str
    package: str
    distribution: str
    versions: str
    files: Tuple[str, ...]  # the target's candidates, then the points' own


def entries() -> List[Entry]:
    import json  # here and in _kept, not at the top: a recipe read in full (validate, show) needs only builtin_ids

    from patchkit.core import private

    paths = sorted(builtin_dir().glob("*.yaml"))
    key = [[p.name, *_stamp(p)] for p in paths]
    cache = _cache_path()
    kept = _kept(cache, key)
    if kept is not None:
        return kept
    out = [_read(p) for p in paths]
    try:
        with private.open_state(base=str(cache.parent), create=True) as folder:
            private.write(folder, cache.name, json.dumps({"key": key, "entries": [list(e) for e in out]}).encode())
    except LedgerError:
        pass  # a full, read-only or refused home: the next command reads the recipes again
    return out


def _kept(cache: Path, key: list) -> Optional[List[Entry]]:
    """The cached entries when the cache is private (see :mod:`patchkit.core.private`) and of these recipe files."""
    import json

    from patchkit.core import private

    try:
        folder = private.open_state(base=str(cache.parent))
        if folder is None:
            return None
        with folder:
            kept = json.loads(private.read(folder, cache.name, CACHE_LIMIT) or b"null")
        if kept.get("key") != key:
            return None
        out = [Entry(*map(str, e[:5]), tuple(map(str, e[5]))) for e in kept["entries"]]
    except (LedgerError, ValueError, TypeError, KeyError, AttributeError, IndexError):
        return None  # none yet, not ours, or damaged: read the recipes
    inside = all(not os.path.isabs(f) and ".." not in Path(f).parts for e in out for f in e.files)
    return out if inside else None


def _read(path: Path) -> Entry:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(path.read_text(encoding="utf-8-sig"), Loader=loader)
    target = data["target"]
    files = list(target["files"])
    for point in data["points"]:
        files += [f for f in point.get("files", ()) if f not in files]
    return Entry(path.stem, str(data["description"]).strip(), target["package"],
                 target.get("distribution", target["package"]), target.get("versions", ""), tuple(files))


def _stamp(path: Path) -> Tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _cache_path() -> Path:
    from patchkit.core.private import home  # not through patchkit.core.manifest, which imports socket for the job

    return Path(home()) / "catalogue.json"


def builtin_dir() -> Path:
    """The shipped recipes; in a source checkout, the top-level recipes/ folder."""
    try:
        import patchkit.recipes
    except ImportError:
        return Path(__file__).resolve().parents[2] / "recipes"
    return Path(patchkit.recipes.__file__).parent


def builtin_ids() -> List[str]:
    return sorted(p.stem for p in builtin_dir().glob("*.yaml"))
