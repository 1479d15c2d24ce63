"""The built-in recipes at a glance: what each targets, read without validating them.

``list`` and ``status`` only need each built-in recipe's id, description and
target; loading every recipe in full (positions for error messages, points,
guards, examples) costs several times more.  The built-in recipes are
validated by the test suite and by every command that uses one, so here
their YAML is read as plain data.
"""

from __future__ import annotations

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
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out = []
    for path in sorted(builtin_dir().glob("*.yaml")):
        data = yaml.load(path.read_text(encoding="utf-8-sig"), Loader=loader)
        target = data["target"]
        files = list(target["files"])
        for point in data["points"]:
            files += [f for f in point.get("files", ()) if f not in files]
        out.append(Entry(path.stem, str(data["description"]).strip(), target["package"],
                         target.get("distribution", target["package"]), target.get("versions", ""), tuple(files)))
    return out


def builtin_dir() -> Path:
    """The shipped recipes; in a source checkout, the top-level recipes/ folder."""
    try:
        import patchkit.recipes
    except ImportError:
        return Path(__file__).resolve().parent.parent / "recipes"
    return Path(patchkit.recipes.__file__).parent


def builtin_ids() -> List[str]:
    return sorted(p.stem for p in builtin_dir().glob("*.yaml"))
