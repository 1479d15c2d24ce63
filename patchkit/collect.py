"""Copy captures into one folder laid out for the analysis tools; never overwrite, verify, resume.

Layout of DEST (one folder per capture key, ``<recipe>`` or ``<recipe>.<role>``;
a trace found without a manifest goes under the name of the folder it was in)::

    DEST/.patchkit-collect                     the journal: what was copied, from where, with its sha256
    DEST/<recipe>[.<role>]/rank<R>_<name>.pt.trace.json       torch traces, named by rank (HTA, TensorBoard)
    DEST/<recipe>[.<role>]/<name>_ascend_pt/                   npu captures as torch_npu named them
                                                               (msprof-analyze cluster -d DEST/<recipe>)
    DEST/<recipe>[.<role>]/patchkit-manifests/<name>.json     each capture's manifest, with where it came from

Every file is written to ``<name>.patchkit-part``, checked against the
source's size and sha256 (computed where the file is, independently of the
copy), then linked to its name (a link never replaces a file) and recorded in
the journal.  A file already at its name is never replaced: if the journal or
its bytes say it is the same capture it is kept, otherwise the collect stops
before writing anything.  A run that was killed leaves at most ``.patchkit-part``
files, which the next run starts again from the beginning.  A capture's
manifest is written after its traces: a manifest in DEST means the capture
is complete.

The bytes come from a :class:`Source`: this machine's files, or a Ray node's
(:mod:`patchkit.gather`).  Nothing here prints.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from . import journal, manifest
from .captures import Capture, CaptureError, unique
from .errors import Location

PART = ".patchkit-part"
CHUNK = 8 << 20  # bytes per read: the most one file's copy holds in memory (times the reads in flight over Ray)


class Source:
    """Reads the files of one node.  This one reads this machine's."""

    node = ""

    def chunks(self, path: str, size: int, chunk: int) -> Iterator[bytes]:
        with open(path, "rb") as handle:
            while True:
                data = handle.read(chunk)
                if not data:
                    return
                yield data

    def digest(self, path: str) -> Tuple[int, str]:
        return file_digest(path)


def file_digest(path: str, chunk: int = CHUNK) -> Tuple[int, str]:
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        while True:
            data = handle.read(chunk)
            if not data:
                return size, h.hexdigest()
            size += len(data)
            h.update(data)


class Item(NamedTuple):
    """One file to copy: where it is (on ``capture.node``), where it goes (relative to DEST)."""

    source: str
    dest: str
    size: int
    capture: int  # index into the plan's captures


class Copied(NamedTuple):
    dest: str  # absolute
    source: str
    node: str
    size: int
    state: str  # copied | already there
    capture: int  # index into Result.captures


class Result(NamedTuple):
    dest: str
    captures: Tuple[Capture, ...]  # the captures collected
    files: Tuple[Copied, ...]
    manifests: Tuple[str, ...]  # the manifests written in DEST this time
    groups: Tuple[str, ...]  # the capture folders in DEST
    notes: Tuple[str, ...]
    skipped: Tuple[Capture, ...]  # with --skip-broken: the captures left out


# ---------------------------------------------------------------- planning


def group_of(cap: Capture) -> str:
    if cap.recipe:
        return cap.recipe + (f".{cap.role}" if cap.role else "")
    return os.path.basename(cap.folder.rstrip(os.sep)) or "traces"


def dest_path(dest: str, cap: Capture, trace_name: str) -> str:
    """Where a capture's trace (file or folder) is in DEST."""
    return os.path.join(dest, group_of(cap), dest_name(cap, trace_name))


