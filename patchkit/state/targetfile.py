"""Writing a target file: atomically, under a lock of the file's own, and only over the bytes patchkit read.

A change is planned from the bytes read at the start (the transform takes a
while); another program may write the file meanwhile: an editor, a second
patchkit with another ``PATCHKIT_HOME``, another user.  So the last read of
the file and its replacement are one step: under an exclusive ``flock`` of
the folder that holds the file (a lock that belongs to the file's place, not
to any state folder, and that survives the rename; no lock file is left in
site-packages), the bytes are read again and compared with those planned
from, and only if they are the same is the new text renamed over them.
Otherwise :class:`Changed` is raised and nothing is written.  Writers that
take no lock (an editor) can still slip in between that read and the
rename, a window of microseconds instead of the whole transform.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional

from patchkit.state import gitrepo
from patchkit.core.errors import LedgerError, Location, LockedError

LOCK_TIMEOUT = float(os.environ.get("PATCHKIT_LOCK_TIMEOUT", "60"))


class Changed(LedgerError):
    """The target file is not the one planned from: someone wrote it while patchkit worked."""


def hold(fd: int, timeout: float, holder: str, where: Optional[Location] = None) -> None:
    """Take an exclusive ``flock`` on ``fd``, waiting up to ``timeout`` seconds; else :class:`LockedError`."""
    import fcntl

    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() >= deadline:
                raise LockedError(f"another {holder}", where, "wait for it to finish and run the command again") \
                    from None
            time.sleep(0.05)


@contextlib.contextmanager
def locked(path: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the lock of ``path``'s place: an exclusive ``flock`` on the folder holding it."""
    folder = str(Path(path).parent)
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        hold(fd, timeout, f"process holds the lock of {folder} (patching a file there)", Location(str(path)))
        yield
    finally:
        os.close(fd)


def write_source(path: Path, data: bytes, expected: Optional[bytes] = None) -> None:
    """Replace a target file atomically, if it still holds ``expected``; drop its compiled copies.

    ``expected`` None: whatever it holds.  A compiled copy that git tracks (a
    checkout that commits its .pyc files) is kept: deleting it would be a
    change to the checkout.  Python still checks a .pyc against the source's
    size and time before using it.
    """
    path = Path(path)
    with locked(path):
        if expected is not None:
            try:
                now = path.read_bytes()
            except FileNotFoundError:
                now = None
            if now != expected:
                raise Changed("the file changed while patchkit worked on it (another program or patchkit "
                              "wrote it); nothing of it was written", Location(str(path)),
                              "run the command again; it plans from the file as it is now")
        atomic_write(path, data)
    stale = sorted(path.parent.glob(f"__pycache__/{path.stem}.*.pyc"))
    if stale and gitrepo.work_tree(path) is not None:  # os.path only; git only inside a git work tree
        stale = _untracked(stale)
    for pyc in stale:
        with contextlib.suppress(OSError):
            pyc.unlink()


def _untracked(paths) -> list:
    """Those of ``paths`` git does not track; none when git cannot tell."""
    from patchkit.core.errors import PatchkitError

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
