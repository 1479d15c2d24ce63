"""Recipe files on disk: which file a RECIPE argument names, and its text, read with bounds.

A RECIPE is a built-in id or a path.  Whatever the argument (a 300-character
file name, a folder, ``/dev/zero``), the answer is a text of at most
:data:`~patchkit.recipe.yamlpos.MAX_CHARS` bytes or a :class:`RecipeError` that
names the path (shortened for display) and says what to do; never an
``OSError`` from the file system.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from patchkit.core.errors import Location, RecipeError
from patchkit.recipe.reader import is_recipe_id
from patchkit.recipe.yamlpos import MAX_CHARS, shorten

MAX_BYTES = MAX_CHARS  # a recipe's size on disk: the same bound as its text


def shown(path: object) -> str:
    """A path as messages show it: whole when short, else its start and end."""
    return shorten(str(path), 80)


def cannot_open(exc: OSError, path: object) -> RecipeError:
    """The error for a recipe file the system will not open, with what to do about it."""
    if exc.errno == errno.ENAMETOOLONG:
        return RecipeError(f"cannot read recipe: the path is too long ({len(str(path))} characters)",
                           Location(shown(path)),
                           "a file name has at most 255 bytes on most file systems; rename the recipe to a short "
                           "<id>.yaml, or pass a built-in id (see `patchkit list`)")
    if exc.errno == errno.EISDIR:
        return RecipeError("cannot read recipe: it is a folder", Location(shown(path)),
                           "pass the path of a .yaml file, or a built-in id (see `patchkit list`)")
    return RecipeError(f"cannot read recipe: {exc.strerror or exc}", Location(shown(path)),
                       "pass a built-in recipe id (see `patchkit list`) or the path of a .yaml file")


def read_text(path: Path) -> str:
    """The recipe's text: UTF-8 (a byte order mark is dropped), no NUL byte, at most :data:`MAX_BYTES`."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise cannot_open(exc, path) from None
    if len(raw) > MAX_BYTES:
        raise RecipeError(f"the recipe file is larger than {MAX_BYTES} bytes", Location(shown(path)),
                          "a recipe is a few KiB of YAML; split a very large one into several recipes")
    if b"\x00" in raw:
        raise RecipeError("not a text file (it contains NUL bytes)", Location(shown(path)),
                          "a recipe is a UTF-8 YAML file")
    if raw.startswith(b"\xef\xbb\xbf"):  # a byte order mark (by hand: the utf-8-sig codec is one more import)
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise RecipeError("not UTF-8 text", Location(shown(path), line),
                          "save the recipe as UTF-8") from None


def recipe_path(ref: str) -> Path:
    """A built-in id or a path to a recipe file."""
    if ref.endswith((".yaml", ".yml")) or os.sep in ref or "/" in ref:
        path = Path(ref)
        try:
            found = path.is_file()
        except OSError as exc:  # ENAMETOOLONG is not one of the errors is_file() takes as "no such file"
            raise cannot_open(exc, ref) from None
        if not found:
            raise RecipeError(f"no recipe file {shown(ref)}", Location(shown(ref)),
                              "check the path, or use a built-in id from `patchkit list`")
        return path
    from patchkit.recipe.catalogue import builtin_dir, builtin_ids  # a built-in id; a file path needs neither

    path = builtin_dir() / f"{ref}.yaml"
    if not is_recipe_id(ref) or not path.is_file():
        from difflib import get_close_matches

        close = get_close_matches(ref, builtin_ids(), n=1) if len(ref) <= 200 else []
        hint = f"did you mean {close[0]}?" if close else "see `patchkit list` for the built-in recipes"
        raise RecipeError(f"no built-in recipe {shown(ref)!r}", None, hint)
    return path
