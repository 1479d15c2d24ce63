"""What patchkit changed, with byte-exact backups, atomic writes and a lock.

State lives under ``$PATCHKIT_HOME`` (default ``$XDG_STATE_HOME/patchkit``,
i.e. ``~/.local/state/patchkit``)::

    ledger.json          one record per patched file
    backups/<sha256>     the original bytes, named by their hash (a file's, and its compiled copies')
    lock                 held (flock) while a command reads and changes state

The order is always: back up, record, then write the target atomically
(temporary file in the same folder, fsync, rename, original mode kept).
A backup no record names any more is deleted once the ledger that no
longer names it is on disk (and no change is half-written).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, Optional, Set

from patchkit.state import ledger_format
from patchkit.core import private
from patchkit.core.errors import LedgerError, Location, TargetError
from patchkit.core.folders import Folder, Untrusted
from patchkit.state.targetfile import LOCK_TIMEOUT, Changed, hold, read_target, write_source

BACKUP_LIMIT = 256 * 1024 * 1024  # bytes; the largest target file is under 1 MB


def home() -> Path:
    return Path(private.home())


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class AppliedRecipe:
    choices: Dict[str, str]
    overrides: list
    backend: str
    recipe_path: str
    applied_at: float
    git: Optional[dict] = None  # apply --commit: work_tree, branch, commit, previous, previous_commit, files


@dataclass
class FileRecord:
    path: str
    relpath: str
    root: str
    distribution: str
    version: Optional[str]
    original_sha256: str
    patched_sha256: str
    recipes: Dict[str, AppliedRecipe] = field(default_factory=dict)
    compiled: Optional[dict] = None  # the compiled copies apply deleted (patchkit.state.compiled); None: none

    def to_json(self) -> dict:
        data = asdict(self)
        if not data["compiled"]:
            del data["compiled"]  # a record with none reads as before, to an older patchkit too
        return data

    def backups(self) -> Set[str]:
        """The backups this record needs: the original bytes, and its compiled copies'."""
        return {self.original_sha256} | {c["sha256"] for c in (self.compiled or {}).get("files", [])}

    def under(self, root: Optional[str]) -> bool:
        """Whether this is a file under ``root`` (every file when None), compared resolved: the file itself,
        or the root apply found it under, so a file patched through a symbolic link is still found there."""
        if not root:
            return True
        base = os.path.realpath(os.path.expanduser(root))
        inside = base.rstrip(os.sep) + os.sep
        return any(p == base or p.startswith(inside) for p in map(os.path.realpath, (self.path, self.root)))

    @classmethod
    def from_json(cls, data: dict) -> "FileRecord":
        recipes = {k: AppliedRecipe(**v) for k, v in data.pop("recipes", {}).items()}
        return cls(recipes=recipes, **data)


