"""A capture's files, read where they are: never a link, never a FIFO, never outside the capture's folder.

``patchkit collect`` reads a capture's file only through :func:`open_inside`
(:func:`patchkit.core.confined.open_regular`, then the open file's own path,
as the kernel gives it, must be inside its folder); :func:`walk_local` lists a
folder trace marking each link or special file (never followed, never
copied); :func:`confine` refuses, where the files are (over Ray, on their
node), captures whose manifest or traces are links or lead out.  Text from
others' files is :func:`shown` escaped in every message.
"""

from __future__ import annotations

import os
import stat
from typing import Any, BinaryIO, List, Optional, Sequence, Tuple

from patchkit.core.confined import Refused, leads_out, open_regular, within
from patchkit.core.errors import Location
from patchkit.core.printable import printable
from patchkit.traces.captures import Capture, CaptureError

LINK = -2  # the size a folder's listing gives a symbolic link or special file: never followed, never copied
_MOVE = "a trace is a regular file inside its capture's folder: move this one aside, then collect again"


def shown(text: Any, limit: int = 1000) -> str:
    """``text`` for a message: control characters escaped, its middle left out beyond ``limit`` characters."""
    text = str(text)
    return printable(text if len(text) <= limit else f"{text[:limit // 2]}...{text[-(limit // 2):]}")


def open_inside(path: str, root: str) -> BinaryIO:
    """``path`` opened for reading: refused unless it is a regular file, not a link (as
    :func:`patchkit.core.confined.open_regular` opens it: a FIFO never blocks), and inside ``root`` resolved."""
    try:
        fd = open_regular(path)
    except OSError as exc:
        why = str(exc) if isinstance(exc, Refused) else f"cannot be read ({exc.strerror})"
        raise CaptureError(f"{shown(path)} {why}", Location(shown(path)), _MOVE) from None
    try:
        real = _opened(fd, path)
        if real is None or not within(real, os.path.realpath(root)):
            raise CaptureError(f"{shown(path)} leads outside {shown(root)}: never read", Location(shown(path)), _MOVE)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _opened(fd: int, path: str) -> Optional[str]:
    """Where the open file ``fd`` is, as the kernel says (Linux), else ``path`` resolved if it is that file."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = os.path.realpath(path)
        st, there = os.fstat(fd), os.stat(real)
        return real if (st.st_dev, st.st_ino) == (there.st_dev, there.st_ino) else None


def refused_here(cap: Capture) -> str:
    """Why a capture on this machine is not read (a trace is a link or leads out); "" if none.  A manifest that
    is a link or too big is already a broken capture (:func:`patchkit.core.manifest.read`)."""
    named = f"{shown(cap.manifest)}: the trace " if cap.manifest else ""
    for t in cap.traces:
        why = leads_out(t.path, cap.folder)
        if why:
            return f"{named}{shown(t.path)} {why}"
    return ""


def confine(caps: Sequence[Capture]) -> List[Capture]:
    """The captures, each refused one with its reason as its problem and without its manifest's data (run where
    the files are: over Ray, what goes back to the driver)."""
    out = [c if c.problem else c._replace(problem=refused_here(c)) for c in caps]
    return [c._replace(data=None) if c.problem and c.data is not None else c for c in out]


def walk_local(cap: Optional[Capture], path: str) -> List[Tuple[str, int]]:
    """(relative path, size) of each file under ``path``, (relative path + "/", -1) of each folder, and
    (relative path, LINK) of each symbolic link or special file (never followed)."""
    out = []
    for top, dirs, files in os.walk(path):
        dirs.sort()
        for d in list(dirs):
            if os.path.islink(os.path.join(top, d)):
                dirs.remove(d)
                files.append(d)
        out += [(os.path.relpath(os.path.join(top, d), path).replace(os.sep, "/") + "/", -1) for d in dirs]
        for f in sorted(files):
            full = os.path.join(top, f)
            st = os.lstat(full)
            out.append((os.path.relpath(full, path).replace(os.sep, "/"),
                        st.st_size if stat.S_ISREG(st.st_mode) else LINK))
    return out