def dest_name(cap: Capture, trace_name: str) -> str:
    """A trace's name in DEST: torch files get a ``rank<R>_`` prefix (once); npu folders keep torch_npu's name."""
    base = trace_name.split("/")[-1]
    if cap.rank is None or base.endswith(manifest.ASCEND_ENDING) or base.startswith(f"rank{cap.rank}_"):
        return base
    return f"rank{cap.rank}_{base}"


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
            files = walk(cap, t.path) if t.kind == "folder" else [("", t.size)]
            for rel, size in files:
                dest = f"{name}/{rel.rstrip('/')}" if rel else name
                item = Item(os.path.join(t.path, rel) if rel else t.path, dest, size, index)
                other = items.get(dest)
                if other is not None:
                    if other.size != size:
                        raise CaptureError(
                            f"two different files would both be {dest}: {other.source} on "
                            f"{captures[other.capture].node} and {item.source} on {cap.node}",
                            Location(item.source), "collect them into two DEST folders, one per source folder")
                    continue
                items[dest] = item
        if cap.rank is not None and cap.traces:
            ranks.setdefault((group, cap.rank), []).append(cap.steps)
    notes = [f"{group}: rank {rank} has {len(steps)} captures (steps {', '.join(steps)}); msprof-analyze cluster "
             f"and Holistic Trace Analysis expect one per rank: move the ones you do not want out of DEST/{group}"
             for (group, rank), steps in sorted(ranks.items(), key=str) if len(steps) > 1]
    return list(items.values()), notes


def walk_local(cap: Optional[Capture], path: str) -> List[Tuple[str, int]]:
    """(relative path, size) of each file under ``path``, and (relative path + "/", -1) of each folder."""
    out = []
    for top, dirs, files in os.walk(path):
        dirs.sort()
        out += [(os.path.relpath(os.path.join(top, d), path).replace(os.sep, "/") + "/", -1) for d in dirs]
        for f in sorted(files):
            full = os.path.join(top, f)
            out.append((os.path.relpath(full, path).replace(os.sep, "/"), os.lstat(full).st_size))
    return out


def collect_here(dest: str, folders: Sequence[str] = (), cwd: Optional[str] = None, chunk: Optional[int] = None,
                 skip_broken: bool = False) -> Result:
    """The captures under ``folders`` (or the default folders, see :func:`patchkit.captures.search`) into ``dest``."""
    from .captures import search

    caps = search(folders, cwd)
    source = Source()
    return collect(dest, caps, {c.node: source for c in caps}, walk_local, chunk, skip_broken)


# ---------------------------------------------------------------- copying


def collect(dest: str, captures: Sequence[Capture], sources: Dict[str, Source], walk, chunk: Optional[int] = None,
            skip_broken: bool = False) -> Result:
    """Copy ``captures`` into ``dest``.  ``sources``: node -> :class:`Source`; ``walk`` as for :func:`plan`."""
    dest = os.path.abspath(dest)
    chunk = chunk or CHUNK
    inside = os.path.realpath(dest) + os.sep  # DEST under a searched folder: its copies are not captures to collect
    captures = unique([c for c in captures if not os.path.realpath(c.where).startswith(inside)])
    broken = [c for c in captures if c.problem]
    if broken and not skip_broken:
        first = broken[0]
        more = f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
        raise CaptureError(f"{first.problem}{more}; nothing was copied", None,  # the problem names its file
                           "move the broken capture aside, or pass --skip-broken to collect the others")
    good = [c for c in captures if not c.problem]
    if not good:
        raise CaptureError("no capture to collect", Location(dest), "see `patchkit traces` for what was found")
    recorded = journal.read(dest)
    items, notes = plan(good, walk)
    # everything that could stop the collect is checked before the first byte is written
    keep = _check_existing(dest, items, good, sources, recorded, chunk)
    os.makedirs(dest, exist_ok=True)
    if not os.path.exists(os.path.join(dest, journal.JOURNAL)):
        journal.start(dest)
    done: List[Copied] = []
    for item in items:
        cap = good[item.capture]
        target = os.path.join(dest, *item.dest.split("/"))
        if item.size < 0:  # a folder of a torch_npu capture (empty ones too)
            os.makedirs(target, exist_ok=True)
            continue
        if item.dest in keep:
            done.append(Copied(target, item.source, cap.node, item.size, "already there", item.capture))
            if item.dest not in recorded:
                journal.append(dest, keep[item.dest])
            continue
        entry = _copy(sources[cap.node], item, target, chunk)
        journal.append(dest, dict(entry, **{"node": cap.node}))
        done.append(Copied(target, item.source, cap.node, item.size, "copied", item.capture))
    written = [m for m in (_manifest(dest, cap) for cap in good) if m]
    groups = sorted({group_of(c) for c in good})
    return Result(dest, tuple(good), tuple(done), tuple(written), tuple(groups), tuple(notes),
                  tuple(c for c in captures if c.problem))


