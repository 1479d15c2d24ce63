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
import stat
import time
from pathlib import Path
from typing import Iterator, Optional

from patchkit.core import reach
from patchkit.core.confined import Refused
from patchkit.core.reach import Rules
from patchkit.state import gitrepo
from patchkit.core.errors import LedgerError, Location, LockedError, TargetError

LOCK_TIMEOUT = float(os.environ.get("PATCHKIT_LOCK_TIMEOUT", "60"))
LIMIT = 64 << 20  # no source file patchkit patches comes near it (SGLang's model_runner.py: about 150 KB)
_NOFOLLOW, _NONBLOCK = getattr(os, "O_NOFOLLOW", 0), getattr(os, "O_NONBLOCK", 0)


class Changed(LedgerError):
    """The target file is not the one planned from: someone wrote it while patchkit worked."""


class _NoLinks(Rules):
    """A target's folders are planned as resolved paths: any link on the way was put there since."""

    def link(self, st: os.stat_result, holder: os.stat_result, shown: str) -> None:
        raise Refused(errno.ELOOP, "is a symbolic link", shown)


def folder_of(path: Path) -> int:
    """A descriptor of the folder holding ``path`` (an absolute path without links, as planning resolves it),
    reached from ``/`` one folder at a time (:func:`patchkit.core.reach.folder`) following no link: a folder
    swapped for a link since is refused."""
    path = Path(path)
    try:
        return reach.folder(str(path.parent), rules=_NoLinks())
    except (Refused, NotADirectoryError) as exc:
        raise TargetError(f"a folder on the way to {path} is now a symbolic link or not a folder: patchkit "
                          "writes and reads targets only through the folders it planned from",
                          Location(str(path)), "check who changed the package's folders, then run the command "
                          "again") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link took a folder's place between its check and its open
            raise TargetError(f"a folder on the way to {path} is now a symbolic link: patchkit writes and reads "
                              "targets only through the folders it planned from", Location(str(path)),
                              "check who changed the package's folders, then run the command again") from exc
        raise


def _open_file(dfd: int, path: Path) -> int:
    """The target ``path`` opened for reading in its folder ``dfd``: a plain file, no link, no FIFO left waiting."""
    try:
        fd = os.open(path.name, os.O_RDONLY | _NOFOLLOW | _NONBLOCK, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TargetError(f"{path} is now a symbolic link: patchkit writes and reads targets only as the plain "
                              "files it planned from", Location(str(path)),
                              "check who changed the file, then run the command again") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise TargetError(f"{path} is not a plain file", Location(str(path)), "a recipe patches Python source files")
    return fd


def _read_open(fd: int, path: Path, limit: int) -> bytes:
    chunks, size = [], 0
    while size <= limit:
        chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise TargetError(f"{path} is larger than any source file patchkit patches ({limit >> 20} MiB)",
                          Location(str(path)), "check that the recipe names the right file")
    return b"".join(chunks)


def read_target(path: Path, limit: int = LIMIT) -> bytes:
    """The bytes of a target file, read as :func:`write_source` will find it: through folders that are no links, a
    plain file, at most ``limit`` bytes read (a sparse file that says it holds gigabytes is refused as it is read).
    FileNotFoundError when it is not there."""
    return read_with_stat(path, limit)[0]


def read_with_stat(path: Path, limit: int = LIMIT) -> tuple:
    """(bytes, stat) of a file read as :func:`read_target` reads one, the stat taken on the file opened."""
    path = Path(path)
    dfd = folder_of(path)
    try:
        fd = _open_file(dfd, path)
        try:
            return _read_open(fd, path, limit), os.fstat(fd)
        finally:
            os.close(fd)
    finally:
        os.close(dfd)


def write_in(dfd: int, name: str, data: bytes, mode: int, uid: int, gid: int) -> None:
    """``name`` in the folder ``dfd`` replaced by ``data`` as :func:`write_source` replaces a target, with this mode
    and (where the process may set it) owner."""
    _replace(dfd, name, data, os.stat_result((mode, 0, 0, 0, uid, gid, 0, 0, 0, 0)))


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

    The folder is reached from ``/`` without following a link (:func:`folder_of`) and locked on that descriptor;
    the file is read again, the new text written to a new file there and renamed over it, all relative to that
    descriptor: a folder or file swapped for a link after planning is refused, never written through.
    ``expected`` None: whatever it holds.  A compiled copy that git tracks (a
    checkout that commits its .pyc files) is kept: deleting it would be a
    change to the checkout.  Python still checks a .pyc against the source's
    size and time before using it.
    """
    path = Path(path)
    dfd = folder_of(path)
    try:
        hold(dfd, LOCK_TIMEOUT, f"process holds the lock of {path.parent} (patching a file there)", Location(str(path)))
        try:
            fd = _open_file(dfd, path)
        except FileNotFoundError:
            fd, now, st = None, None, None
        if fd is not None:
            try:
                st = os.fstat(fd)
                now = _read_open(fd, path, max(LIMIT, len(expected or b"")))
            finally:
                os.close(fd)
        if expected is not None and now != expected:
            raise Changed("the file changed while patchkit worked on it (another program or patchkit "
                          "wrote it); nothing of it was written", Location(str(path)),
                          "run the command again; it plans from the file as it is now")
        _replace(dfd, path.name, data, st)
    finally:
        os.close(dfd)
    for pyc in compiled_copies(path):
        with contextlib.suppress(OSError):
            pyc.unlink()


def compiled_copies(path: Path) -> list:
    """The compiled copies of ``path`` (``__pycache__/STEM.*.pyc``) a write deletes: all but those git tracks."""
    path = Path(path)
    stale = sorted(path.parent.glob(f"__pycache__/{path.stem}.*.pyc"))
    if stale and gitrepo.work_tree(path) is not None:  # os.path only; git only inside a git work tree
        stale = _untracked(stale)
    return stale


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


def _replace(dfd: int, name: str, data: bytes, st: Optional[os.stat_result]) -> None:
    """Write ``data`` to a new file in the folder ``dfd`` and rename it over ``name``, keeping its mode and owner
    (``st``); the new file is removed on any failure (a full disk, a file size limit)."""
    tmp = f".{name}.{os.getpid()}.{time.monotonic_ns()}.patchkit-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=dfd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
            os.fchmod(fd, st.st_mode & 0o7777 if st else 0o644)
            if st is not None and (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
                with contextlib.suppress(OSError):
                    os.fchown(fd, st.st_uid, st.st_gid)
            made = os.fstat(fd)
        finally:
            os.close(fd)
        now = os.stat(tmp, dir_fd=dfd, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != (made.st_dev, made.st_ino):  # someone put another file in its place
            tmp = ""  # not ours to remove
            raise Changed("the new file patchkit wrote was replaced before it could take the file's name; nothing "
                          "was written", Location(name), "check who writes in that folder, then run the command again")
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
        raise
    with contextlib.suppress(OSError):
        os.fsync(dfd)


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
    import tempfile  # here: status and diff, which only read, need none of its random names

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
