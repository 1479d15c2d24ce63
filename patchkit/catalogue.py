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

import json
import os
from pathlib import Path
from typing import List, NamedTuple, Tuple


class Entry(NamedTuple):
    id: str
    description: str
    package: str
    distribution: str
    versions: str
    files: Tuple[str, ...]  # the target's candidates, then the points' own


def entries() -> List[Entry]:
    paths = sorted(builtin_dir().glob("*.yaml"))
    key = [[p.name, *_stamp(p)] for p in paths]
    cache = _cache_path()
    try:
        with open(cache, encoding="utf-8") as handle:
            kept = json.load(handle)
        if kept.get("key") == key:
            return [Entry(*e[:5], tuple(e[5])) for e in kept["entries"]]
    except (OSError, ValueError, TypeError, KeyError):
        pass  # none yet, or not ours: read the recipes
    out = [_read(p) for p in paths]
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"key": key, "entries": [list(e) for e in out]}), encoding="utf-8")
        os.replace(tmp, cache)
    except OSError:
        pass  # a read-only home: the next command reads the recipes again
    return out


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
    from .manifest import home  # standard library only

    return Path(home()) / "catalogue.json"


def builtin_dir() -> Path:
    """The shipped recipes; in a source checkout, the top-level recipes/ folder."""
    try:
        import patchkit.recipes
    except ImportError:
        return Path(__file__).resolve().parent.parent / "recipes"
    return Path(patchkit.recipes.__file__).parent


def builtin_ids() -> List[str]:
    return sorted(p.stem for p in builtin_dir().glob("*.yaml"))
