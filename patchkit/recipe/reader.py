"""Typed access to a recipe's YAML data, and the checks of names, with errors at the right line.

Names are bounded (:data:`MAX_NAME`) before they are checked or shown; guards
and roles are checked by :mod:`patchkit.recipe.guards`.
"""

from __future__ import annotations

import keyword
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from patchkit.core.errors import Location, OverrideError, RecipeError
from patchkit.recipe.guards import ALLOWED, check_expression, uncertain_chains
from patchkit.recipe.yamlpos import KEY, Marks, shorten

_ID_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_ID_CHARS = _ID_FIRST | frozenset("._-")
MAX_NAME = 200  # ids, packages, classes, calls: far beyond real names, well under a file name's 255 bytes
MAX_MESSAGE = 600  # an error's message, values quoted in it included


def is_identifier(name: Any) -> bool:
    return isinstance(name, str) and len(name) <= MAX_NAME and name.isidentifier() and not keyword.iskeyword(name)


def is_recipe_id(name: str) -> bool:
    """Lower-case letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit; at most 200 of them."""
    return bool(name) and len(name) <= MAX_NAME and name[0] in _ID_FIRST and _ID_CHARS.issuperset(name)


def is_dotted(name: Any) -> bool:
    """``a.b.c``: ASCII identifiers, no keywords, joined by dots; at most 200 characters."""
    return isinstance(name, str) and len(name) <= MAX_NAME and all(
        part.isascii() and part.isidentifier() and not keyword.iskeyword(part) for part in name.split(".")
    )


def check_length(r: "Reader", here: Tuple[Any, ...], name: Any, what: str, key: bool = False) -> None:
    """A name longer than :data:`MAX_NAME` is refused before anything shows it or makes a path of it."""
    if isinstance(name, str) and len(name) > MAX_NAME:
        raise r.fail(here, f"{what} {shorten(name, 40)!r} is {len(name)} characters long; "
                     f"a name has at most {MAX_NAME}",
                     "write the real name (the one in the source or on PyPI)", key=key)


