"""patchkit's own lines: every one ends with ``  # patchkit:<recipe-id>``.

Finding, counting and taking them out needs no parser, so this module is
small and cheap to import (``status`` and ``revert`` use it without the engine).
It also reads a source file's encoding, as Python does.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path
from typing import Collection, List, Optional, Sequence, Tuple

from patchkit.core.errors import Location, TargetError

_OTHER_BREAKS = "\v\f\x1c\x1d\x1e\x85\u2028\u2029"  # str.splitlines breaks there, Python source does not


def split_lines(text: str) -> List[str]:
    """Lines with their endings; only \\r\\n, \\r and \\n end a line (as for Python itself)."""
    if any(ch in text for ch in _OTHER_BREAKS):
        return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)
    return text.splitlines(keepends=True)


def newline_of(lines: Sequence[str]) -> str:
    for line in lines:
        if line.endswith("\r\n"):
            return "\r\n"
        if line.endswith(("\n", "\r")):
            return line[-1]
    return "\n"


def is_own_line(line: str, recipe_id: Optional[str] = None) -> bool:
    body = line.rstrip("\r\n")
    tail = f"  # patchkit:{recipe_id}" if recipe_id else None
    if tail is not None:
        return body.endswith(tail) and len(body) > len(tail) and not body[: -len(tail)].isspace()
    return re.search(r"\S  # patchkit:[a-z0-9][a-z0-9._-]*$", body) is not None


def strip(text: str, recipe_id: Optional[str] = None) -> str:
    """Take out the lines patchkit added (for one recipe, or for all)."""
    if "  # patchkit:" not in text:  # most files: nothing to look at line by line
        return text
    return "".join(line for line in split_lines(text) if not is_own_line(line, recipe_id))


def applied_ids(text: str) -> List[str]:
    """The recipes whose lines are in ``text``, in order of appearance."""
    if "  # patchkit:" not in text:
        return []
    ids = []
    for line in split_lines(text):
        found = re.search(r"\S  # patchkit:([a-z0-9][a-z0-9._-]*)$", line.rstrip("\r\n"))
        if found and found.group(1) not in ids:
            ids.append(found.group(1))
    return ids


# What patchkit writes before its marker (see patchkit.engine.lines): the module header's lines, and a point's
# statement (`_patchkit_runtime.step(key, lambda: GUARD)`) or decorator, all calling _patchkit_runtime; and the
# `if GUARD: _patchkit_runtime.step(key)` lines of versions that put the guard in an `if`.
_WRITTEN = re.compile(r"""\s*(?:
    import\ patchkit\.runtime\ as\ _patchkit_runtime
  | except\ Exception\ as\ _patchkit_missing:
  | _patchkit_runtime\ =\ .*
  | (?:try:\ )?__import__\("sys"\)\.stderr\.write\(.*_patchkit_missing.*\)
  | @?_patchkit_runtime\.\w+\(.*\)
  | if\ .*:\ _patchkit_runtime\.\w+\(.*\)
)""", re.X)
# the header's block lines around the import above (`try: ...write(...)`, `except Exception: pass`: as earlier
# versions wrote them)
_SKELETON = ("try:", "except Exception:", "pass", "except Exception: pass")


def foreign_lines(text: str) -> List[Tuple[int, int, str]]:
    """Every line (number, column of its marker, recipe id) that ends in patchkit's marker but is not one patchkit
    writes (someone's own line, or a hand edit): taking the marked lines out would lose it."""
    if "  # patchkit:" not in text:
        return []
    lines = split_lines(text)
    headers = {found.group(1) for found in (re.search(r"^\s*import patchkit\.runtime as _patchkit_runtime  "
                                                      r"# patchkit:([a-z0-9][a-z0-9._-]*)$", line.rstrip("\r\n"))
                                            for line in lines) if found}
    out = []
    for number, line in enumerate(lines, 1):
        body = line.rstrip("\r\n")
        found = re.search(r"(?<=\S)  # patchkit:([a-z0-9][a-z0-9._-]*)$", body)
        if found is None:
            continue
        code = body[: found.start()]
        if _WRITTEN.fullmatch(code) or (code.strip() in _SKELETON and found.group(1) in headers):
            continue
        out.append((number, found.start() + 3, found.group(1)))
    return out


def foreign_line(text: str) -> Optional[Tuple[int, int, str]]:
    """The first of :func:`foreign_lines`: apply refuses a file with one, since the original could not be given back."""
    found = foreign_lines(text)
    return found[0] if found else None


def take_out(text: str, gone: Collection[str]) -> Tuple[str, List[Tuple[int, str]]]:
    """``text`` without the lines patchkit writes for the recipes in ``gone``, and the marked lines it keeps because
    patchkit does not write them (of any recipe): ``(line number in the new text, recipe id)`` each.

    For a file whose bytes are not the ones patchkit wrote (edited since, or with no record): its marker alone
    does not make a line patchkit's.
    """
    foreign = {number: rid for number, _col, rid in foreign_lines(text)}
    kept, out = [], []
    for number, line in enumerate(split_lines(text), 1):
        if number in foreign:
            out.append(line)
            kept.append((len(out), foreign[number]))
        elif not any(is_own_line(line, rid) for rid in gone):
            out.append(line)
    return "".join(out), kept


def written_ids(text: str) -> List[str]:
    """The recipes with a line in ``text`` that patchkit writes, in order of appearance (:func:`applied_ids` without
    the ids only someone's own marked lines name)."""
    numbers = {n for n, _c, _r in foreign_lines(text)}
    if not numbers:
        return applied_ids(text)
    return applied_ids("".join(line for n, line in enumerate(split_lines(text), 1) if n not in numbers))


def _mentions(line: str, recipe_id: str) -> bool:
    """``line`` names ``recipe_id`` as a marker (``patchkit:verl-fsdp`` is not in ``patchkit:verl-fsdp-update``)."""
    return re.search(rf"patchkit:{re.escape(recipe_id)}(?![a-z0-9._-])", line) is not None


def leftover(text: str, gone: Collection[str], everything: bool) -> Optional[Tuple[int, str]]:
    """The first line, numbered as in ``text`` (the file on disk), that still mentions a recipe in ``gone``
    once their marked lines are out (or mentions the runtime unmarked, when ``everything``: no recipe is left).
    A marked line patchkit did not write is not one of them: revert keeps it and says so on its own."""
    for number, line in enumerate(split_lines(text), 1):
        if any(is_own_line(line, rid) for rid in gone):
            continue  # taken out, or kept as someone's own
        if any(_mentions(line, rid) for rid in gone) or (everything and "_patchkit_runtime" in line
                                                          and not is_own_line(line)):
            return number, line
    return None


def kept_line_numbers(text: str, gone: Collection[str], keep: Collection[int] = ()) -> List[int]:
    """The line numbers in ``text`` of the lines left once the marked lines of ``gone`` (but those in ``keep``)
    are taken out."""
    return [n for n, line in enumerate(split_lines(text), 1)
            if n in keep or not any(is_own_line(line, rid) for rid in gone)]


def decode(data: bytes, path: Path) -> Tuple[str, str]:
    """A Python source file's text and encoding (its coding cookie or byte order mark, else UTF-8)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding), encoding
    except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
        raise TargetError(f"cannot decode the file: {exc}", Location(str(path)),
                          "the target must be a Python source file in its declared encoding") from None
