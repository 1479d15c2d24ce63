"""The files `patchkit collect` writes: DEST's journal and every write into DEST.

The journal, ``DEST/.patchkit-collect``: its first line names the kind and
format; each later line records a file of DEST with its size, sha256, source
and node.  Lines are appended and synced one by one, so a run that was killed
leaves at most a cut-off last line, which the next run ignores.  A line is at
most :data:`LINE_MAX` bytes, read or written.

DEST itself is reached once, by :func:`open_dest` (:func:`patchkit.core.reach.folder`:
no link another user owns followed on the way, a DEST that was missing when
checked made new), and held open as a :class:`Dest`: every path in DEST is
reached from that descriptor one folder at a time, each opened with
``O_NOFOLLOW``, every file is created new (``O_EXCL``), and each part of a
path must be a safe file name (:func:`patchkit.core.manifest.safe_name`): DEST
swapped for a link after the check, a link planted in DEST, or a name with
``..``, cannot send a write outside it.  Any ``OSError`` becomes a
:class:`CaptureError` naming the file and what to do (:func:`failed`).
A capture's files are read through :mod:`patchkit.traces.inside`.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from typing import Any, BinaryIO, Dict, List, NamedTuple, Optional, Tuple

from patchkit.traces.captures import CaptureError
from patchkit.core.confined import open_regular
from patchkit.core.errors import Location
from patchkit.core.reach import Dangling, explain, folder as reach_folder
from patchkit.core.manifest import safe_name

JOURNAL = ".patchkit-collect"
FORMAT = 1
LINE_MAX = 64 << 10  # bytes of one journal line: an entry names two paths, each far below this
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class Dest(NamedTuple):
    """DEST as collect writes it: its path (for messages) and its folder, opened once, every name reached from it."""

    path: str
    fd: int


def open_dest(path: str, new: bool = False) -> Optional[Dest]:
    """DEST opened (:func:`patchkit.core.reach.folder`); None when it does not exist.  ``new``: DEST (and any folder
    above it that is missing) is made now; one that appeared since it was found missing is refused."""
    try:
        return Dest(path, reach_folder(path, create=new, new=new))
    except FileNotFoundError as exc:
        if new or isinstance(exc, Dangling):
            raise failed(exc, path) from None
        return None
    except FileExistsError:
        raise CaptureError("it appeared after patchkit looked, made by someone else; nothing was written",
                           Location(path), "collect into a new folder of your own") from None
    except OSError as exc:
        raise failed(exc, path) from None


def failed(exc: OSError, path: str, done: str = "nothing was written") -> CaptureError:
    """An OSError met at ``path`` as an error naming the file and what to do."""
    what, hint = explain(exc, path)
    return CaptureError(f"{what}; {done}", Location(exc.filename if isinstance(exc.filename, str) else path), hint)


def read(dest: Dest) -> Dict[str, Dict[str, Any]]:
    """What an earlier collect into ``dest`` recorded (dest path -> entry); a DEST that is not one is refused."""
    path = os.path.join(dest.path, JOURNAL)
    names = os.listdir(dest.fd)
    if JOURNAL not in names:
        if names:
            raise CaptureError(f"{dest.path} already holds files that patchkit collect did not write",
                               Location(dest.path), "choose a new or empty folder for DEST; nothing was written")
        return {}
    entries: Dict[str, Dict[str, Any]] = {}
    lines = _lines(dest, path)
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            if number == len(lines):  # the last line of a run that was killed while writing it
                continue
            raise CaptureError(f"line {number} of the journal is not JSON", Location(path, number),
                               "move DEST aside and collect into a new folder") from None
        if number == 1:
            if not isinstance(entry, dict) or entry.get("kind") != "patchkit-collect":
                raise CaptureError("not a patchkit collect journal", Location(path, 1), "choose a new folder for DEST")
            if not isinstance(entry.get("format"), int) or entry["format"] > FORMAT:
                raise CaptureError(f"written by a newer patchkit (journal format {str(entry.get('format'))[:20]}; "
                                   f"this one reads {FORMAT})", Location(path, 1),
                                   "collect with that patchkit, or into a new folder")
            continue
        if isinstance(entry, dict) and isinstance(entry.get("file"), str):
            entries[entry["file"]] = entry
    return entries


def _lines(dest: Dest, path: str) -> List[bytes]:
    """The journal's lines, each at most LINE_MAX bytes; a link in its place or a longer line is refused."""
    try:
        fd = open_regular(JOURNAL, dir_fd=dest.fd)
    except OSError as exc:
        raise CaptureError(f"cannot read the journal: {_why(path, exc)}", Location(path),
                           "move DEST aside and collect into a new folder") from None
    lines = []
    with os.fdopen(fd, "rb") as handle:
        while True:
            line = handle.readline(LINE_MAX + 1)
            if not line:
                return lines
            if len(line) > LINE_MAX:
                raise CaptureError(f"line {len(lines) + 1} of the journal is longer than {LINE_MAX} bytes: "
                                   "patchkit writes none so long", Location(path, len(lines) + 1),
                                   "move DEST aside and collect into a new folder")
            lines.append(line)


