"""The files `patchkit collect` touches: DEST's journal, every write into DEST, every read of a capture.

The journal, ``DEST/.patchkit-collect``: its first line names the kind and
format; each later line records a file of DEST with its size, sha256, source
and node.  Lines are appended and synced one by one, so a run that was killed
leaves at most a cut-off last line, which the next run ignores.  A line is at
most :data:`LINE_MAX` bytes, read or written.

Every path in DEST is reached from DEST one folder at a time, each opened
with ``O_NOFOLLOW``, every file is created new (``O_EXCL``), and each part of
a path must be a safe file name (:func:`patchkit.core.manifest.safe_name`): a link
planted in DEST, or a name with ``..``, cannot send a write outside it.
A capture's file is read only through :func:`open_inside` (a regular file,
not a link, inside its folder once open); :func:`confine` refuses, where the
files are, captures whose manifest or traces are links or lead out.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from typing import Any, BinaryIO, Dict, List, Optional, Sequence, Tuple

from patchkit.traces.captures import Capture, CaptureError
from patchkit.core.confined import Refused, leads_out, open_regular, within
from patchkit.core.errors import Location
from patchkit.core.manifest import safe_name
from patchkit.core.printable import printable

JOURNAL = ".patchkit-collect"
FORMAT = 1
LINE_MAX = 64 << 10  # bytes of one journal line: an entry names two paths, each far below this
LINK = -2  # the size a folder's listing gives a symbolic link or special file: never followed, never copied
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_MOVE = "a trace is a regular file inside its capture's folder: move this one aside, then collect again"


def read(dest: str) -> Dict[str, Dict[str, Any]]:
    """What an earlier collect into ``dest`` recorded (dest path -> entry); a DEST that is not one is refused."""
    if not os.path.exists(dest):
        return {}
    if not os.path.isdir(dest):
        raise CaptureError(f"{dest} exists and is not a folder", Location(dest), "choose a new folder for DEST")
    path = os.path.join(dest, JOURNAL)
    if not os.path.lexists(path):
        if os.listdir(dest):
            raise CaptureError(f"{dest} already holds files that patchkit collect did not write", Location(dest),
                               "choose a new or empty folder for DEST; nothing was written")
        return {}
    entries: Dict[str, Dict[str, Any]] = {}
    lines = _lines(path)
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


def _lines(path: str) -> List[bytes]:
    """The journal's lines, each at most LINE_MAX bytes; a link in its place or a longer line is refused."""
    try:
        fd = open_regular(path)
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


def append(dest: str, entry: Dict[str, Any]) -> None:
    """Add one entry, on disk before the next file is copied."""
    line = (json.dumps(entry, sort_keys=True) + "\n").encode("utf-8", "backslashreplace")
    path = os.path.join(dest, JOURNAL)
    if len(line) > LINE_MAX:
        raise CaptureError(f"the journal entry of {str(entry.get('file'))[:200]} is longer than {LINE_MAX} bytes",
                           Location(path), "collect that capture from a folder with shorter paths")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | _NOFOLLOW)
    except OSError as exc:
        raise CaptureError(f"cannot write the journal: {_why(path, exc)}", Location(path),
                           "move DEST aside and collect into a new folder") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def start(dest: str) -> None:
    """The journal's first line, in a DEST that has none (never replacing one, never through a link)."""
    fd = os.open(os.path.join(dest, JOURNAL), os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666)
    with os.fdopen(fd, "wb") as handle:
        handle.write(b'{"kind": "patchkit-collect", "format": %d}\n' % FORMAT)


# ---------------------------------------------------------------- paths in DEST


def parts_of(rel: str) -> List[str]:
    """The parts of a path relative to DEST; refused unless each is a safe file name."""
    parts = rel.split("/")
    if not rel or any(p != safe_name(p) for p in parts):
        raise CaptureError(f"{rel[:300]!r} is not a safe path inside DEST", None,
                           "this is a bug in patchkit collect: report it; nothing was written outside DEST")
    return parts


def folder(dest: str, rel: str, create: bool = True) -> Optional[int]:
    """DEST/rel opened as a folder (its fd; close it), each part made if missing when ``create``, none a link.

    None when a part is missing and ``create`` is false.
    """
    fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    here = dest
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


def what_is(dest: str, rel: str) -> Tuple[str, int, str]:
    """(kind, size, sha256) of DEST/rel, never following a link: kind is missing, file, folder or other."""
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


def write_new(dest: str, rel: str, name: str, data: bytes) -> Optional[str]:
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
        return os.path.join(dest, *parts_of(rel), f"{name}.json")
    except FileExistsError:  # written meanwhile by another collect into the same DEST
        return None
    finally:
        try:
            os.unlink(tmp, dir_fd=fd)
        except OSError:
            pass
        os.close(fd)


# ---------------------------------------------------------------- reading a capture


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


def _why(path: str, exc: OSError) -> str:
    if os.path.islink(path):
        return "it is a symbolic link, which patchkit collect never follows"
    return exc.strerror or str(exc)
