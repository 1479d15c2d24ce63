"""Folders patchkit keeps its own files in: reached through nothing another user controls, checked on each handle.

patchkit runs as root on shared nodes.  A folder or link on the way to the
state folder, or to a capture's ``patchkit-manifests/``, that another user
controls could lead root's writes anywhere: a link planted in a
world-writable folder, a folder renamed away and replaced by one.  So
:func:`open_folder` walks as :func:`patchkit.core.reach.folder` does (from
``/``, one name at a time, each opened ``O_NOFOLLOW | O_DIRECTORY`` relative
to the one before), with :class:`Checked` rules made on each open handle:

- a folder on the way: root's or yours, and writable by nobody else, or
  sticky (in a sticky folder such as ``/tmp`` nobody else can rename or
  remove what is yours);
- a symbolic link on the way, ``$PATCHKIT_HOME`` itself included: followed
  only when it is root's or yours **and** the folder holding it is root's or
  yours and writable by nobody else (then nobody else can change where it
  leads); its target is walked the same way;
- the folder asked for: :data:`PRIVATE` (the state folder and every folder
  in it: yours, writable by nobody else) or :data:`OWNED` (a capture's
  manifests: root's or yours, writable by nobody else).

A missing folder is made with the mode asked for, whatever the umask, and
checked like any other.  Inside the :class:`Folder` it returns, names are
opened through its handle and never through a link, and a file is written
whole by :func:`patchkit.core.reach` (an ``O_EXCL`` temporary file, synced,
then renamed, or linked under a free name); nothing half-written is left.

Standard library only: the runtime inside the training job uses it.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import List, Optional

from patchkit.core import reach
from patchkit.core.confined import Refused

PRIVATE, OWNED = "private", "owned"
OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW


class Untrusted(Refused):
    """A folder or link another user controls (or could change), or a name that is not what patchkit makes."""

    located = True  # its text names the place (see patchkit.runtime.process.reason)

    def __init__(self, path: str, why: str, above: bool = False):
        super().__init__(errno.EPERM, why, path)
        self.path, self.why, self.above = path, why, above  # above: a folder on the way, not the one asked for

    def __str__(self) -> str:
        return f"{self.path}: {self.why}"


def mode(st: os.stat_result) -> str:
    return f"{stat.S_IMODE(st.st_mode):04o}"


def owner_problem(st: os.stat_result, root_too: bool) -> Optional[str]:
    """Why the owner of ``st`` may not be trusted: you only, or (``root_too``) you or root."""
    me = os.geteuid()
    if st.st_uid == me or (root_too and st.st_uid == 0):
        return None
    return f"is owned by uid {st.st_uid}, not by you (uid {me})" + (" or root" if root_too and me else "")


def folder_problem(st: os.stat_result, rule: Optional[str]) -> Optional[str]:
    """Why a folder (``fstat`` of its handle) may not be used: ``rule`` None for a folder on the way."""
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    why = owner_problem(st, root_too=rule != PRIVATE)
    if why:
        return why
    if st.st_mode & OTHERS_WRITE and (rule is not None or not st.st_mode & stat.S_ISVTX):
        return f"is writable by group or others{'' if rule else ' and not sticky'} (mode {mode(st)})"
    return None


def link_problem(link: os.stat_result, holder: os.stat_result) -> Optional[str]:
    """Why a symbolic link (its ``lstat``) in the folder ``holder`` (its ``fstat``) may not be followed."""
    why = owner_problem(link, root_too=True)
    if why:
        return "is a symbolic link " + why.replace("is owned", "owned", 1)
    if holder.st_uid not in (0, os.geteuid()) or holder.st_mode & OTHERS_WRITE:
        return (f"is a symbolic link and others can write the folder holding it (mode {mode(holder)}, "
                f"uid {holder.st_uid}): they could change where it leads")
    return None


class Checked(reach.Rules):
    """The rules of the module's docstring, for the folder asked for under ``rule``; folders made ``mode``."""

    def __init__(self, rule: str, mode: int):
        self.rule, self.mode = rule, mode

    def folder(self, st: os.stat_result, shown: str, last: bool) -> None:
        why = folder_problem(st, self.rule if last else None)
        if why:
            raise Untrusted(shown, why, above=not last)

    def link(self, st: os.stat_result, holder: os.stat_result, shown: str) -> None:
        why = link_problem(st, holder)
        if why:
            raise Untrusted(shown, why)