def append(dest: Dest, entry: Dict[str, Any]) -> None:
    """Add one entry, on disk before the next file is copied."""
    line = (json.dumps(entry, sort_keys=True) + "\n").encode("utf-8", "backslashreplace")
    path = os.path.join(dest.path, JOURNAL)
    if len(line) > LINE_MAX:
        raise CaptureError(f"the journal entry of {str(entry.get('file'))[:200]} is longer than {LINE_MAX} bytes",
                           Location(path), "collect that capture from a folder with shorter paths")
    try:
        fd = os.open(JOURNAL, os.O_WRONLY | os.O_APPEND | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0), dir_fd=dest.fd)
    except OSError as exc:
        raise CaptureError(f"cannot write the journal: {_why(path, exc)}", Location(path),
                           "move DEST aside and collect into a new folder") from None
    with os.fdopen(fd, "wb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CaptureError("the journal is not a regular file", Location(path), "move DEST aside and collect "
                                                                                    "into a new folder")
        try:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        except OSError as exc:
            raise failed(exc, path, "the copies before it are kept") from None


def start(dest: Dest) -> None:
    """The journal's first line, in a DEST that has none (never replacing one, never through a link)."""
    try:
        fd = os.open(JOURNAL, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666, dir_fd=dest.fd)
    except FileExistsError:
        return
    except OSError as exc:
        raise failed(exc, os.path.join(dest.path, JOURNAL)) from None
    with os.fdopen(fd, "wb") as handle:
        try:
            handle.write(b'{"kind": "patchkit-collect", "format": %d}\n' % FORMAT)
            handle.flush()
        except OSError as exc:
            raise failed(exc, os.path.join(dest.path, JOURNAL)) from None


# ---------------------------------------------------------------- paths in DEST


def parts_of(rel: str) -> List[str]:
    """The parts of a path relative to DEST; refused unless each is a safe file name."""
    parts = rel.split("/")
    if not rel or any(p != safe_name(p) for p in parts):
        raise CaptureError(f"{rel[:300]!r} is not a safe path inside DEST", None,
                           "this is a bug in patchkit collect: report it; nothing was written outside DEST")
    return parts


def folder(dest: Dest, rel: str, create: bool = True) -> Optional[int]:
    """DEST/rel opened as a folder (its fd; close it), each part made if missing when ``create``, none a link.

    None when a part is missing and ``create`` is false.
    """
    fd = os.dup(dest.fd)
    here = dest.path
    try:
        for part in parts_of(rel) if rel else []:
            here = os.path.join(here, part)
            if create:
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if create:
                    raise
                os.close(fd)
                return None
            os.close(fd)
            fd = inner
    except OSError as exc:
        os.close(fd)
        raise CaptureError(f"{_why(here, exc)}; nothing was written there", Location(here),
                           "DEST holds something patchkit collect did not make there: move it aside, or collect "
                           "into a new folder") from None
    return fd


def what_is(dest: Dest, rel: str) -> Tuple[str, int, str]:
    """(kind, size, sha256) of DEST/rel, never following a link: kind is missing, file, folder or other (one that
    cannot be read too)."""
    parts = parts_of(rel)
    fd = folder(dest, "/".join(parts[:-1]), create=False)
    if fd is None:
        return "missing", -1, ""
    try:
        try:
            st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return "missing", -1, ""
        if not stat.S_ISREG(st.st_mode):
            return ("folder" if stat.S_ISDIR(st.st_mode) else "other"), -1, ""
        with os.fdopen(open_regular(parts[-1], dir_fd=fd), "rb") as handle:
            return ("file",) + digest(handle)
    except OSError:
        return "other", -1, ""
    finally:
        os.close(fd)


def create(dirfd: int, name: str) -> BinaryIO:
    """A new file ``name`` in the folder ``dirfd``, opened for writing; a file (or link) already there is refused."""
    return os.fdopen(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666, dir_fd=dirfd), "wb")


def digest(handle: BinaryIO, chunk: int = 8 << 20) -> Tuple[int, str]:
    """(size, sha256) of what ``handle`` reads from where it is."""
    h, size = hashlib.sha256(), 0
    while True:
        data = handle.read(chunk)
        if not data:
            return size, h.hexdigest()
        size += len(data)
        h.update(data)


def write_new(dest: Dest, rel: str, name: str, data: bytes) -> Optional[str]:
    """``DEST/rel/name.json`` written whole (a temporary file, then a link); None if one is there already."""
    fd = folder(dest, rel)
    tmp = f".patchkit-{os.getpid()}-{os.urandom(4).hex()}.tmp"
    try:
        try:
            os.stat(f"{name}.json", dir_fd=fd, follow_symlinks=False)
            return None
        except FileNotFoundError:
            pass
        with create(fd, tmp) as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.link(tmp, f"{name}.json", src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
        return os.path.join(dest.path, *parts_of(rel), f"{name}.json")
    except FileExistsError:  # written meanwhile by another collect into the same DEST
        return None
    except OSError as exc:
        raise failed(exc, os.path.join(dest.path, *parts_of(rel), f"{name}.json"),
                     "the traces are copied: run the same collect again to write it") from None
    finally:
        try:
            os.unlink(tmp, dir_fd=fd)
        except OSError:
            pass
        os.close(fd)


def _why(path: str, exc: OSError) -> str:
    if os.path.islink(path):
        return "it is a symbolic link, which patchkit collect never follows"
    return exc.strerror or str(exc)
