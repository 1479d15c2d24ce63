"""Reading what others wrote without leaving its folder: no link followed out, no path climbing out, bounded size.

Manifests and trace folders may come from other users or other nodes.  As
Python's ``tarfile`` data filter (PEP 706) does for an archive's members, a
path a manifest names must stay inside the capture's folder once resolved,
and is never a symbolic link; a file is read without following a link, only
if it is a plain file, and only up to a bound.

Standard library only.
"""

from __future__ import annotations

import os
import stat


class Refused(OSError):
    """A file that is a link, not a plain file, or larger than the bound: never read."""


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


def read_bounded(path: str, limit: int) -> bytes:
    """The bytes of the plain file ``path``, opened without following a link; :class:`Refused` past ``limit``."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Refused(f"{path} is not a plain file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise Refused(f"more than {limit >> 20} MiB (patchkit writes a few KiB)" if limit >= 1 << 20 else
                      f"more than {limit} bytes")
    return data
