"""A point written on one line, as ``patchkit points`` prints it and ``patchkit new --point`` reads it.

The line is the point's recipe keys in the order a recipe writes them, each
``key: value``, separated by spaces; a value is YAML (a flow mapping for
``loop:``)::

    at: before_loop loop: {iter: micro_batches} action: start
    at: after_call call: self._optimizer_step
    at: around_call call: self.model_runner.execute_model action: range name: execute_model

:func:`spell` writes a point's mapping so; :func:`parse` reads it back (the
keys are those of :data:`patchkit.recipe.points.POINT_KEYS` that say where a
line goes and what it does: not ``class:``/``method:``/``function:``, which
come from the target).  ``loop: NAME`` is read as ``loop: {iter: NAME}``.
The mapping is checked by the recipe loader like any point of a recipe file.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

import yaml

from patchkit.core.errors import RecipeError
from patchkit.recipe.points import flow  # noqa: F401  (a value as a one-line point writes it)

# The keys a one-line point takes, in the order a recipe writes them (scope keys come from the target).
KEYS = ("nested", "at", "call", "loop", "action", "name", "count", "when", "guard", "reason")
LOOP_ORDER = ("iter", "target", "calls", "while")


def spell(point: Dict[str, Any]) -> str:
    """``at: loop_end loop: {iter: micro_batches}``: the keys of ``point`` a one-line point takes, in order."""
    out = []
    for key in KEYS:
        if key not in point:
            continue
        value = point[key]
        if key == "loop" and isinstance(value, dict):
            value = {k: value[k] for k in LOOP_ORDER if k in value}
        out.append(f"{key}: {flow(value)}")
    return " ".join(out)


HINT = ("write the point as `patchkit points` prints it, e.g. `at: loop_end loop: {iter: micro_batches}` (keys: "
        + ", ".join(KEYS) + ")")
_KEY = re.compile(r"(?:^|\s)(" + "|".join(KEYS) + r"):(?=\s|$)")


def _split(text: str) -> List[Tuple[str, str, int]]:
    """``(key, value text, column)`` for each ``key:`` outside brackets and quotes."""
    found, depth, quote = [], 0, ""
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote and text[i - 1] != "\\" else quote
            continue
        if ch in "\"'" and (i == 0 or text[i - 1] in " :{[,"):
            quote = ch
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif depth == 0 and (i == 0 or text[i - 1].isspace()):
            m = _KEY.match(text, i - 1 if i else 0)
            if m and m.start(1) == i:
                found.append((m.group(1), m.end(), i))
    if not found or text[:found[0][2]].strip():
        head = text[:found[0][2]].strip() if found else text.strip()
        raise RecipeError(f"cannot read the point {text!r}: {head!r} is not `key: value`", hint=HINT)
    return [(key, text[start:(found[k + 1][2] if k + 1 < len(found) else len(text))].strip(), col)
            for k, (key, start, col) in enumerate(found)]


def _quoted(raw: str) -> str:
    """``"a b"`` -> ``a b``; anything else as written (``'x' in self.modes`` is a guard, not a YAML string)."""
    if len(raw) < 2 or raw[0] not in "\"'" or raw[-1] != raw[0]:
        return raw
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw
    return value if isinstance(value, str) else raw


def parse(text: str) -> Dict[str, Any]:
    """The point mapping of a one-line point (``at: ... key: value ...``); unchecked beyond its YAML."""
    point: Dict[str, Any] = {}
    for key, raw, _col in _split(text):
        if key in point:
            raise RecipeError(f"the point {text!r} gives `{key}:` twice", hint=HINT)
        if not raw:
            raise RecipeError(f"the point {text!r} gives no value for `{key}:`", hint=HINT)
        if key in ("guard", "reason", "name", "call"):  # text as written, unless it is one quoted string
            value: Any = _quoted(raw)
        else:
            try:
                value = yaml.safe_load(raw)
            except yaml.YAMLError:
                raise RecipeError(f"the value of `{key}:` in the point {text!r} is not YAML: {raw!r}",
                                  hint=HINT) from None
        if key == "loop" and isinstance(value, str):
            value = {"iter": value}
        point[key] = value
    return point