def _check_existing(dest: str, items: Sequence[Item], caps: Sequence[Capture], sources: Dict[str, Source],
                    recorded: Dict[str, Dict[str, Any]], chunk: int) -> Dict[str, Dict[str, Any]]:
    """The files already in DEST that are these captures' (kept); any other file in the way stops the collect."""
    keep: Dict[str, Dict[str, Any]] = {}
    for item in items:
        target = os.path.join(dest, *item.dest.split("/"))
        if item.size < 0 or not os.path.lexists(target):
            continue
        cap = caps[item.capture]
        size, digest = file_digest(target, chunk) if os.path.isfile(target) else (-1, "")
        known = recorded.get(item.dest)
        if known is not None and (known.get("size"), known.get("sha256")) == (size, digest) and size == item.size:
            keep[item.dest] = known  # copied and checked by an earlier run, and unchanged since
            continue
        src_size, src_digest = sources[cap.node].digest(item.source)
        if (size, digest) != (src_size, src_digest):
            raise CaptureError(f"{target} is already there and differs from {item.source} on {cap.node}",
                               Location(target), "it is not replaced: collect into a new folder, or move that file "
                                                 "aside; nothing was written")
        keep[item.dest] = {"file": item.dest, "size": size, "sha256": digest, "from": item.source, "node": cap.node}
    return keep


def _copy(source: Source, item: Item, target: str, chunk: int) -> Dict[str, Any]:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    part = target + PART
    h, written = hashlib.sha256(), 0
    with open(part, "wb") as handle:  # a part file of a killed run is started again, never trusted
        for data in source.chunks(item.source, item.size, chunk):
            handle.write(data)
            h.update(data)
            written += len(data)
        handle.flush()
        os.fsync(handle.fileno())
    size, digest = source.digest(item.source)
    if (written, h.hexdigest()) != (size, digest) or os.path.getsize(part) != size:
        os.unlink(part)
        raise CaptureError(f"the copy of {item.source} from {source.node or 'this machine'} does not match it "
                           f"({written} bytes, sha256 {h.hexdigest()[:12]}; the source: {size} bytes, "
                           f"{digest[:12]}): it changed while it was copied, or the transfer failed",
                           Location(item.source), "run the same collect again once the job has finished writing")
    os.link(part, target)  # never replaces a file
    os.unlink(part)
    return {"file": item.dest, "size": size, "sha256": digest, "from": item.source}


def _manifest(dest: str, cap: Capture) -> Optional[str]:
    """The capture's manifest in DEST (after its traces), naming the copies; None if it is there already."""
    group = group_of(cap)
    record = dict(cap.data) if cap.data else {
        "format": manifest.FORMAT, "kind": manifest.KIND, "recipe": "", "key": "", "role": "",
        "backend": cap.backend, "rank": cap.rank, "host": cap.host, "pid": cap.pid, "steps": None,
        "note": "written by patchkit collect: the trace was found without a manifest"}
    record["traces"] = [{"name": dest_name(cap, t.name), "kind": t.kind, "size": t.size, "files": t.files}
                        for t in cap.traces]
    record["collected_from"] = {"node": cap.node, "folder": cap.folder, "manifest": cap.manifest,
                                "traces": [t.path for t in cap.traces]}
    first = cap.traces[0].name if cap.traces else os.path.basename(cap.manifest or "capture.json")[: -len(".json")]
    name = manifest.capture_name(dest_name(cap, first))
    folder = os.path.join(dest, group, manifest.FOLDER)
    if os.path.exists(os.path.join(folder, f"{name}.json")):
        return None
    return manifest.write(folder, name, record)
