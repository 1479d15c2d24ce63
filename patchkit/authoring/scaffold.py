"""The text of a new recipe file (``patchkit new``): the layout of a recipe, with comments that say where each
value came from.  It writes text only; :mod:`patchkit.authoring.newrecipe` gathers the values and checks the result
with the recipe loader before anything is written.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Sequence, Tuple

import yaml

from patchkit.authoring.spec import flow

SCHEMA = "# yaml-language-server: $schema=https://patchkit.invalid/recipe.schema.json"


class Draft(NamedTuple):
    id: str
    description: str
    package: str
    distribution: str
    versions: str
    versions_note: str  # the comment beside target.versions
    files: Tuple[str, ...]
    backend: str
    profiler: Dict[str, Any]
    schedule: Dict[str, Any]
    points: Tuple[Dict[str, Any], ...]  # each as a recipe writes it, scope keys first
    notes: Tuple[str, ...] = ()
    examples: Tuple[Tuple[str, str, str], ...] = ()  # (name, before, after)
    origin: str = ""  # the first comment line: what the file was written from
    script: str = ""  # a script target: its path from the recipe's folder (or absolute); no package, no versions


class _Literal(yaml.SafeDumper):
    """Text with line breaks as ``|`` blocks (PyYAML quotes it instead where a block cannot hold it)."""


def _text(dumper: yaml.SafeDumper, value: str):
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Literal.add_representer(str, _text)


def _scalar(value: Any) -> str:
    return yaml.dump(value, Dumper=_Literal, default_flow_style=True, width=1 << 20).rstrip("\n").removesuffix("\n...")


def render(draft: Draft) -> Tuple[str, List[int]]:
    """The recipe's text, and the line (1-based) where each point starts."""
    out = [f"# {draft.origin}" if draft.origin else "# A recipe written by `patchkit new`.",
           "# Check it with `patchkit test ./FILE` and `patchkit diff ./FILE`; the format: docs/recipes.md.",
           f"id: {draft.id}",
           "description: >",
           *_folded(draft.description),
           "target:",
           *(_script(draft) if draft.script else _package(draft)),
           f"backend: {draft.backend}",
           "profiler:"]
    out += [f"  {k}: {_value_of(v)}" for k, v in draft.profiler.items()]
    out.append("schedule: {" + ", ".join(f"{k}: {_value_of(v)}" for k, v in draft.schedule.items()) + "}")
    out.append("points:")
    starts = []
    for point in draft.points:
        starts.append(len(out) + 1)
        first = True
        for key, value in point.items():
            out.append(f"  {'- ' if first else '  '}{key}: {_value_of(value)}")
            first = False
    if draft.notes:
        out.append("notes:")
        out += [f"  - {_scalar(n)}" for n in draft.notes]
    if draft.examples:
        out.append("examples:")
        for name, before, after in draft.examples:
            out.append(f"  - name: {_scalar(name)}")
            out += _block("before", before) + _block("after", after)
    return "\n".join(out) + "\n", starts


def _package(draft: Draft) -> List[str]:
    return [f"  package: {draft.package}",
            f"  distribution: {draft.distribution}",
            f"  versions: {_scalar(draft.versions)}  # {draft.versions_note}" if draft.versions else
            f"  # {draft.versions_note}",
            "  files:",
            *[f"    - {_scalar(f)}" for f in draft.files]]


def _script(draft: Draft) -> List[str]:
    return [f"  script: {_scalar(draft.script)}  # the job's script: its code runs as __main__; a relative path is "
            "taken from this file's folder, or from --root DIR"]


def _value_of(value: Any) -> str:
    if isinstance(value, str) and not value:
        return '""'
    return flow(value)


def _folded(text: str) -> List[str]:
    import textwrap

    return ["  " + line for line in textwrap.wrap(text, 100)] or ['  ""']


def _block(key: str, text: str) -> List[str]:
    dumped = yaml.dump({key: text}, Dumper=_Literal, width=1 << 20, sort_keys=False).rstrip("\n")
    return ["    " + line if line else "" for line in dumped.split("\n")]


def described(points: Sequence[Dict[str, Any]]) -> List[str]:
    from patchkit.authoring.spec import spell

    return [spell(p) for p in points]
