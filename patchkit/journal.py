"""The journal of `patchkit collect`: ``DEST/.patchkit-collect``, one JSON line per file copied and checked.

The first line names the kind and format; each later line records a file of
DEST with its size, sha256, source and node.  Lines are appended and synced
one by one, so a run that was killed leaves at most a cut-off last line,
which the next run ignores.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict

from .captures import CaptureError
from .errors import Location

JOURNAL = ".patchkit-collect"
FORMAT = 1


def read(dest: str) -> Dict[str, Dict[str, Any]]:
    """What an earlier collect into ``dest`` recorded (dest path -> entry); a DEST that is not one is refused."""
    if not os.path.exists(dest):
        return {}
    if not os.path.isdir(dest):
        raise CaptureError(f"{dest} exists and is not a folder", Location(dest), "choose a new folder for DEST")
    path = os.path.join(dest, JOURNAL)
    if not os.path.exists(path):
        if os.listdir(dest):
            raise CaptureError(f"{dest} already holds files that patchkit collect did not write", Location(dest),
                               "choose a new or empty folder for DEST; nothing was written")
        return {}
    entries: Dict[str, Dict[str, Any]] = {}
    with open(path, "rb") as handle:
        lines = handle.read().decode("utf-8", "replace").splitlines()
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
        except ValueError:
            if number == len(lines):  # the last line of a run that was killed while writing it
                continue
            raise CaptureError(f"line {number} of the journal is not JSON", Location(path, number),
                               "move DEST aside and collect into a new folder") from None
        if number == 1:
            if entry.get("kind") != "patchkit-collect":
                raise CaptureError("not a patchkit collect journal", Location(path, 1), "choose a new folder for DEST")
            if not isinstance(entry.get("format"), int) or entry["format"] > FORMAT:
                raise CaptureError(f"written by a newer patchkit (journal format {entry.get('format')}; this one "
                                   f"reads {FORMAT})", Location(path, 1),
                                   "collect with that patchkit, or into a new folder")
            continue
        if isinstance(entry, dict) and "file" in entry:
            entries[entry["file"]] = entry
    return entries


def append(dest: str, entry: Dict[str, Any]) -> None:
    """Add one entry, on disk before the next file is copied."""
    with open(os.path.join(dest, JOURNAL), "ab") as handle:
        handle.write((json.dumps(entry, sort_keys=True) + "\n").encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())


def start(dest: str) -> None:
    """The journal's first line, in a DEST that has none (never replacing one)."""
    with open(os.path.join(dest, JOURNAL), "xb") as handle:
        handle.write(b'{"kind": "patchkit-collect", "format": %d}\n' % FORMAT)
