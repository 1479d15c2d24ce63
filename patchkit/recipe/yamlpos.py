"""Load YAML into plain values while remembering where every key and value sits.

``load(text, path)`` returns ``(value, marks)``: ``marks`` maps a path of keys
and indexes, such as ``("points", 0, "at")``, to the 1-based ``(line, col)``
of that value in the file; ``("points", 0, "at", KEY)`` gives the key itself.

What a recipe can hold is bounded, each bound with its own error: the
document's size (:data:`MAX_CHARS`), how far aliases expand it
(:data:`_Converter.LIMIT`), and numbers (whole numbers of at most
:data:`MAX_DIGITS` digits, finite floats), so that no value reaches Python's
int/str conversion limit or a comparison with ``nan``.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Tuple

import yaml

from patchkit.core.errors import Location, RecipeError

KEY = object()  # suffix in a mark path: the position of the key, not the value
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when the wheel has it: 20 times faster
STR = "tag:yaml.org,2002:str"  # most scalars: taken as they are, without PyYAML's constructor machinery
INT = "tag:yaml.org,2002:int"
MAX_DIGITS = 18  # whole numbers: steps, counts and ranks; 10**18 steps is far beyond any job
MAX_CHARS = 2 * 1024 * 1024  # a recipe is a few KiB; its examples may hold whole target files

DEEP = "a recipe needs only a few levels of nesting; see the recipe format in README.md"

Marks = Dict[Tuple[Any, ...], Tuple[int, int]]


def _pos(node: yaml.Node) -> Tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def shorten(text: str, keep: int = 60) -> str:
    """``text`` as it is when short, else its start, ``...`` and its end (for messages: a 100k name is not echoed)."""
    if len(text) <= keep:
        return text
    head = (keep - 3) * 2 // 3
    return f"{text[:head]}...{text[len(text) - (keep - 3 - head):]}"


def load(text: str, path: str) -> Tuple[Any, Marks]:
    if len(text) > MAX_CHARS:
        raise RecipeError(f"the document is too large ({len(text)} characters; at most {MAX_CHARS})", Location(path),
                          "a recipe is a few KiB of YAML; split a very large one into several recipes")
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
        if "nesting depth" in problem:  # libyaml's own bound (1000 levels)
            raise RecipeError("the YAML document is nested too deeply", where, DEEP) from None
        raise RecipeError(f"YAML syntax error: {problem}", where,
                          "fix the YAML syntax at that place (indentation, quotes, colons)") from None
    except RecursionError:  # PyYAML's scanner and composer recurse once per nesting level
        raise RecipeError("the YAML document is nested too deeply", Location(path), DEEP) from None
    except yaml.YAMLError as exc:  # e.g. a reader error on control characters
        raise RecipeError(f"not a YAML document: {exc}", Location(path),
                          "a recipe is a UTF-8 YAML mapping; see the recipe format in README.md") from None
    return value, marks


class _Converter:
    """Plain values from a node tree; aliases that loop or blow up are errors, not hangs.

    Only what aliases add is counted: a node converted a second time (and
    everything under it) is an alias's copy.  The nodes written out in the
    document are bounded by its size (:data:`MAX_CHARS`), checked before.
    """

    LIMIT = 100_000  # values copied by aliases: far beyond any recipe, far below a "billion laughs" expansion

    def __init__(self, loader: "yaml.SafeLoader", marks: Marks, path: str):
        self.loader, self.marks, self.path = loader, marks, path
        self.stack: set = set()
        self.seen: set = set()
        self.copies = 0

    def fail(self, node: yaml.Node, message: str, hint: str) -> RecipeError:
        line, col = _pos(node)
        return RecipeError(message, Location(self.path, line, col), hint)

    def convert(self, node: yaml.Node, here: Tuple[Any, ...]) -> Any:
        if id(node) in self.seen:
            self.copies += 1
            if self.copies > self.LIMIT:
                raise self.fail(node, f"aliases expand the document too far (more than {self.LIMIT} copied values)",
                                "write the recipe out plainly; anchors and aliases are not needed")
        else:
            self.seen.add(id(node))  # the node tree lives until the end: ids stay unique
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
        if node.tag == STR:
            return node.value
        shown = shorten(node.value, 30)
        try:
            value = self.loader.construct_object(node, deep=True)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # int() past its digit limit, a date like 2001-13-40, !!float abc
            if node.tag == INT and node.value.lstrip("+-").replace("_", "").isdigit():
                value = None  # more digits than int() converts: too large, said below
            else:
                why = f": {exc}" if isinstance(exc, ValueError) else ""
                raise self.fail(node, f"cannot read {shown!r} as !!{node.tag.rsplit(':', 1)[-1]}{why}",
                                "quote it to make it a string, or write a plain value") from None
        if node.tag == INT and (value is None or abs(value) >= 10 ** MAX_DIGITS):
            size = f" ({len(node.value)} characters)" if shown != node.value else ""
            raise self.fail(node, f"the whole number {shown}{size} is too large: patchkit reads whole numbers "
                            f"of at most {MAX_DIGITS} digits", "write a smaller number (steps, counts and ranks)")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(node, f"{shown!r} is not a finite number",
                            "write a finite number, or quote it to make it a string")
        return value
