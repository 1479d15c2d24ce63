"""Load YAML into plain values while remembering where every key and value sits.

``load(text, path)`` returns ``(value, marks)``: ``marks`` maps a path of keys
and indexes, such as ``("points", 0, "at")``, to the 1-based ``(line, col)``
of that value in the file; ``("points", 0, "at", KEY)`` gives the key itself.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

import yaml

from .errors import Location, RecipeError

KEY = object()  # suffix in a mark path: the position of the key, not the value

Marks = Dict[Tuple[Any, ...], Tuple[int, int]]


def _pos(node: yaml.Node) -> Tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def load(text: str, path: str) -> Tuple[Any, Marks]:
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            marks: Marks = {}
            value = _convert(loader, node, (), marks, path) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = Location(path, mark.line + 1, mark.column + 1) if mark else Location(path)
        problem = exc.problem or exc.context or "invalid YAML"
        raise RecipeError(f"YAML syntax error: {problem}", where,
                          "fix the YAML syntax at that place (indentation, quotes, colons)") from None
    except yaml.YAMLError as exc:  # e.g. a reader error on control characters
        raise RecipeError(f"not a YAML document: {exc}", Location(path),
                          "a recipe is a UTF-8 YAML mapping; see the recipe format in README.md") from None
    return value, marks


def _convert(loader: yaml.SafeLoader, node: yaml.Node, here: Tuple[Any, ...], marks: Marks, path: str) -> Any:
    marks[here] = _pos(node)
    if isinstance(node, yaml.MappingNode):
        out: Dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                line, col = _pos(key_node)
                raise RecipeError("a mapping key must be a plain name", Location(path, line, col),
                                  "write keys as plain words, e.g. `wait: 1`")
            key = loader.construct_object(key_node, deep=True)
            if key in out:
                line, col = _pos(key_node)
                raise RecipeError(f"duplicate key {key!r}", Location(path, line, col),
                                  "remove one of the two entries")
            marks[here + (key, KEY)] = _pos(key_node)
            out[key] = _convert(loader, value_node, here + (key,), marks, path)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(loader, item, here + (i,), marks, path) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)