class Reader:
    """Typed access to the YAML data (overrides applied), raising errors at the right line."""

    def __init__(self, data: Any, marks: Marks, path: str, overridden: Mapping[Tuple[Any, ...], str]):
        self.data, self.marks, self.path, self.overridden = data, marks, path, overridden
        self.warnings: List[str] = []  # what `validate` says of a recipe that loads: "PATH:LINE:COL: message"

    def where(self, here: Tuple[Any, ...], key: bool = False) -> Location:
        probe = here + (KEY,) if key else here
        while probe and probe not in self.marks:
            probe = probe[:-1]
        line, col = self.marks.get(probe, (None, None))
        return Location(self.path, line, col)

    def fail(self, here: Tuple[Any, ...], message: str, hint: str, key: bool = False) -> RecipeError:
        message = shorten(message, MAX_MESSAGE)  # a value echoed in it may be a 100k string or list
        for n in range(len(here), 0, -1):
            if here[:n] in self.overridden:
                typed = shorten(self.overridden[here[:n]])
                return OverrideError(f"{typed}: {message}", Location("<command line>"), hint)
        return RecipeError(message, self.where(here, key), hint)

    def get(self, here: Tuple[Any, ...]) -> Any:
        value = self.data
        for part in here:
            value = value[part]
        return value

    def mapping(self, here: Tuple[Any, ...], allowed: Iterable[str], required: Iterable[str] = ()) -> Dict[str, Any]:
        value = self.get(here)
        name = ".".join(map(str, here)) or "the recipe"
        if not isinstance(value, dict):
            raise self.fail(here, f"{name} must be a mapping, not {kind_of(value)}",
                            "write it as `key: value` lines indented under its name")
        allowed = tuple(allowed)
        for key in value:
            if key not in allowed:
                raise self.fail(here + (key,), f"unknown key {key!r} in {name}",
                                f"valid keys: {', '.join(allowed)}", key=True)
        for key in required:
            if key not in value:
                raise self.fail(here, f"{name} is missing the required key {key!r}",
                                f"add `{key}:`; see the recipe format in README.md")
        return value

    def string(self, here: Tuple[Any, ...], what: str = "a string") -> str:
        value = self.get(here)
        if isinstance(value, str) and not value.strip():
            keep = ", or leave it out to keep the default" if here[:1] in (("profiler",), ("schedule",)) else ""
            raise self.fail(here, f"{name_of(here)} must not be empty", f"write {name_of(here)} as {what}{keep}")
        if not isinstance(value, str):
            raise self.fail(here, f"{name_of(here)} must be {what}, not {kind_of(value)}",
                            f"write {name_of(here)} as {what}")
        return value

    def name(self, here: Tuple[Any, ...], what: str) -> str:
        """A string used as a name (an import name, a class, a recipe id): at most :data:`MAX_NAME` characters."""
        value = self.string(here)
        check_length(self, here, value, what)
        return value

    def integer(self, here: Tuple[Any, ...], minimum: int) -> int:
        value = self.get(here)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(here, f"{name_of(here)} must be an integer, not {kind_of(value)}",
                            f"write a whole number of at least {minimum}")
        if value < minimum:
            raise self.fail(here, f"{name_of(here)} must be at least {minimum}, not {value}",
                            f"use a whole number of at least {minimum}")
        return value

    def boolean(self, here: Tuple[Any, ...]) -> bool:
        value = self.get(here)
        if not isinstance(value, bool):
            raise self.fail(here, f"{name_of(here)} must be true or false, not {kind_of(value)}",
                            "write true or false")
        return value

    def word(self, here: Tuple[Any, ...], allowed: Sequence[str]) -> str:
        value = self.get(here)
        if not isinstance(value, str) or value not in allowed:
            raise self.fail(here, f"{name_of(here)} must be one of {', '.join(allowed)}; got {value!r}",
                            did_you_mean(value, allowed) + f"pick one of: {', '.join(allowed)}")
        return value

    def strings(self, here: Tuple[Any, ...], allowed: Optional[Sequence[str]] = None, nonempty: bool = True) -> List[str]:
        value = self.get(here)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or (nonempty and not value):
            raise self.fail(here, f"{name_of(here)} must be a non-empty list, not {kind_of(value)}",
                            "write a list such as [a, b]")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, str) or (allowed is not None and item not in allowed):
                sub = here + (i,) if isinstance(self.get(here), list) else here
                what = f"one of {', '.join(allowed)}" if allowed else "a string"
                raise self.fail(sub, f"{name_of(here)} entries must be {what}; got {item!r}",
                                f"use only {what}")
            out.append(item)
        return out

    def expression(self, here: Tuple[Any, ...]) -> str:
        """A guard or role: a restricted expression (see :mod:`patchkit.recipe.guards`)."""
        text = self.string(here, "a Python expression")
        hint = ("write one expression on one line that only reads values, e.g. `self.actor_optimizer is None`; "
                f"allowed: {ALLOWED}")
        checked = check_expression(text, lambda msg: self.fail(here, msg, hint))
        for chain, safe in uncertain_chains(checked):
            where = "<command line>" if any(here[:n] in self.overridden for n in range(len(here), 0, -1)) \
                else str(self.where(here))
            self.warnings.append(
                f"{where}: {name_of(here)} reads {chain}, an attribute of an attribute, which may not exist in every "
                f"release or class; where it is missing the guard raises when the line runs, and patchkit reads that "
                f"as false (no step there, one line on stderr). If a missing one means false, write {safe}")
        return checked


def kind_of(value: Any) -> str:
    if value is None:
        return "empty"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number"}.get(type(value), type(value).__name__)


def name_of(here: Tuple[Any, ...]) -> str:
    parts = [str(p) if not isinstance(p, int) else f"[{p}]" for p in here]
    return ".".join(parts).replace(".[", "[") or "value"


def did_you_mean(value: Any, allowed: Sequence[str], prefix: str = "") -> str:
    """``"did you mean level1? "`` for a word spelt close to an allowed one, else ``""``."""
    from difflib import get_close_matches

    close = get_close_matches(value, allowed, n=1, cutoff=0.75) if isinstance(value, str) else []
    return f"did you mean {prefix}{close[0]}? " if close else ""


MAX_PATH = 1024  # a target file's path inside the root; each part at most 255 bytes, as file systems allow


def check_relative(r: Reader, here: Tuple[Any, ...], f: str) -> None:
    if len(f) > MAX_PATH or any(len(part.encode("utf-8", "surrogatepass")) > 255 for part in f.split("/")):
        raise r.fail(here, f"target file {shorten(f)!r} is too long ({len(f)} characters)",
                     f"write the file's real path: at most {MAX_PATH} characters, each part at most 255 bytes")
    if "\x00" in f:
        raise r.fail(here, f"target file {f!r} contains a NUL byte", "write the file's path as it is in the package")
    p = Path(f)
    if p.is_absolute() or f.startswith(("/", "\\")) or (f[1:2] == ":" and f[:1].isascii() and f[:1].isalpha()):
        raise r.fail(here, f"target file {f!r} is absolute", "write paths relative to the package root, e.g. verl/workers/actor/dp_actor.py")
    if ".." in p.parts or "\\" in f:
        raise r.fail(here, f"target file {f!r} leaves the root", "write a path inside the root, with / separators and no '..'")
    if not f.endswith(".py"):
        raise r.fail(here, f"target file {f!r} is not a .py file", "point at a Python source file")