class Ledger:
    """The records, the backups, and the journal of the change being written.

    A change to several files is written as a transaction: the ledger first
    records the bytes each file had and will have (``pending``), then the
    files are written, then ``pending`` is cleared.  If the process dies in
    between, the next command that takes the lock puts every file of that
    change back (:meth:`recover`): all or nothing, even across SIGKILL.
    """

    def __init__(self, root: Optional[Path] = None):
        self.home = root or home()
        self.path = self.home / "ledger.json"
        self.backups = self.home / "backups"
        self.files: Dict[str, FileRecord] = {}
        self.pending: Optional[dict] = None
        self.recovered: list = []  # what recover() put back, for the command line to say

    # ------------------------------------------------------------ state
    def load(self) -> "Ledger":
        """Read the records, after checking the state folder and the ledger are private (see :mod:`patchkit.core.private`)."""
        raw = None
        folder = self._folder()
        if folder is not None:
            with folder:
                raw = private.read(folder, self.path.name, ledger_format.LIMIT)
        if raw is None:
            self.files, self.pending = {}, None
            return self
        data = ledger_format.parse(raw, str(self.path))
        self.files = {k: FileRecord.from_json(dict(v)) for k, v in data["files"].items()}
        self.pending = data["pending"]
        return self

    def save(self) -> None:
        data = {"format": ledger_format.FORMAT, "files": {k: v.to_json() for k, v in sorted(self.files.items())}}
        if self.pending:
            data["pending"] = self.pending
        with self._folder(create=True) as folder:
            private.write(folder, self.path.name, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"),
                          "cannot save the ledger")

    def _folder(self, *names: str, create: bool = False) -> Optional[Folder]:
        """The state folder (or ``backups`` in it), open and checked (:func:`patchkit.core.private.open_state`)."""
        return private.open_state(*names, base=str(self.home), create=create)

    # ------------------------------------------------------------ backups
    def backup(self, data: bytes) -> str:
        digest = sha256(data)
        if self.read_backup(digest) is None:
            with self._folder(self.backups.name, create=True) as folder:
                private.write(folder, digest, data, "cannot save the backup of a file's bytes")
        return digest

    def drop_unused_backups(self, candidates: Iterable[str]) -> None:
        """Delete those of ``candidates`` (backups this ledger named) that no record needs any more.

        Only once the ledger on disk is the one in memory and no change is
        pending: a process killed before that leaves every backup a recovery
        or a revert could still read.  Backups this ledger never named are
        left alone (a ledger moved aside still has its backups).
        """
        if self.pending:
            return
        wanted = set().union(*(rec.backups() for rec in self.files.values()))
        gone = [n for n in set(candidates) - wanted if len(n) == 64 and all(c in "0123456789abcdef" for c in n)]
        folder = self._folder(self.backups.name) if gone else None
        if folder is None:
            return
        with folder:
            for name in gone:
                with contextlib.suppress(OSError):
                    folder.unlink(name)

    def _named(self, records: Dict[str, Optional[dict]]) -> Set[str]:
        """The backups named by the journal and by ``records`` (as saved in it) and the records in memory."""
        named = {change["old"] for change in (self.pending or {}).get("files", [])}
        named |= {r["original_sha256"] for r in records.values() if r and r.get("original_sha256")}
        named |= {c["sha256"] for r in records.values() if r for c in (r.get("compiled") or {}).get("files", [])}
        return named.union(*(rec.backups() for rec in self.files.values()))

    def read_backup(self, digest: str) -> Optional[bytes]:
        """The backup's bytes, or None when it is missing or not those bytes; refused when it is not private."""
        folder = self._folder(self.backups.name)
        if folder is None:
            return None
        with folder:
            data = private.read(folder, digest, BACKUP_LIMIT)
        return data if data is not None and sha256(data) == digest else None

    # ------------------------------------------------------------ lock
    @contextlib.contextmanager
    def locked(self, timeout: float = LOCK_TIMEOUT, recover: bool = True) -> Iterator["Ledger"]:
        """Hold the state folder's lock and read the ledger; ``recover`` also puts back a change a dead
        process left half-written (apply and revert do; a command that only reads reports it instead)."""
        lock = str(self.home / "lock")
        with self._folder(create=True) as folder:
            try:
                fd = folder.open("lock", os.O_RDWR | os.O_CREAT, private.FILE_MODE)
            except Untrusted as exc:
                raise private.refuse(lock, exc.why, False) from None
            except OSError as exc:
                raise private.unwritable(lock, exc, "cannot open the state folder's lock") from None
        try:
            why = private.problem(os.fstat(fd), False)
            if why is not None:
                raise private.refuse(lock, why, False)
            hold(fd, timeout, f"patchkit process holds {lock}")
            self.load()
            if recover:
                self.recover()
            yield self
        finally:
            os.close(fd)

    # ------------------------------------------------------------ transactions
    def commit(self, writes, records_before: Dict[str, Optional[dict]]) -> None:
        """Write ``(path, old_bytes, new_bytes)`` triples all or nothing; the records are already updated.

        A state folder that cannot take the backups or the journal (full, say): nothing is written.  One that
        cannot take the ledger saying the files are written: they are put back before the error."""
        try:
            self.pending = {
                "files": [{"path": str(p), "old": self.backup(old), "new": sha256(new)} for p, old, new in writes],
                "records": records_before,
            }
            self.save()
        except LedgerError as exc:
            self.pending = None
            self.restore_records(records_before)
            raise _said(exc, "no file was changed")
        named = self._named(records_before)
        pause = float(os.environ.get("PATCHKIT_TEST_SLOW_WRITE", "0") or 0)
        try:
            for i, (path, old, new) in enumerate(writes):
                if pause and i:
                    time.sleep(pause)
                write_source(Path(path), new, expected=old)
        except (Changed, TargetError):  # changed, or now reached through a link: nothing written through it
            self.recover()  # the files written before it are put back; the caller may plan again
            raise
        except OSError as exc:
            self._put_back_now()
            raise LedgerError(f"writing failed: {exc.strerror or exc}; every file was put back",
                              Location(str(exc.filename or path)),
                              "check disk space and permissions, then run the command again") from None
        journal, self.pending = self.pending, None
        try:
            self.save()
        except LedgerError as exc:
            self.pending = journal
            self._put_back_now()
            raise _said(exc, "the change could not be recorded, so every file was put back")
        self.drop_unused_backups(named)

    def restore_records(self, records_before: Dict[str, Optional[dict]]) -> None:
        """Put records back as they were (``None``: the file had none); in memory only, :meth:`save` writes them."""
        for key, record in records_before.items():
            if record is None:
                self.files.pop(key, None)
            else:
                self.files[key] = FileRecord.from_json(dict(record))

    def _put_back_now(self) -> None:
        """Undo this command's own change (a write failed, or the ledger cannot record it).  A ledger that cannot
        be saved afterwards (a full disk) is left as it is on disk, still holding the journal, which the next
        command ends without writing a file: they are back already."""
        self._recover(quiet=True)
        self.recovered.clear()  # said by the error itself, not as an earlier run's

    def recover(self) -> None:
        """Undo a change that a dead process left half-written, and restore its records."""
        self._recover(quiet=False)

    def _recover(self, quiet: bool) -> None:
        if not self.pending:
            return
        named = self._named(self.pending.get("records", {}))
        for change in self.pending.get("files", []):
            path = Path(change["path"])
            for stale in path.parent.glob(f".{path.name}.*.patchkit-tmp"):  # a write killed before its rename
                with contextlib.suppress(OSError):
                    stale.unlink()
            try:
                data = read_target(path)
            except (OSError, TargetError):  # gone, or no longer a plain file reached without links: not touched
                continue
            current = sha256(data)
            if current == change["new"] and current != change["old"]:
                old = self.read_backup(change["old"])
                if old is not None:
                    try:
                        write_source(path, old, expected=data)
                    except Changed:  # written by someone else since: it is theirs now
                        continue
                    self.recovered.append(f"put back {path} (an earlier patchkit run stopped half-way)")
        self.restore_records(self.pending.get("records", {}))
        self.pending = None
        try:
            self.save()
        except LedgerError:
            if not quiet:
                raise
            return
        self.drop_unused_backups(named)


def _said(exc: LedgerError, outcome: str) -> LedgerError:
    """``exc`` (its own class: a refusal stays one) saying what became of the files; raised without its chain."""
    exc.message = f"{exc.message}; {outcome}"
    exc.args = (exc.message,)
    exc.__cause__, exc.__suppress_context__ = None, True
    return exc
