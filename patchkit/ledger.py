"""What patchkit changed, with byte-exact backups, atomic writes and a lock.

State lives under ``$PATCHKIT_HOME`` (default ``$XDG_STATE_HOME/patchkit``,
i.e. ``~/.local/state/patchkit``)::

    ledger.json          one record per patched file
    backups/<sha256>     the original bytes, named by their hash
    lock                 held (flock) while a command reads and changes state

The order is always: back up, record, then write the target atomically
(temporary file in the same folder, fsync, rename, original mode kept).
A backup no record names any more is deleted once the ledger that no
longer names it is on disk (and no change is half-written).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, Optional, Set

from . import gitrepo
from .errors import LedgerError, Location, LockedError

LOCK_TIMEOUT = float(os.environ.get("PATCHKIT_LOCK_TIMEOUT", "60"))


def home() -> Path:
    env = os.environ.get("PATCHKIT_HOME")
    if env:
        return Path(env).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "patchkit"


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

    def to_json(self) -> dict:
        return asdict(self)

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
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            self.files, self.pending = {}, None
            return self
        try:
            data = json.loads(raw)
            self.files = {k: FileRecord.from_json(dict(v)) for k, v in data.get("files", {}).items()}
            self.pending = data.get("pending")
        except (ValueError, TypeError, AttributeError) as exc:
            raise LedgerError(f"the ledger is not readable: {exc}", Location(str(self.path)),
                              "move the file aside; the backups in backups/ are still there") from None
        return self

    def save(self) -> None:
        data = {"format": 1, "files": {k: asdict(v) for k, v in sorted(self.files.items())}}
        if self.pending:
            data["pending"] = self.pending
        self.home.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))

    # ------------------------------------------------------------ backups
    def backup(self, data: bytes) -> str:
        digest = sha256(data)
        path = self.backups / digest
        if not path.exists() or sha256(path.read_bytes()) != digest:
            self.backups.mkdir(parents=True, exist_ok=True)
            atomic_write(path, data, mode=0o600)
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
        wanted = {rec.original_sha256 for rec in self.files.values()}
        for name in set(candidates) - wanted:
            if len(name) == 64 and all(c in "0123456789abcdef" for c in name):
                with contextlib.suppress(OSError):
                    (self.backups / name).unlink()

    def _named(self, records: Dict[str, Optional[dict]]) -> Set[str]:
        """The backups named by the journal and by ``records`` (as saved in it) and the records in memory."""
        named = {change["old"] for change in (self.pending or {}).get("files", [])}
        named |= {r["original_sha256"] for r in records.values() if r and r.get("original_sha256")}
        return named | {rec.original_sha256 for rec in self.files.values()}

    def read_backup(self, digest: str) -> Optional[bytes]:
        try:
            data = (self.backups / digest).read_bytes()
        except OSError:
            return None
        return data if sha256(data) == digest else None

    # ------------------------------------------------------------ lock
    @contextlib.contextmanager
    def locked(self, timeout: float = LOCK_TIMEOUT) -> Iterator["Ledger"]:
        import fcntl

        self.home.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.home / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() >= deadline:
                        raise LockedError(f"another patchkit process holds {self.home / 'lock'}",
                                          hint="wait for it to finish and run the command again") from None
                    time.sleep(0.05)
            self.load()
            self.recover()
            yield self
        finally:
            os.close(fd)

    # ------------------------------------------------------------ transactions
    def commit(self, writes, records_before: Dict[str, Optional[dict]]) -> None:
        """Write ``(path, old_bytes, new_bytes)`` triples all or nothing; the records are already updated."""
        self.pending = {
            "files": [{"path": str(p), "old": self.backup(old), "new": sha256(new)} for p, old, new in writes],
            "records": records_before,
        }
        self.save()
        named = self._named(records_before)
        pause = float(os.environ.get("PATCHKIT_TEST_SLOW_WRITE", "0") or 0)
        try:
            for i, (path, _old, new) in enumerate(writes):
                if pause and i:
                    time.sleep(pause)
                write_source(Path(path), new)
        except OSError as exc:
            self.recover()
            raise LedgerError(f"writing failed: {exc.strerror or exc}; every file was put back",
                              Location(str(exc.filename or path)),
                              "check disk space and permissions, then run the command again") from None
        self.pending = None
        self.save()
        self.drop_unused_backups(named)

    def restore_records(self, records_before: Dict[str, Optional[dict]]) -> None:
        """Put records back as they were (``None``: the file had none); in memory only, :meth:`save` writes them."""
        for key, record in records_before.items():
            if record is None:
                self.files.pop(key, None)
            else:
                self.files[key] = FileRecord.from_json(dict(record))

    def recover(self) -> None:
        """Undo a change that a dead process left half-written, and restore its records."""
        if not self.pending:
            return
        named = self._named(self.pending.get("records", {}))
        for change in self.pending.get("files", []):
            path = Path(change["path"])
            for stale in path.parent.glob(f".{path.name}.*.patchkit-tmp"):  # a write killed before its rename
                with contextlib.suppress(OSError):
                    stale.unlink()
            try:
                current = sha256(path.read_bytes())
            except OSError:
                continue
            if current == change["new"] and current != change["old"]:
                old = self.read_backup(change["old"])
                if old is not None:
                    write_source(path, old)
                    self.recovered.append(f"put back {path} (an earlier patchkit run stopped half-way)")
        self.restore_records(self.pending.get("records", {}))
        self.pending = None
        self.save()
        self.drop_unused_backups(named)


def write_source(path: Path, data: bytes) -> None:
    """Replace a target file atomically and drop its compiled copies, so no stale .pyc can shadow it.

    A compiled copy that git tracks (a checkout that commits its .pyc files)
    is kept: deleting it would be a change to the checkout.  Python still
    checks a .pyc against the source's size and time before using it.
    """
    atomic_write(path, data)
    stale = sorted(path.parent.glob(f"__pycache__/{path.stem}.*.pyc"))
    if stale and gitrepo.work_tree(path) is not None:  # os.path only; git only inside a git work tree
        stale = _untracked(stale)
    for pyc in stale:
        with contextlib.suppress(OSError):
            pyc.unlink()


def _untracked(paths) -> list:
    """Those of ``paths`` git does not track; none when git cannot tell."""
    from .errors import PatchkitError

    top = gitrepo.work_tree(paths[0]) if paths else None
    if top is None:
        return list(paths)
    try:
        tracked = gitrepo.tracked(top, paths)
    except PatchkitError:
        return []
    if tracked is None:  # git cannot tell: keep them all
        return []
    return [p for p in paths if p not in tracked]


def atomic_write(path: Path, data: bytes, mode: Optional[int] = None) -> None:
    """Write ``data`` to ``path`` so that readers see the old or the new bytes, never a mix.

    The file keeps its mode and, where the process may set it, its owner.
    """
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if mode is None:
        mode = st.st_mode & 0o7777 if st else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".patchkit-tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if st is not None and (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
            with contextlib.suppress(OSError):
                os.chown(tmp, st.st_uid, st.st_gid)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dirfd = os.open(str(path.parent), os.O_RDONLY)
        try:
            os.fsync(dirfd)
        finally:
            os.close(dirfd)
