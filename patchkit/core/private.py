"""The state folder is the user's own: ``$PATCHKIT_HOME`` is created 0700, its files 0600, and checked on read.

patchkit runs as root on shared nodes.  A state folder someone else can
write is a way to make it put planted bytes into site-packages (a ledger and
a backup that ``revert`` restores) or run planted code.  So, as git's
``safe.directory`` and OpenSSH's ``StrictModes`` do, every command that reads
the state checks the folder, and each file it reads there: owned by the user
running patchkit, a plain file or folder (no symbolic link inside), and not
writable by group or others.  Anything else is refused with one error that
names the path and the fix.  The folders above ``$PATCHKIT_HOME`` are not
checked (a sticky ``/tmp`` is fine: nobody else can rename a folder there).

Standard library only: the runtime inside the training job uses it too.
"""

from __future__ import annotations

import os
import stat
from typing import Optional

from patchkit.core.errors import LedgerError, Location

FOLDER_MODE = 0o700
FILE_MODE = 0o600
OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


class NotPrivate(LedgerError):
    """A state folder or file another user owns or can write: refused, never read."""

    title = "state folder not private"


def home() -> str:
    """``$PATCHKIT_HOME``; default ``$XDG_STATE_HOME/patchkit`` (``~/.local/state/patchkit``)."""
    env = os.environ.get("PATCHKIT_HOME")
    if env:
        return os.path.expanduser(env)
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "patchkit")


def problem(st: os.stat_result, folder: bool) -> Optional[str]:
    """Why a file (or folder) with this ``lstat`` may not be trusted, or None."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link (patchkit writes no links in its state folder)"
    if folder != stat.S_ISDIR(st.st_mode) or not (folder or stat.S_ISREG(st.st_mode)):
        return "is not a folder" if folder else "is not a plain file"
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not by you (uid {os.geteuid()})"
    if st.st_mode & OTHERS_WRITE:
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def refuse(path: str, why: str, folder: bool) -> NotPrivate:
    if "owned by" in why:
        fix = ("use a state folder of your own (set PATCHKIT_HOME to a folder you own), or, if it is yours, "
               f"`chown -R {os.geteuid()} {path}`")
    elif "writable" in why:
        fix = f"`chmod {'go-w' if folder else '600'} {path}` if its content is yours, else move it aside"
    else:
        fix = "move it aside; patchkit writes its state folder itself"
    return NotPrivate(f"refusing to use the state {'folder' if folder else 'file'}: it {why}", Location(path), fix)


def check(path: str, folder: bool = False) -> bool:
    """True when ``path`` exists and may be trusted, False when it does not exist; else :class:`NotPrivate`.

    ``$PATCHKIT_HOME`` itself may be a link to a folder of the user's (its target is checked); nothing inside may.
    """
    try:
        st = os.stat(path) if folder and path == home() else os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise refuse(path, f"cannot be read ({exc.strerror})", folder) from None
    why = problem(st, folder)
    if why is not None:
        raise refuse(path, why, folder)
    return True


def ensure(path: Optional[str] = None) -> str:
    """The state folder (or a folder inside it), created 0700 where missing, then checked; returns its path."""
    path = path or home()
    try:
        os.makedirs(path, mode=FOLDER_MODE, exist_ok=True)
    except OSError as exc:
        check(path, folder=True)  # a folder that is there but may not be used says why
        raise LedgerError(f"cannot create the state folder: {exc.strerror}", Location(path),
                          "set PATCHKIT_HOME to a folder you can write") from None
    check(path, folder=True)
    return path


def read(path: str, limit: int) -> Optional[bytes]:
    """The bytes of a state file, after the checks, at most ``limit`` of them; None when there is none.

    Opened without following a link, and checked on the open file itself, so it cannot be swapped in between.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if os.path.islink(path):
            raise refuse(path, problem(os.lstat(path), False) or "is a symbolic link", False) from None
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
