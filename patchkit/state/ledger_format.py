"""The ledger's JSON, checked field by field before anything in it is believed.

``ledger.json`` decides which bytes ``revert`` writes into site-packages, so
it is read like input from a stranger, even after the state folder's owner
and mode are checked: every field has its type, every path is absolute,
every hash is 64 hex digits, and a ledger of a newer ``format`` is refused
(a newer patchkit wrote it; reading it as empty would forget what it holds).
Each problem is one error naming the ledger and the field.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

from patchkit.core.errors import LedgerError, Location

FORMAT = 1
LIMIT = 64 * 1024 * 1024  # bytes; a ledger of 100,000 records is about 60 MB
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_FIX = "move the file aside (the backups in backups/ are still there) and check what is patched with `patchkit status`"


class Bad(Exception):
    """One field is wrong: ``where`` is its place in the JSON, ``what`` what it should be."""

    def __init__(self, where: str, what: str):
        super().__init__(f"{where} {what}")


def parse(raw: bytes, path: str) -> dict:
    """The checked ledger as ``{"files": {key: record dict}, "pending": dict or None}``."""
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise LedgerError(f"the ledger is not UTF-8 text (byte {exc.start})", Location(path), _FIX) from None
    except (ValueError, RecursionError) as exc:
        raise LedgerError(f"the ledger is not readable JSON: {str(exc)[:200]}", Location(path), _FIX) from None
    try:
        return _ledger(data)
    except Bad as exc:
        raise LedgerError(f"the ledger is damaged: {exc}", Location(path), _FIX) from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _ledger(data: Any) -> dict:
    _type(data, dict, "the ledger", "an object")
    version = data.get("format")
    if type(version) is not int:
        raise Bad("format", "must be a whole number")
    if version > FORMAT:
        raise Bad("format", f"is {version}: a newer patchkit wrote it (this one reads format {FORMAT}); "
                            "use that patchkit, or upgrade this one")
    files = data.get("files", {})
    _type(files, dict, "files", "an object")
    for key, record in files.items():
        _record(record, f"files[{key!r}]")
        if record["path"] != key:
            raise Bad(f"files[{key!r}].path", "must be the record's own key")
    pending = data.get("pending")
    if pending is not None:
        _pending(pending)
    return {"files": files, "pending": pending}


def _pending(pending: Any) -> None:
    _type(pending, dict, "pending", "an object")
    changes = pending.get("files", [])
    _type(changes, list, "pending.files", "a list")
    for i, change in enumerate(changes):
        where = f"pending.files[{i}]"
        _type(change, dict, where, "an object")
        _path(change.get("path"), f"{where}.path")
        for name in ("old", "new"):
            _hash(change.get(name), f"{where}.{name}")
    records = pending.get("records", {})
    _type(records, dict, "pending.records", "an object")
    for key, record in records.items():
        _path(key, f"pending.records key {key!r}")
        if record is not None:
            _record(record, f"pending.records[{key!r}]")


def _record(record: Any, where: str) -> None:
    _type(record, dict, where, "an object")
    _path(record.get("path"), f"{where}.path")
    for name in ("relpath", "root", "distribution"):
        _type(record.get(name), str, f"{where}.{name}", "a string")
    _optional_str(record.get("version"), f"{where}.version")
    for name in ("original_sha256", "patched_sha256"):
        _hash(record.get(name), f"{where}.{name}")
    extra = set(record) - {"path", "relpath", "root", "distribution", "version", "original_sha256",
                           "patched_sha256", "recipes", "compiled"}
    if extra:
        raise Bad(where, f"has fields patchkit does not write: {', '.join(sorted(extra))}")
    if record.get("compiled") is not None:
        _compiled(record["compiled"], record["path"], f"{where}.compiled")
    recipes = record.get("recipes", {})
    _type(recipes, dict, f"{where}.recipes", "an object")
    for rid, applied in recipes.items():
        _applied(applied, f"{where}.recipes[{rid!r}]")


def _compiled(compiled: Any, path: str, where: str) -> None:
    """The compiled copies of ``path`` a record names: each a ``__pycache__`` file of that source, by its name alone
    (``STEM.TAG.pyc``), with a backup's hash and the mode and owner to put it back with."""
    _type(compiled, dict, where, "an object")
    mtime = compiled.get("mtime_ns")
    if type(mtime) is not int or mtime < 0:
        raise Bad(f"{where}.mtime_ns", "must be a time in nanoseconds")
    _type(compiled.get("files"), list, f"{where}.files", "a list")
    stem = os.path.splitext(os.path.basename(path))[0]
    for i, entry in enumerate(compiled["files"]):
        at = f"{where}.files[{i}]"
        _type(entry, dict, at, "an object")
        name = entry.get("name")
        if not isinstance(name, str) or "/" in name or "\0" in name or not name.startswith(f"{stem}.") \
                or not name.endswith(".pyc") or name.count(".") < 2 or len(name) > 255:
            raise Bad(f"{at}.name", f"must be the name of a compiled copy of {stem}.py (STEM.TAG.pyc)")
        _hash(entry.get("sha256"), f"{at}.sha256")
        for key, top in (("mode", 0o777), ("uid", 2 ** 32 - 1), ("gid", 2 ** 32 - 1)):
            if type(entry.get(key)) is not int or not 0 <= entry[key] <= top:
                raise Bad(f"{at}.{key}", f"must be a number from 0 to {top}")
        extra = set(entry) - {"name", "sha256", "mode", "uid", "gid"}
        if extra:
            raise Bad(at, f"has fields patchkit does not write: {', '.join(sorted(extra))}")


