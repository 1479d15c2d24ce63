"""A request folder taken back from the job's user and removed, whatever that user does meanwhile.

The channel (``out/``) of a request folder is the job's user's (:mod:`patchkit.attach.channel`): she may fill it
with anything, nest folders thousands deep, and keep making files in it while it is removed.  :func:`remove`
therefore first takes the folder back: the request folder goes 0700 (nobody else reaches ``out/`` by its path
any more, and the agent, which polls it by path, sees its channel go and restores), and each folder under it is
made this user's and 0700 through its descriptor before it is listed (``fchown``, ``fchmod``: a process of hers
still inside it can no longer add to it).  Then one bounded walk, without recursion, relative to descriptors
opened ``O_NOFOLLOW|O_DIRECTORY`` (climbing back through ``..``, checked to be the folder it came from): every
entry unlinked, every folder removed once empty.  At most :data:`ENTRIES` entries and :data:`DEPTH` folders
deep; past that, what is left is said in one line, and only this user can reach it.
"""

from __future__ import annotations

import errno
import os
from typing import List, Tuple

from patchkit.attach.channel import DIRECTORY, OUT, Unusable, open_base

ENTRIES = 1_000_000  # a request folder holds three files; hers, as many as she made before it was taken
DEPTH = 10_000
RETRIES = 1000  # a folder that is not empty when it is removed (its agent wrote into it meanwhile): listed again
FOLDER = DIRECTORY | getattr(os, "O_NONBLOCK", 0)


class Bound(Exception):
    """The walk stops here: why, in a few words."""


def withdraw(base: str) -> None:
    """The request taken away (everything of ``base`` but ``out/``; only this user writes there): code still
    queued in the job finds nothing to run.  Never raises."""
    try:
        fd = open_base(base)
    except (OSError, Unusable):
        return
    try:
        for name in os.listdir(fd):
            if name != OUT:
                try:
                    os.unlink(name, dir_fd=fd)
                except OSError:
                    pass
    except OSError:
        pass
    finally:
        os.close(fd)


def remove(base: str) -> str:
    """``base`` taken back and removed; "" when it is gone, else one line saying what is left and why.
    Never raises."""
    parent, name = os.path.split(os.path.normpath(base))
    try:
        parent_fd = os.open(parent or os.sep, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return "" if exc.errno == errno.ENOENT else f"{base}: cannot be removed ({exc.strerror})"
    try:
        try:
            fd = os.open(name, DIRECTORY, dir_fd=parent_fd)
        except FileNotFoundError:
            return ""
        except OSError as exc:
            return f"{base}: not removed ({exc.strerror})"
        try:
            if os.fstat(fd).st_uid != os.geteuid():
                return f"{base}: not removed: it is not this user's folder"
            os.fchmod(fd, 0o700)
            budget = [ENTRIES, RETRIES]
            while True:
                clear(fd, budget)
                try:
                    os.rmdir(name, dir_fd=parent_fd)
                    return ""
                except FileNotFoundError:
                    return ""
                except OSError as exc:  # something was made meanwhile (by this user: nobody else can)
                    again(exc, budget)
        except (Bound, OSError) as exc:
            who = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
            why = exc.strerror if isinstance(exc, OSError) else str(exc)
            return (f"{base}: left behind ({why}); only {who} can reach it (mode 0700): remove it with "
                    f"`rm -rf {base}`")
        finally:
            os.close(fd)
    finally:
        os.close(parent_fd)


def take(fd: int) -> None:
    """The folder open as ``fd`` made this user's and 0700: nobody else adds to it any more."""
    if os.geteuid() == 0:
        os.fchown(fd, 0, os.getegid())
    os.fchmod(fd, 0o700)


def children(fd: int, budget: List[int]) -> List[str]:
    """Every entry of the folder ``fd`` unlinked as it is listed; the names of its folders."""
    folders = []
    with os.scandir(fd) as entries:
        for entry in entries:
            budget[0] -= 1
            if budget[0] < 0:
                raise Bound(f"more than {ENTRIES} entries")
            try:
                os.unlink(entry.name, dir_fd=fd)
            except (IsADirectoryError, PermissionError):  # a folder (EISDIR; EPERM on some systems)
                folders.append(entry.name)
            except FileNotFoundError:
                pass
    return folders


def _identity(fd: int) -> Tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def clear(top: int, budget: List[int]) -> None:
    """Everything in the folder open as ``top`` removed, without recursion; :class:`Bound` past the bounds."""
    fd = os.dup(top)
    try:
        take(fd)
        frames = [("", _identity(fd), children(fd, budget))]  # (name, identity, folders still to remove)
        device = frames[0][1][0]
        while True:
            name, identity, pending = frames[-1]
            if pending:
                child = pending.pop()
                if len(frames) > DEPTH:
                    raise Bound(f"more than {DEPTH} folders deep")
                try:
                    inner = os.open(child, FOLDER, dir_fd=fd)
                except FileNotFoundError:
                    continue
                except OSError:  # not a folder after all
                    _unlink(child, fd)
                    continue
                if _identity(inner)[0] != device:
                    os.close(inner)
                    raise Bound("another file system is mounted inside")
                os.close(fd)
                fd = inner
                take(fd)
                frames.append((child, _identity(fd), children(fd, budget)))
                continue
            if len(frames) == 1:
                return
            up = os.open("..", FOLDER, dir_fd=fd)
            if _identity(up) != frames[-2][1]:
                os.close(up)
                raise Bound("a folder was moved while it was removed")
            os.close(fd)
            fd = up
            frames.pop()
            try:
                os.rmdir(name, dir_fd=fd)
            except FileNotFoundError:
                pass
            except OSError as exc:
                again(exc, budget)
                frames[-1][2].append(name)  # made meanwhile (by this user: nobody else can): once more
    finally:
        os.close(fd)


def again(exc: OSError, budget: List[int]) -> None:
    """A folder not removed: listed once more if it was only not empty, at most :data:`RETRIES` times in all."""
    budget[1] -= 1
    if exc.errno != errno.ENOTEMPTY or budget[1] < 0:
        raise Bound(f"{exc.strerror}, {RETRIES - budget[1]} time(s)")


def _unlink(name: str, fd: int) -> None:
    try:
        os.unlink(name, dir_fd=fd)
    except OSError:
        pass
