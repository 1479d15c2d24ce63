"""The state folder is the user's own: ``$PATCHKIT_HOME`` is created 0700, its files 0600, and checked on use.

patchkit runs as root on shared nodes.  A state folder someone else can
write, or reach, is a way to make it put planted bytes into site-packages (a
ledger and a backup that ``revert`` restores), run planted code, or write
into a folder of root's through a link.  So, as git's ``safe.directory`` and
OpenSSH's ``StrictModes`` do, every command and the runtime open the state
folder with :func:`open_state`: walked from ``/`` without following a link
another user controls (:mod:`patchkit.core.folders`), owned by the user
running patchkit and not writable by group or others, and each folder and
file inside opened through its parent's handle, never following a link, and
checked on the open handle.  Anything else is refused with one error that
names the path and the fix.

Standard library only: the runtime inside the training job uses it too.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Optional

from patchkit.core import folders
from patchkit.core.confined import Refused
from patchkit.core.errors import LedgerError, Location
from patchkit.core.folders import PRIVATE, Folder, Untrusted

FOLDER_MODE = 0o700
FILE_MODE = 0o600
OTHERS_WRITE = folders.OTHERS_WRITE


class NotPrivate(LedgerError):
    """A state folder or file another user owns, can write or can redirect: refused, never used."""

    title = "state folder not private"


def home() -> str:
    """``$PATCHKIT_HOME``; default ``$XDG_STATE_HOME/patchkit`` (``~/.local/state/patchkit``)."""
    env = os.environ.get("PATCHKIT_HOME")
    if env:
        return os.path.expanduser(env)
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "patchkit")


def problem(st: os.stat_result, folder: bool) -> Optional[str]:
    """Why a file (or folder) with this ``lstat`` (or ``fstat``) may not be trusted, or None."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link (patchkit writes no links in its state folder)"
    if folder:
        return folders.folder_problem(st, PRIVATE)
    if not stat.S_ISREG(st.st_mode):
        return "is a folder" if stat.S_ISDIR(st.st_mode) else "is not a plain file"
    return folders.owner_problem(st, root_too=False) or (
        f"is writable by group or others (mode {folders.mode(st)})" if st.st_mode & OTHERS_WRITE else None)


def refuse(path: str, why: str, folder: bool, state: Optional[str] = None) -> NotPrivate:
    """The error for ``path``; ``state``: the state folder, when ``path`` is a folder or link on the way to it."""
    if state is not None:
        fix = ("set PATCHKIT_HOME to a folder of your own reached through folders only you or root can write "
               "(a sticky one such as /tmp is fine) and through no link of another user's")
        return NotPrivate(f"refusing to use the state folder {state} under it: it {why}", Location(path), fix)
    if "symbolic link" in why and "patchkit writes no" not in why and "patchkit makes none" not in why:
        fix = ("set PATCHKIT_HOME to a folder of your own, reached through no link of another user's (a link of "
               "yours may lead to it from a folder only you can write)")
    elif "owned by" in why:
        fix = ("use a state folder of your own (set PATCHKIT_HOME to a folder you own), or, if it is yours, "
               f"`chown -R {os.geteuid()} {path}`")
    elif "writable" in why:
        fix = f"`chmod {'go-w' if folder else '600'} {path}` if its content is yours, else move it aside"
    else:
        fix = "move it aside; patchkit writes its state folder itself"
    return NotPrivate(f"refusing to use the state {'folder' if folder else 'file'}: it {why}", Location(path), fix)


def open_state(*names: str, base: Optional[str] = None, create: bool = False) -> Optional[Folder]:
    """The state folder (``base``, default :func:`home`), or the folder ``names`` lead to inside it, open and
    checked; made 0700 where missing when ``create``, else None when missing.  :class:`NotPrivate` otherwise."""
    base = base or home()
    try:
        folder = folders.open_folder(base, PRIVATE, create=create, mode=FOLDER_MODE)
    except FileNotFoundError as exc:
        if create:  # a link of yours to a missing folder: never made through a link
            raise refuse(str(exc.filename or base), exc.strerror or "does not exist", True) from None
        return None
    except Untrusted as exc:
        on_the_way = exc.above or (exc.path != base and "symbolic link" in exc.why)
        raise refuse(exc.path, exc.why, True, base if on_the_way else None) from None
    except OSError as exc:
        raise _unusable(base, exc, create) from None
    for name in names:
        try:
            inner = folder.sub(name, create=create, mode=FOLDER_MODE)
        except FileNotFoundError:
            return None
        except Untrusted as exc:
            raise refuse(exc.path, exc.why, True) from None
        except OSError as exc:
            raise _unusable(folder.join(name), exc, create) from None
        finally:
            folder.close()
        folder = inner
    return folder


def _unusable(path: str, exc: OSError, create: bool) -> LedgerError:
    if create and not os.path.lexists(path):
        return unwritable(path, exc, "cannot create the state folder")
    return refuse(path, f"cannot be read ({exc.strerror or exc})", True)


def read(folder: Folder, name: str, limit: int) -> Optional[bytes]:
    """The bytes of the state file ``name`` in ``folder``, checked, at most ``limit`` of them; None when there is
    none.  Opened without following a link, and checked on the open file itself."""
    path = folder.join(name)
    try:
        fd = folder.open(name, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except Untrusted as exc:
        raise refuse(path, exc.why, False) from None
    except OSError as exc:
        raise refuse(path, f"cannot be read ({exc.strerror})", False) from None
    with os.fdopen(fd, "rb") as handle:
        why = problem(os.fstat(fd), False)
        if why is not None:
            raise refuse(path, why, False)
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise LedgerError(f"the state file is larger than patchkit ever writes ({limit} bytes)", Location(path),
                          "move it aside; it was not written by patchkit")
    return data


def write(folder: Folder, name: str, data: bytes, what: str = "cannot write the state file") -> None:
    """The state file ``name`` in ``folder`` replaced by ``data`` whole (0600), or a located error saying ``what``
    and nothing of it left (a full disk, a file size limit, a folder that refuses the write)."""
    try:
        folder.write(name, data, FILE_MODE)
    except Refused as exc:  # a link or something not a plain file in its place: never written through or over
        raise refuse(folder.join(name), str(exc), False) from None
    except OSError as exc:
        raise unwritable(folder.join(name), exc, what) from None


def unwritable(path: str, exc: OSError, what: str = "cannot write the state file") -> LedgerError:
    """The located error for a state write that failed (``exc``), with what to do about it."""
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG):
        fix = ("free space on the file system of the state folder (or raise the quota or file size limit), "
               "or set PATCHKIT_HOME to a folder on another one; then run the command again")
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = "make the state folder writable for you, or set PATCHKIT_HOME to a folder you can write"
    else:
        fix = "check the file system of the state folder, or set PATCHKIT_HOME to another folder"
    return LedgerError(f"{what}: {exc.strerror or exc}", Location(path), fix)
