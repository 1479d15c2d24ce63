"""Reaching a folder, and writing a file in it, without following a link another user made.

patchkit runs as root, and what it writes (``collect``'s DEST, ``diff -o
FILE``) may lie under folders other users can write: a shared ``/tmp``, an
outputs folder.  There, on a node where ``fs.protected_symlinks`` is 0,
anyone can plant a symbolic link, or swap a folder for one between a check
and the write.  So:

* :func:`folder` reaches a folder one name at a time from ``/`` (or the
  working directory), each opened with ``O_DIRECTORY | O_NOFOLLOW``
  relative to the one before (``dir_fd``).  A symbolic link on the way is
  followed only when you or root own it, as the kernel's
  ``fs.protected_symlinks`` does in a sticky folder, here everywhere; any
  other is refused, naming its owner.  Everything is then done relative to
  the descriptor it returns: a name swapped after that changes nothing.
* :func:`write_file` writes a file whole in such a folder: a new temporary
  file (``O_CREAT | O_EXCL | O_NOFOLLOW``), written and synced, its device
  and inode (``fstat`` after the open) compared with the name's before it is
  renamed over the name.  A link (or anything but a regular file) in the
  name's place is refused, never written through; on any failure (a full
  disk, ``EFBIG`` past ``ulimit -f``) the temporary file is removed first.
* :func:`explain` turns any ``OSError`` of these into what went wrong, at
  which path, and what to do.

:class:`Rules` adds checks to the walk, made on each open descriptor: the
state folder's (:mod:`patchkit.core.folders`) also require every folder on
the way to be root's or yours and writable by nobody else (or sticky), and
a link's folder to be writable by nobody else.

Standard library only.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import List, Optional, Tuple

from patchkit.core.confined import Refused

MAX_LINKS = 40  # links followed on the way to one folder (the kernel's own bound)
_DIRECTORY = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
HINTS = {
    errno.ENOSPC: "free some space on that file system, or write to another",
    errno.EDQUOT: "your disk quota there is used up: free some space, or write elsewhere",
    errno.EFBIG: "the file is larger than this process may write (`ulimit -f`): raise the limit, or write elsewhere",
    errno.EACCES: "choose a folder you can write",
    errno.EPERM: "choose a folder you can write",
    errno.EROFS: "that file system is read-only: choose another",
    errno.ENOTDIR: "a part of that path is a file, not a folder: choose another path",
    errno.EEXIST: "move it aside, or choose another path",
    errno.ELOOP: "too many links on the way: name the folder they lead to",
}


class Dangling(FileNotFoundError):
    """A link (one you or root own) on the way to a folder leads to nothing."""


class Rules:
    """What a walk requires beyond what :func:`folder` always does (a link followed only when you or root own it):
    nothing, for ``collect``'s DEST and ``diff -o``.  A method raises :class:`Refused` for what it refuses."""

    mode: Optional[int] = None  # of a folder the walk makes: None, 0o777 less the umask; else exactly this

    def folder(self, st: os.stat_result, shown: str, last: bool) -> None:
        """A folder reached (``fstat`` of its open descriptor); ``last``: the one asked for, not one on the way."""

    def link(self, st: os.stat_result, holder: os.stat_result, shown: str) -> None:
        """A link about to be followed (its ``lstat``), in the folder ``holder`` (``fstat`` of its descriptor)."""


def folder(path: str, create: bool = False, new: bool = False, rules: Optional[Rules] = None) -> int:
    """A descriptor of the folder ``path`` (close it), reached as the module says; OSError (or Refused) if not.

    ``create``: the folders of ``path`` that are missing are made (never one a link leads to).
    ``new``: its last folder must be made now (FileExistsError when something is already there).
    ``rules``: checks made on each folder and link on the way (:class:`Rules`).
    """
    rules = rules or Rules()
    todo: List[Tuple[str, str]] = [(n, "") for n in _names(path)]  # (name, the link it came from; "": path's own)
    fd = os.open("/" if path.startswith("/") else ".", _DIRECTORY)
    here, links = "/" if path.startswith("/") else "", 0
    try:
        rules.folder(os.fstat(fd), here or ".", not todo)
        while todo:
            name, link = todo.pop(0)
            shown = os.path.join(here, name) if here else name
            try:
                fd, here, links = _step(fd, name, link, shown, todo, links, create, new and not link and
                                        not any(not other for _n, other in todo), rules)
            except OSError as exc:
                if exc.filename != name:  # one of ours, naming its path already
                    raise
                raise OSError(exc.errno, exc.strerror, shown) from None  # the path as given, not the name alone
        return fd
    except BaseException:
        os.close(fd)
        raise


