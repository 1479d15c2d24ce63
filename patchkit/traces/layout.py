"""Where each capture's files go in a collect's DEST, and the list of files to copy there.

One folder per capture key, ``<recipe>`` or ``<recipe>.<role>`` (a trace
found without a manifest goes under the name of the folder it was in); torch
traces are named by rank, torch_npu folders keep their names
(:mod:`patchkit.traces.collect` says the whole layout).  Every name from a
manifest or a node becomes a safe file name, never one of collect's own part
files; a folder trace whose listing holds a link, or a path out of it, is
refused before anything is planned.  Nothing here reads a file or writes.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple

from patchkit.core import manifest
from patchkit.core.errors import Location
from patchkit.core.manifest import safe_name
from patchkit.traces.captures import Capture, CaptureError
from patchkit.traces.inside import LINK, shown, within

PART = ".patchkit-part"  # a file being copied: its name in DEST until it is checked


class Item(NamedTuple):
    """One file to copy: where it is (on ``capture.node``), where it goes (relative to DEST)."""

    source: str
    dest: str
    size: int
    capture: int  # index into the plan's captures
    root: str  # the folder the source must be inside: the capture's folder, or the trace folder it is in


def group_of(cap: Capture) -> str:
    """The capture's folder in DEST: ``<recipe>[.<role>]``, or the name of the folder its trace was in."""
    if cap.recipe:
        return safe_name(cap.recipe + (f".{cap.role}" if cap.role else ""))
    return safe_name(os.path.basename(cap.folder.rstrip(os.sep)) or "traces")


def dest_path(dest: str, cap: Capture, trace_name: str) -> str:
    """Where a capture's trace (file or folder) is in DEST."""
    return os.path.join(dest, group_of(cap), dest_name(cap, trace_name))


def dest_name(cap: Capture, trace_name: str) -> str:
    """A trace's name in DEST: torch files get a ``rank<R>_`` prefix (once); npu folders keep torch_npu's name."""
    base = _part(trace_name.split("/")[-1])
    base = base + "_" if base == manifest.FOLDER else base
    if cap.rank is None or base.endswith(manifest.ASCEND_ENDING) or base.startswith(f"rank{cap.rank}_"):
        return base
    return _part(f"rank{cap.rank}_{base}")


def _part(name: str) -> str:
    """One part of a path in DEST: a safe file name, never one collect's own part files use."""
    name = safe_name(name)
    return name + "_" if name.endswith(PART) else name


def screen(cap: Capture, walk, listings: Dict[Tuple[str, str], List[Tuple[str, int]]]) -> str:
    """Why a capture's traces are not copied, whatever node they are on ("" if none); keeps folder listings."""
    where, folder = shown(cap.manifest or cap.folder), os.path.normpath(cap.folder)
    for t in cap.traces:
        if not within(os.path.normpath(t.path), folder):
            return f"{where}: the trace {shown(t.name)} ({shown(t.path)}) is outside the capture's folder " \
                   f"{shown(cap.folder)}: never read"
        if t.kind != "folder":
            continue
        try:
            files = walk(cap, t.path)
        except OSError as exc:
            return f"{shown(t.path)}: cannot list its files ({exc.strerror or exc})"
        if not isinstance(files, list):
            return f"{shown(t.path)}: no list of its files came from {cap.node}"
        for rel, size in files:
            parts = rel.rstrip("/").split("/") if isinstance(rel, str) else [""]
            if size == LINK:
                return f"{shown(f'{t.path}/{rel}')} is a symbolic link or a special file: never followed"
            if not isinstance(size, int) or size < -1 or any(p in ("", ".", "..") or "\0" in p for p in parts):
                return f"{shown(t.path)}: {shown(rel)} is not a file inside it: never read"
        listings[(cap.node, t.path)] = files
    return ""


def plan(captures: Sequence[Capture], walk) -> Tuple[List[Item], List[str]]:
    """The files to copy and notes; ``walk(capture, path)`` lists (relative path, size) of a folder trace's files.

    The same file seen twice (a folder two nodes share) is copied once; two
    different files bound for one name stop the collect.
    """
    items: Dict[str, Item] = {}
    ranks: Dict[Tuple[str, Any], List[str]] = {}
    for index, cap in enumerate(captures):
        group = group_of(cap)
        for t in cap.traces:
            name = f"{group}/{dest_name(cap, t.name)}"
            folder = t.kind == "folder"
            for rel, size in walk(cap, t.path) if folder else [("", t.size)]:
                rel = rel.rstrip("/")
                dest = f"{name}/{'/'.join(_part(p) for p in rel.split('/'))}" if rel else name
                source = os.path.normpath(os.path.join(t.path, rel) if rel else t.path)
                item = Item(source, dest, size, index, t.path if folder else cap.folder)
                other = items.get(dest)
                if other is not None:
                    if (other.size, other.source) != (size, item.source):
                        raise CaptureError(
                            f"two different files would both be {dest}: {shown(other.source)} on "
                            f"{captures[other.capture].node} and {shown(item.source)} on {cap.node}",
                            Location(shown(item.source)), "collect them into two DEST folders, one per source folder")
                    continue
                items[dest] = item
        if cap.rank is not None and cap.traces:
            ranks.setdefault((group, cap.rank), []).append(cap.steps)
    notes = [f"{group}: rank {rank} has {len(steps)} captures (steps {', '.join(steps)}); msprof-analyze cluster "
             f"and Holistic Trace Analysis expect one per rank: move the ones you do not want out of DEST/{group}"
             for (group, rank), steps in sorted(ranks.items(), key=str) if len(steps) > 1]
    return list(items.values()), notes
