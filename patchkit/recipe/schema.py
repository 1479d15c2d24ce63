"""recipe.schema.json's vocabulary, made from the table and the registries.

The schema's structure (keys, patterns, descriptions) is written by hand in
``patchkit/recipe.schema.json``.  The parts that name the vocabulary are made
here, so the schema cannot fall behind the loader:

* ``backend``: the backends registered in :mod:`patchkit.runtime.backends`;
* ``profiler`` and ``schedule``: one property per row of
  :mod:`patchkit.core.vocabulary`, with its type, allowed words, minimum, default
  and help;
* a point's ``at`` and ``action``: the kinds found in ``patchkit/recipe/kinds/`` (each with its summary) and
  ``vocabulary.ACTIONS``.

After changing any of those, rewrite the shipped file with::

    python -m patchkit.recipe.schema

tests/test_schema.py fails while the shipped file differs from what this makes of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional

from patchkit.runtime import backends
from patchkit.core import spellings
from patchkit.core import vocabulary as v
from patchkit.recipe.kinds import KINDS

PATH = Path(__file__).with_name("recipe.schema.json")


def setting(s: v.Setting) -> Dict[str, Any]:
    """The JSON Schema of one profiler or schedule key, as a recipe writes it (torch_npu's spellings too)."""
    words = list(s.values) + [w for w in spellings.VALUES.get(s.name, {}) if w not in s.values]
    if s.kind == v.WORD:
        out: Dict[str, Any] = {"enum": words}
    elif s.kind == v.WORDS:  # a list, or a single word
        word = {"enum": words}
        out = {"oneOf": [word, {"type": "array", "minItems": 1 if s.default else 0, "items": word}]}
    elif s.kind == v.THRESHOLD:
        out = {"oneOf": [{"type": "number", "minimum": 0}, {"type": "null"}, {"const": "none"}]}
    elif s.kind == v.FLAG:
        out = {"type": "boolean"}
    elif s.kind == v.COUNT:
        out = {"type": "integer", "minimum": s.minimum}
    elif s.kind == v.PATH:
        out = {"type": "string", "minLength": 1}
    elif s.kind == v.RANKS:  # all, one rank, or a list of them
        rank = {"type": "integer", "minimum": 0}
        out = {"oneOf": [{"const": "all"}, rank, {"type": "array", "minItems": 1, "items": rank}]}
    elif s.kind == v.STEPS:  # one step, or a list of them
        step = {"type": "integer", "minimum": 0}
        out = {"oneOf": [step, {"type": "array", "items": step}]}
    else:
        raise ValueError(f"{s.key}: no schema for the kind {s.kind!r}")
    if s.kind != v.PATH:  # a recipe's save_path defaults to a folder named after it (said in the help)
        out["default"] = list(s.default) if isinstance(s.default, tuple) else s.default
    if s.help:
        out["description"] = s.help
    return out


def fill(schema: Dict[str, Any]) -> Dict[str, Any]:
    """``schema`` with its vocabulary parts made from the table and the registries (changed in place)."""
    props = schema["properties"]
    props["backend"] = {"enum": list(backends.names()), "default": backends.DEFAULT,
                        "description": "the profiler backend: a name registered in patchkit.runtime.backends"}
    for section in v.SECTIONS:
        props[section] = {
            "type": "object",
            "additionalProperties": False,
            "properties": {s.name: setting(s) for s in v.SETTINGS if s.section == section},
        }
    profiler = props["profiler"]["properties"]
    named = dict(profiler)
    for k in spellings.KEYS:  # other tools' names: the same value under a rename, else a flag
        text = f"{k.tool}'s name: " + (f"profiler.{k.key}" if k.does == spellings.RENAME else
                                       f"true puts {k.word} in profiler.{k.key}" if k.does == spellings.MEMBER else
                                       f"true is profiler.{k.key}: all" if k.does == spellings.ALL else f"true only: {k.why}")
        like = {key: value for key, value in named[k.key].items() if key != "default"} \
            if k.does == spellings.RENAME else {"const": True} if k.does == spellings.ALWAYS else {"type": "boolean"}
        profiler[k.spelling] = {**like, "description": text}
    inner: Dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": dict(profiler)}
    for level in reversed(spellings.NESTED):  # verl: profiler.tool_config.npu.KEY
        inner = {"type": "object", "additionalProperties": False, "properties": {level: inner}}
    profiler[spellings.NESTED[0]] = {**inner["properties"][spellings.NESTED[0]],
                                     "description": "verl's block: its keys read as profiler's own"}
    point = schema["$defs"]["point"]["properties"]
    point["at"] = {"enum": list(KINDS), "description": "where the line goes: "
                   + "; ".join(f"{kind.name}, {kind.summary}" for kind in KINDS.values())}
    point["action"] = {"enum": list(v.ACTIONS), "default": v.DEFAULT_ACTION}
    return schema


def text(shipped: Optional[str] = None) -> str:
    """The schema file as it should be: the shipped one (or ``shipped``) with its vocabulary parts made afresh."""
    schema = json.loads(PATH.read_text(encoding="utf-8") if shipped is None else shipped)
    return json.dumps(fill(schema), indent=2) + "\n"


if __name__ == "__main__":  # python -m patchkit.recipe.schema: rewrite the shipped file
    PATH.write_text(text(), encoding="utf-8")
