"""A target file's compiled copies: apply deletes them, revert puts them back once the source is the original again.

``pip install`` compiles every module it installs (as ``python -m compileall`` does):
``verl/workers/actor/__pycache__/dp_actor.cpython-311.pyc``.  Apply deletes the copies of a file it patches
(:func:`patchkit.state.targetfile.write_source`): Python checks a copy only against the source's size and
modification time, and a patched source that matched both would run the old code.  On a root-owned
site-packages a user's later imports cannot write a new copy, so deleting it is a change revert must undo.

At apply (:func:`back_up`), each copy apply will delete is read as a target is (through folders that are no
links, a plain file, bounded), saved among the ledger's backups, and recorded with its mode and owner and the
source's modification time.  At revert (:func:`put_back`), once the source's bytes are the original's again,
the source gets its modification time back (a copy pip wrote is checked against it) and each copy is written
as a target is (atomically, through no link, its recorded mode and owner).  The record is the ledger's,
checked field by field (:mod:`patchkit.state.ledger_format`: a copy is a name in ``__pycache__`` of that
source, never a path), and a backup is used only when its bytes have the recorded hash.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable, Dict, List, Optional

from patchkit.core.errors import PatchkitError
from patchkit.state import targetfile

LIMIT = 64 << 20  # bytes of one compiled copy read: a copy is a few times smaller than its source


def back_up(path: Path, save: Callable[[bytes], str]) -> Optional[dict]:
    """The record of ``path``'s compiled copies, each saved with ``save`` (the ledger's backup); None for none."""
    path = Path(path)
    files = []
    for pyc in targetfile.compiled_copies(path):
        try:
            data, st = targetfile.read_with_stat(pyc, LIMIT)
        except (OSError, PatchkitError):  # gone, a link, not a plain file, too large: not a copy to put back
            continue
        files.append({"name": pyc.name, "sha256": save(data), "mode": stat.S_IMODE(st.st_mode) & 0o777,
                      "uid": st.st_uid, "gid": st.st_gid})
    if not files:
        return None
    return {"mtime_ns": os.lstat(path).st_mtime_ns, "files": files}


def put_back(path: Path, record: dict, backups: Dict[str, Optional[bytes]]) -> List[str]:
    """Give ``path`` (whose bytes the caller found to be the original's) its modification time back and write its
    compiled copies from ``backups`` (hash -> bytes, None where the backup is missing); the names written."""
    path = Path(path)
    dfd = targetfile.folder_of(path)
    try:
        st = os.stat(path.name, dir_fd=dfd, follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            return []
        os.utime(path.name, ns=(st.st_atime_ns, record["mtime_ns"]), dir_fd=dfd, follow_symlinks=False)
    finally:
        os.close(dfd)
    try:
        cache = targetfile.folder_of(path.parent / "__pycache__" / path.name)
    except (OSError, PatchkitError):  # __pycache__ gone, or now a link: no copy is written there
        return []
    done = []
    try:
        for entry in record["files"]:
            data = backups.get(entry["sha256"])
            if data is not None:
                targetfile.write_in(cache, entry["name"], data, entry["mode"] & 0o777, entry["uid"], entry["gid"])
                done.append(entry["name"])
    finally:
        os.close(cache)
    return done


def put_back_where_original(copies: List[tuple]) -> None:
    """:func:`put_back` for each ``(path, original hash, record, backups)`` whose file holds the original bytes now
    (not when lines no record explains stayed in it); a copy that cannot be written is Python's to write again."""
    import hashlib

    for path, original, record, backups in copies:
        try:
            if hashlib.sha256(targetfile.read_target(Path(path))).hexdigest() == original:
                put_back(Path(path), record, backups)
        except (OSError, PatchkitError):
            continue