def _step(fd: int, name: str, link: str, shown: str, todo: List[Tuple[str, str]], links: int, create: bool,
          new: bool, rules: Rules) -> Tuple[int, str, int]:
    """One name of the walk: (the folder's descriptor, its path, the links followed so far); a link's target is put
    in front of ``todo``.  ``new``: this is the last folder, which must be made now."""
    made = False
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if new:
            raise FileExistsError(errno.EEXIST, "is already there", shown)
    except FileNotFoundError:
        if link:
            raise Dangling(errno.ENOENT, f"is a symbolic link to a missing folder ({shown})", link) from None
        if not create:
            raise FileNotFoundError(errno.ENOENT, "does not exist", shown) from None
        try:
            os.mkdir(name, 0o777 if rules.mode is None else rules.mode, dir_fd=fd)
            made = True
        except FileExistsError:
            if new:
                raise FileExistsError(errno.EEXIST, "appeared while patchkit was making it", shown) from None
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        if st.st_uid not in (0, os.geteuid()):
            raise Refused(errno.EPERM, f"is a symbolic link owned by uid {st.st_uid}, not by you (uid {os.geteuid()}) "
                                       "or root: never followed", shown)
        if links >= MAX_LINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), shown)
        rules.link(st, os.fstat(fd), shown)
        target = os.readlink(name, dir_fd=fd)
        here = os.path.dirname(shown) or ""
        if target.startswith("/"):
            os.close(fd)
            fd, here = os.open("/", _DIRECTORY), "/"
        todo[:0] = [(n, link or shown) for n in _names(target)]
        return fd, here, links + 1
    inner = os.open(name, _DIRECTORY, dir_fd=fd)  # ENOTDIR for a file; ELOOP if a link took its place meanwhile
    try:
        st = os.fstat(inner)
        if made and rules.mode is not None and st.st_uid == os.geteuid():
            os.fchmod(inner, rules.mode)  # just made, and ours: the mode asked for, whatever the umask
            st = os.fstat(inner)
        rules.folder(st, shown, not todo)
    except BaseException:
        os.close(inner)
        raise
    os.close(fd)
    return inner, shown, links


def _names(path: str) -> List[str]:
    return [n for n in path.split("/") if n and n != "."]


def write_file(path: str, data: bytes) -> None:
    """``path`` holds ``data``, written whole (a temporary file renamed over it); never through a link."""
    head, name = os.path.split(path)
    if name in ("", ".", ".."):
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file name", path)
    fd = folder(head or ".")
    try:
        _write(fd, name, path, data)
    except OSError as exc:
        if exc.filename == path or isinstance(exc, Refused):
            raise
        raise OSError(exc.errno, exc.strerror, path) from None
    finally:
        os.close(fd)


def _write(fd: int, name: str, path: str, data: bytes, mode: Optional[int] = None, replace: bool = True) -> str:
    """``name`` in the folder ``fd`` written whole; returns the name written.  ``mode``: exactly this mode (else
    0o666 less the umask).  ``replace`` False: never over an existing file: ``name-2`` (before its ending) and so on.
    """
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise Refused(errno.ELOOP, f"is a symbolic link (owned by uid {st.st_uid}): patchkit writes through no link "
                                   "and replaces none", path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise Refused(errno.EINVAL, "is not a regular file: never written over", path)
    tmp = f".{name[:80]}.{os.getpid()}-{os.urandom(4).hex()}.patchkit-tmp"
    out = os.open(tmp, _NEW, 0o666 if mode is None else mode, dir_fd=fd)
    done = False
    try:
        made = os.fstat(out)
        if mode is not None:
            os.fchmod(out, mode)
        with os.fdopen(out, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        now = os.stat(tmp, dir_fd=fd, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != (made.st_dev, made.st_ino):
            raise Refused(errno.EBUSY, "was being written when another file took its temporary name: nothing was "
                                       "written", path)
        if replace:
            os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
            done = True
            return name
        return _link_new(fd, tmp, name, path)
    finally:
        if not done:  # failed, or linked under its own name: the temporary name goes
            try:
                os.unlink(tmp, dir_fd=fd)
            except OSError:
                pass


def _link_new(fd: int, tmp: str, name: str, path: str) -> str:
    stem, dot, ending = name.rpartition(".") if "." in name.lstrip(".") else (name, "", "")
    for n in range(1, 1000):
        target = name if n == 1 else f"{stem}-{n}{dot}{ending}"
        try:
            os.link(tmp, target, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)  # fails where a name is
        except FileExistsError:
            continue
        return target
    raise FileExistsError(errno.EEXIST, f"holds 999 files named as {name}", path)


def explain(exc: OSError, path: str) -> Tuple[str, str]:
    """(what went wrong, naming the path it happened at; what to do) for an OSError met writing ``path``."""
    where = exc.filename if isinstance(exc.filename, str) and exc.filename else path
    why = str(exc) if isinstance(exc, Refused) else exc.strerror or str(exc)
    if isinstance(exc, Refused) and exc.errno == errno.EPERM:
        hint = "name the folder it points to if you trust it, or choose a folder of your own"
    elif isinstance(exc, Refused):
        hint = "move it aside (someone else may have put it there), or choose another path"
    elif isinstance(exc, Dangling):
        hint = f"create the folder the link points to (`readlink -f {where}`), or choose another path"
    elif isinstance(exc, FileNotFoundError):
        hint = f"create it first (`mkdir -p {where}`), or choose another path"
    else:
        hint = HINTS.get(exc.errno or 0, "check that path and its folders, or choose another")
    return f"{where} {why}" if isinstance(exc, (Refused, FileNotFoundError, FileExistsError)) else \
        f"{where}: {why}", hint
