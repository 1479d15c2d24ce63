"""The built-in recipes at a glance: what each targets, read without validating them.

``list`` and ``status`` only need each built-in recipe's id, description and
target; loading every recipe in full (positions for error messages, points,
guards, examples) costs several times more.  The built-in recipes are
validated by the test suite and by every command that uses one, so here
their YAML is read as plain data.
"""

from __future__ import annotations

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

    from .recipe import builtin_dir

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
