"""What patchkit changed, with byte-exact backups, atomic writes and a lock.

State lives under ``$PATCHKIT_HOME`` (default ``$XDG_STATE_HOME/patchkit``,
i.e. ``~/.local/state/patchkit``)::

    ledger.json          one record per patched file
    backups/<sha256>     the original bytes, named by their hash
    lock                 held (flock) while a command reads and changes state

The order is always: back up, record, then write the target atomically
(temporary file in the same folder, fsync, rename, original mode kept).
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
from typing import Dict, Iterator, Optional

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

    @classmethod
    def from_json(cls, data: dict) -> "FileRecord":
        recipes = {k: AppliedRecipe(**v) for k, v in data.pop("recipes", {}).items()}
        return cls(recipes=recipes, **data)


class Ledger:
    def __init__(self, root: Optional[Path] = None):
        self.home = root or home()
        self.path = self.home / "ledger.json"
        self.backups = self.home / "backups"
        self.files: Dict[str, FileRecord] = {}

    # ------------------------------------------------------------ state
    def load(self) -> "Ledger":
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            self.files = {}
            return self
        try:
            data = json.loads(raw)
            self.files = {k: FileRecord.from_json(dict(v)) for k, v in data.get("files", {}).items()}
        except (ValueError, TypeError, AttributeError) as exc:
            raise LedgerError(f"the ledger is not readable: {exc}", Location(str(self.path)),
                              "move the file aside; the backups in backups/ are still there") from None
        return self

    def save(self) -> None:
        data = {"format": 1, "files": {k: asdict(v) for k, v in sorted(self.files.items())}}
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
            yield self.load()
        finally:
            os.close(fd)


def atomic_write(path: Path, data: bytes, mode: Optional[int] = None) -> None:
    """Write ``data`` to ``path`` so that readers see the old or the new bytes, never a mix."""
    path = Path(path)
    if mode is None:
        try:
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".patchkit-tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
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
