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
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when the wheel has it: 20 times faster
STR = "tag:yaml.org,2002:str"  # most scalars: taken as they are, without PyYAML's constructor machinery

Marks = Dict[Tuple[Any, ...], Tuple[int, int]]


def _pos(node: yaml.Node) -> Tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def load(text: str, path: str) -> Tuple[Any, Marks]:
    try:
        loader = LOADER(text)
        try:
            node = loader.get_single_node()
            marks: Marks = {}
            value = _Converter(loader, marks, path).convert(node, ()) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = Location(path, mark.line + 1, mark.column + 1) if mark else Location(path)
        problem = exc.problem or exc.context or "invalid YAML"
        raise RecipeError(f"YAML syntax error: {problem}", where,
                          "fix the YAML syntax at that place (indentation, quotes, colons)") from None
    except RecursionError:  # PyYAML's scanner and composer recurse once per nesting level
        raise RecipeError("the YAML document is nested too deeply", Location(path),
                          "a recipe needs only a few levels of nesting; see the recipe format in README.md") from None
    except yaml.YAMLError as exc:  # e.g. a reader error on control characters
        raise RecipeError(f"not a YAML document: {exc}", Location(path),
                          "a recipe is a UTF-8 YAML mapping; see the recipe format in README.md") from None
    return value, marks


class _Converter:
    """Plain values from a node tree; aliases that loop or blow up are errors, not hangs."""

    LIMIT = 100_000  # nodes: far beyond any recipe, far below a "billion laughs" expansion

    def __init__(self, loader: "yaml.SafeLoader", marks: Marks, path: str):
        self.loader, self.marks, self.path = loader, marks, path
        self.stack: set = set()
        self.count = 0

    def fail(self, node: yaml.Node, message: str, hint: str) -> RecipeError:
        line, col = _pos(node)
        return RecipeError(message, Location(self.path, line, col), hint)

    def convert(self, node: yaml.Node, here: Tuple[Any, ...]) -> Any:
        self.count += 1
        if self.count > self.LIMIT:
            raise self.fail(node, "the document is too large (aliases expand too far)",
                            "write the recipe out plainly; anchors and aliases are not needed")
        if id(node) in self.stack:
            raise self.fail(node, "a YAML alias refers to itself", "remove the self-referencing anchor")
        self.marks[here] = _pos(node)
        if isinstance(node, yaml.MappingNode):
            self.stack.add(id(node))
            out: Dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise self.fail(key_node, "a mapping key must be a plain name",
                                    "write keys as plain words, e.g. `wait: 1`")
                key = self.scalar(key_node)
                if key in out:
                    raise self.fail(key_node, f"duplicate key {key!r}", "remove one of the two entries")
                self.marks[here + (key, KEY)] = _pos(key_node)
                out[key] = self.convert(value_node, here + (key,))
            self.stack.discard(id(node))
            return out
        if isinstance(node, yaml.SequenceNode):
            self.stack.add(id(node))
            items = [self.convert(item, here + (i,)) for i, item in enumerate(node.value)]
            self.stack.discard(id(node))
            return items
        return self.scalar(node)

    def scalar(self, node: yaml.Node) -> Any:
        return node.value if node.tag == STR else self.loader.construct_object(node, deep=True)
