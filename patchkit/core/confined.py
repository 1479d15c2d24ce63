"""Reading what others wrote without leaving its folder: no link followed out, no path climbing out, bounded size.

Manifests and trace folders may come from other users or other nodes.  As
Python's ``tarfile`` data filter (PEP 706) does for an archive's members, a
path a manifest names must stay inside the capture's folder once resolved,
and is never a symbolic link.

Every file patchkit reads and did not write itself is opened here, by
:func:`open_regular` (or :func:`open_bounded` and :func:`read_bounded` over
it): ``O_NOFOLLOW`` (a link in its place is refused, never followed),
``O_NONBLOCK`` (a FIFO planted in its place opens at once instead of waiting
for a writer), then ``S_ISREG`` on ``fstat`` of the open descriptor (a FIFO, a
device or a folder is refused; checking the open file, not the name, leaves
no moment to swap it).  What is read is then bounded by the bytes actually
read, never by the size ``stat`` reports; a gzip file's decompressed bytes are
counted against the same bound, and may not exceed :data:`RATIO` times the
compressed bytes read (a gzip bomb is refused after a few MiB, whatever it
would expand to).

Standard library only.
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
from typing import BinaryIO, Optional

RATIO = 100  # decompressed / compressed bytes: profilers' JSON gives some 15; zlib reaches 1032 on one repeated byte
SLACK = 16 << 20  # decompressed bytes always allowed, whatever the ratio (the start of a small file)
_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class Refused(OSError):
    """A file that is a link, not a regular file, or larger than the bound: never read (further).

    Made as ``Refused(errno.X, reason)``; ``str()`` is the reason alone (no path: the caller names the file).
    """

    def __str__(self) -> str:
        return str(self.strerror)


def within(path: str, root: str) -> bool:
    """``path`` strictly inside ``root`` (both absolute and normalised or resolved alike)."""
    return os.path.isabs(path) and os.path.isabs(root) and path != root and \
        os.path.commonpath([path, root]) == root


def leads_out(path: str, folder: str) -> str:
    """Why ``path`` may not be read as a part of the capture in ``folder`` (a link, or outside it once resolved);
    "" when it may."""
    if os.path.islink(path):
        return "is a symbolic link: never followed"
    if not within(os.path.realpath(path), os.path.realpath(folder)):
        return f"leads outside the capture's folder {folder}: never read"
    return ""


def safe_name(name: str, limit: int = 200) -> str:
    """``name`` as one harmless file name: only ``A-Za-z0-9._-`` (so no separator, control character or NUL),
    no ``..``, never hidden or ``.``, at most ``limit`` characters (a longer one keeps its start and its ending,
    joined by a hash of the whole name, so ``.pt.trace.json`` or ``_ascend_pt`` survives)."""
    import hashlib

    text = str(name)
    safe = re.sub(r"[^A-Za-z0-9._-]|\.\.+", "_", text)  # no ".." anywhere, not even inside a name
    safe = "_" + safe[1:] if safe.startswith(".") else safe or "_"
    if len(safe) > limit:
        tag = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        tail = min(80, limit // 3)
        safe = f"{safe[: limit - tail - 14]}_{tag}_{safe[-tail:]}"
    return safe


def size_text(limit: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if limit >= 1 << shift:
            return f"{limit / (1 << shift):g} {unit}"
    return f"{limit} bytes"


def open_regular(path: str, dir_fd: Optional[int] = None) -> int:
    """A descriptor of the regular file ``path`` (relative to ``dir_fd`` if given), opened for reading.

    :class:`Refused` when ``path`` is a symbolic link, a FIFO, a socket, a device or a folder; it never blocks.
    Any other failure (missing, no permission) is the plain :class:`OSError`.
    """
    try:
        fd = os.open(path, _READ, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(errno.ELOOP, "is a symbolic link: never followed") from None
        raise
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return fd
    os.close(fd)
    raise Refused(errno.EINVAL, f"is not a regular file ({kind(mode)}): never read")


def kind(mode: int) -> str:
    """What a file of ``mode`` (``st_mode``) is, in a few words: "a folder", "a FIFO", "a symbolic link"..."""
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a symbolic link"
            if stat.S_ISLNK(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode)
            or stat.S_ISBLK(mode) else "a file")


def read_bounded(path: str, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`); :class:`Refused` past ``limit``."""
    with os.fdopen(open_regular(path), "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise Refused(errno.EFBIG, f"more than {size_text(limit)}" +
                      (" (patchkit writes a few KiB)" if limit <= 64 << 20 else ""))
    return data


def open_bounded(path: str, limit: int, gz: bool = False, dir_fd: Optional[int] = None) -> BinaryIO:
    """The regular file ``path`` (:func:`open_regular`) as a buffered binary file that gives at most ``limit`` bytes.

    ``gz``: its bytes decompressed, which count against ``limit`` and may not exceed :data:`RATIO` times the
    compressed bytes read (plus :data:`SLACK`).  Reading past either bound raises :class:`Refused`.  ``.raw.consumed``
    says the bytes of the file read so far (compressed, for ``gz``).
    """
    raw = os.fdopen(open_regular(path, dir_fd), "rb")
    try:
        return io.BufferedReader(_Bounded(raw, limit, gz), 1 << 16)
    except BaseException:
        raw.close()
        raise


class _Bounded(io.RawIOBase):
    """What :func:`open_bounded` reads through: the bytes (decompressed, for gzip) counted and bounded as they come."""

    def __init__(self, raw: BinaryIO, limit: int, gz: bool):
        super().__init__()
        self.file, self.limit, self.gz, self.count = raw, limit, gz, 0
        if gz:
            import gzip

            self.source = gzip.GzipFile(fileobj=raw, mode="rb")
        else:
            self.source = raw

    def readable(self) -> bool:
        return True

    @property
    def consumed(self) -> int:
        return self.file.tell()

    def readinto(self, buffer) -> int:
        got = self.source.readinto(memoryview(buffer)[: self.limit + 1 - self.count])
        self.count += got
        if self.count > self.limit:
            raise Refused(errno.EFBIG, f"holds more than {size_text(self.limit)}" +
                          (" once decompressed" if self.gz else "") + ": more than patchkit reads of such a file")
        if self.gz and self.count > RATIO * self.file.tell() + SLACK:
            raise Refused(errno.EFBIG, f"decompresses to more than {RATIO} times its size: a profiler's trace "
                                       "compresses some 15 times; this is not one")
        return got

    def close(self) -> None:
        if not self.closed:
            try:
                if self.source is not self.file:
                    self.source.close()
            finally:
                self.file.close()
                super().close()