def _applied(applied: Any, where: str) -> None:
    _type(applied, dict, where, "an object")
    choices = applied.get("choices")
    _type(choices, dict, f"{where}.choices", "an object")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in choices.items()):
        raise Bad(f"{where}.choices", "must map names to strings")
    overrides = applied.get("overrides")
    _type(overrides, list, f"{where}.overrides", "a list")
    if not all(isinstance(o, str) for o in overrides):
        raise Bad(f"{where}.overrides", "must be a list of strings")
    for name in ("backend", "recipe_path"):
        _type(applied.get(name), str, f"{where}.{name}", "a string")
    at = applied.get("applied_at")
    if type(at) not in (int, float) or not math.isfinite(at):
        raise Bad(f"{where}.applied_at", "must be a time in seconds")
    git = applied.get("git")
    if git is not None:
        _type(git, dict, f"{where}.git", "an object or null")
        for name in ("work_tree", "branch"):
            _type(git.get(name), str, f"{where}.git.{name}", "a string")
        for name in ("commit", "previous", "previous_commit"):  # null until apply --commit has made its commit
            _optional_str(git.get(name), f"{where}.git.{name}")
    extra = set(applied) - {"choices", "overrides", "backend", "recipe_path", "applied_at", "git"}
    if extra:
        raise Bad(where, f"has fields patchkit does not write: {', '.join(sorted(extra))}")


def _type(value: Any, kind: type, where: str, what: str) -> None:
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise Bad(where, f"must be {what}, not {_shown(value)}")


def _optional_str(value: Any, where: str) -> None:
    if value is not None:
        _type(value, str, where, "a string or null")


def _path(value: Any, where: str) -> None:
    _type(value, str, where, "an absolute path")
    if not os.path.isabs(value) or "\0" in value or len(value) > 4096:
        raise Bad(where, f"must be an absolute path, not {_shown(value)}")


def _hash(value: Any, where: str) -> None:
    if not isinstance(value, str) or not _HEX64.match(value):
        raise Bad(where, f"must be a sha256 (64 hex digits), not {_shown(value)}")


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    text = json.dumps(value) if isinstance(value, (str, int, float, bool)) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."

