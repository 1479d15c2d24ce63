"""Run the patchkit command line in this process, slowed down or killed at a chosen write boundary.

    python tests/reliability/crashpoints.py apply RECIPE --root DIR ...

The arguments are patchkit's own.  Every rename patchkit does (``os.replace``
or ``os.rename``: the last step of an atomic write of a backup, the ledger or
a target file) is a *boundary* with two sides, numbered from 1 in order:
``2k-1`` is right before the k-th rename, ``2k`` right after it.  The crash
tests use that to put a SIGKILL exactly between two steps of a write, which
random delays only hit by luck.

Environment (all optional):

``RELIABILITY_TRACE=FILE``
    append one line per boundary, ``<n> <before|after> <destination path>``,
    so a test can see how many boundaries a command has and where each is.
``RELIABILITY_KILL_AT=N``
    SIGKILL this process at boundary N: a real kill, nothing is cleaned up.
``RELIABILITY_SLOW=SECONDS``
    sleep this long at every boundary, so that kills at random instants land
    inside the write phase more often.

Nothing in patchkit is changed: only the ``os`` functions are wrapped, and
the command runs through ``patchkit.cli.commands:main`` exactly as ``python -m
patchkit`` runs it.
"""

from __future__ import annotations

import os
import signal
import sys
import time

_TRACE = os.environ.get("RELIABILITY_TRACE")
_KILL_AT = int(os.environ.get("RELIABILITY_KILL_AT") or 0)
_SLOW = float(os.environ.get("RELIABILITY_SLOW") or 0)
_count = 0


def _boundary(side: str, dst) -> None:
    global _count
    _count += 1
    if _TRACE:
        with open(_TRACE, "a", encoding="utf-8") as handle:
            handle.write(f"{_count} {side} {os.fspath(dst)}\n")
    if _KILL_AT and _count == _KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)
    if _SLOW:
        time.sleep(_SLOW)


def _wrap(real):
    def renamed(src, dst, *args, **kwargs):
        folder = kwargs.get("dst_dir_fd")  # a target is renamed relative to its folder's descriptor
        where = os.path.join(os.readlink(f"/proc/self/fd/{folder}"), dst) if folder is not None else dst
        _boundary("before", where)
        result = real(src, dst, *args, **kwargs)
        _boundary("after", where)
        return result

    return renamed


os.replace = _wrap(os.replace)
os.rename = _wrap(os.rename)


if __name__ == "__main__":
    from patchkit.cli.commands import main

    sys.argv[0] = "patchkit"
    main()