class Folder:
    """An open, checked folder: names inside it are opened through its handle (``dir_fd``), never through a link."""

    def __init__(self, fd: int, path: str):
        self.fd, self.path = fd, path

    def __enter__(self) -> "Folder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def join(self, name: str) -> str:
        return os.path.join(self.path, name)

    def sub(self, name: str, rule: str = PRIVATE, create: bool = True, mode: int = 0o700) -> "Folder":
        """The folder ``name`` in this one (made ``mode`` when missing and ``create``), checked by ``rule``.
        FileNotFoundError when it is missing and not to be made; :class:`Untrusted` for a link or a non-folder."""
        fd = self._open_dir(name, create, mode)
        try:
            Checked(rule, mode).folder(os.fstat(fd), self.join(name), last=True)
        except BaseException:
            os.close(fd)
            raise
        return Folder(fd, self.join(name))

    def _open_dir(self, name: str, create: bool, mode: int) -> int:
        made = False
        for _ in range(3):
            try:
                fd = os.open(name, _DIR, dir_fd=self.fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, mode, dir_fd=self.fd)
                    made = True
                except FileExistsError:
                    pass  # made meanwhile: opened and checked as any other
                continue
            except OSError as exc:
                raise self._untrusted(name, exc) from None
            if made and os.fstat(fd).st_uid == os.geteuid():
                os.fchmod(fd, mode)  # ours, just made: the mode asked for, whatever the umask
            return fd
        raise Untrusted(self.join(name), "keeps changing while patchkit opens it")

    def open(self, name: str, flags: int, mode: int = 0o600) -> int:
        """``os.open`` of ``name`` in this folder, never following a link (:class:`Untrusted` for one)."""
        try:
            return os.open(name, flags | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0), mode, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.EMLINK):
                raise
            raise self._untrusted(name, exc) from None

    def _untrusted(self, name: str, exc: OSError) -> OSError:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            return exc
        try:
            link = stat.S_ISLNK(os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode)
        except OSError:
            link = False
        return Untrusted(self.join(name), "is a symbolic link (patchkit makes none)" if link else "is not a folder")

    def names(self) -> List[str]:
        return os.listdir(self.fd)

    def unlink(self, name: str) -> None:
        os.unlink(name, dir_fd=self.fd)

    def write(self, name: str, data: bytes, mode: int = 0o600, replace: bool = True) -> str:
        """``name`` holding ``data``, written whole with ``mode`` whatever the umask (:func:`patchkit.core.reach`);
        ``replace`` False: never over an existing file (``name-2`` then); returns the name written.  A link in
        its place is refused, never written through; on an error (a full disk) nothing of it is left."""
        written = reach._write(self.fd, name, self.join(name), data, mode, replace)
        try:
            os.fsync(self.fd)  # the new name itself on disk
        except OSError:
            pass
        return written


def open_folder(path: str, rule: str = PRIVATE, create: bool = False, mode: int = 0o700) -> Folder:
    """The folder at ``path``, walked from ``/`` with :class:`Checked` rules (see the module's docstring).

    :class:`Untrusted` names the folder or link that may not be used (``above``: one on the way);
    FileNotFoundError when a folder is missing (or a link of yours leads to none) and ``create`` is False;
    another OSError when one cannot be made.
    """
    path = os.path.abspath(path)
    try:
        fd = reach.folder(path, create=create, rules=Checked(rule, mode))
    except (Untrusted, FileNotFoundError):
        raise
    except Refused as exc:  # a link another user owns: reach's own rule
        raise Untrusted(str(exc.filename), exc.strerror) from None
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            raise Untrusted(str(exc.filename), "is not a folder") from None
        if exc.errno == errno.ELOOP:
            raise Untrusted(str(exc.filename), "leads through more than 40 symbolic links, or became one as "
                                               "patchkit opened it") from None
        raise
    return Folder(fd, path)
