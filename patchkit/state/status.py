"""What is applied where: the ledger's records checked against the files, and patchkit lines no record explains."""

from __future__ import annotations

from pathlib import Path
from typing import List, NamedTuple, Optional, TYPE_CHECKING, Tuple

from patchkit.engine import marks
from patchkit.core.errors import PatchkitError
from patchkit.core.outcome import Status
from patchkit.state.targetfile import read_target

if TYPE_CHECKING:
    from patchkit.state.ledger import FileRecord, Ledger
    from patchkit.state.unrecorded import Found


class FileStatus(NamedTuple):
    record: Optional[FileRecord]  # None: patchkit lines this ledger has no record of (``found`` says where)
    state: Status
    backup_ok: Optional[bool] = True  # None: no record, so no backup
    found: Optional[Found] = None
    interrupted: str = ""  # Status.INTERRUPTED: the file a stopped change left half-written

    @property
    def path(self) -> str:
        if self.interrupted:
            return self.interrupted
        return self.record.path if self.record is not None else str(self.found.path)

    @property
    def recipes(self) -> Tuple[str, ...]:
        """The recipe ids of the row: recorded ones, or the ones whose lines no record explains."""
        return tuple(sorted(self.record.recipes)) if self.record is not None else self.found.recipes

    def to_json(self) -> dict:
        """The row of ``status --json``; a row without a record has ``backup: null`` and null settings."""
        if self.interrupted:
            return {"path": self.interrupted, "relpath": None, "root": None, "state": self.state.value,
                    "backup": None, "distribution": None, "version": None, "recipes": {}}
        if self.record is None:
            f = self.found
            return {"path": str(f.path), "relpath": f.relpath, "root": str(f.root), "state": self.state.value,
                    "backup": None, "distribution": f.distribution, "version": f.version,
                    "recipes": {rid: {"choices": None, "overrides": None, "backend": None, "git": None}
                                for rid in f.recipes}}
        rec = self.record
        return {"path": rec.path, "relpath": rec.relpath, "root": rec.root, "state": self.state.value,
                "backup": "ok" if self.backup_ok else "missing or corrupted",
                "distribution": rec.distribution, "version": rec.version,
                "recipes": {rid: {"choices": a.choices, "overrides": a.overrides, "backend": a.backend,
                                  "git": _git_json(a.git)} for rid, a in sorted(rec.recipes.items())}}


def _git_json(info):
    """apply --commit's record: null, or the branch and commits."""
    if not info:
        return None
    return {k: info.get(k) for k in ("work_tree", "branch", "commit", "previous", "previous_commit")}


def status(ledger: Optional[Ledger] = None, root: Optional[str] = None) -> List[FileStatus]:
    """The records (those under ``root`` when it is given) and the built-in recipes' files, under ``root``
    (default ``$PATCHKIT_ROOT``) or in this environment, holding patchkit lines no record explains."""
    from patchkit.state.ledger import Ledger

    with (ledger or Ledger()).locked(recover=False) as led:  # a read: a half-written change is only reported
        return _status(led, root)


def _status(led: Ledger, root: Optional[str] = None) -> List[FileStatus]:
    from patchkit.state import unrecorded
    from patchkit.state.ledger import sha256

    out = [FileStatus(None, Status.INTERRUPTED, None, interrupted=change["path"])
           for change in (led.pending or {}).get("files", [])]
    for key, rec in sorted(led.files.items()):
        if not rec.under(root):
            continue
        path = Path(rec.path)
        try:
            data = read_target(path)
        except FileNotFoundError:
            out.append(FileStatus(rec, Status.MISSING))
            continue
        except (OSError, PatchkitError):  # a link now on the way, not a plain file, too large: not read
            out.append(FileStatus(rec, Status.UNREADABLE))
            continue
        digest = sha256(data)
        if digest == rec.patched_sha256:
            state = Status.APPLIED
        elif digest == rec.original_sha256:
            state = Status.REVERTED_OUTSIDE
        elif any(rid in marks.applied_ids(data.decode("utf-8", "replace")) for rid in rec.recipes):
            state = Status.EDITED
        else:
            state = Status.REPLACED
        out.append(FileStatus(rec, state, led.read_backup(rec.original_sha256) is not None))
    explained = {key: tuple(rec.recipes) for key, rec in led.files.items()}
    out += [FileStatus(None, Status.NO_RECORD, None, f) for f in unrecorded.find(explained, root)
            if f.recipes]  # a file whose marked lines are all someone's own has no recipe applied
    return out
