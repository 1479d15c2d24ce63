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

Manifests and traces are not trusted: every name from them becomes a safe file name
(:func:`patchkit.core.manifest.safe_name`); a trace that is a link or leads out of its
capture's folder is refused like a broken one; reads go through
:mod:`patchkit.traces.inside` and writes through :mod:`patchkit.traces.journal`,
which never leave either folder: DEST is opened once, before it is checked
(no link another user owns followed on the way), and everything in it is
reached from that descriptor.  A part file is removed on every failure (a full
disk, ``ulimit -f``, an interrupt), and every ``OSError`` is an error naming
the file and what to do.  The names in DEST and the
list of files to copy are :mod:`patchkit.traces.layout`'s.  The bytes come from a
:class:`Source`: this machine's files, or a Ray node's (:mod:`patchkit.cluster.gather`).
Nothing here prints: a ``progress`` (:mod:`patchkit.core.progress`) is told the bytes copied.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from patchkit.traces import journal
from patchkit.core import manifest
from patchkit.traces.captures import Capture, CaptureError, unique
from patchkit.core.errors import Location
from patchkit.core.progress import BYTES, Progress, given
from patchkit.core.reach import HINTS
from patchkit.traces.inside import LINK, confine, open_inside, shown, walk_local, within  # noqa: F401
from patchkit.traces.layout import PART, Item, dest_name, dest_path, group_of, plan, screen  # noqa: F401

CHUNK = 8 << 20  # bytes per read: the most one file's copy holds in memory (times the reads in flight over Ray)


class Source:
    """Reads the files of one node.  This one reads this machine's; ``root``: the folder a file must be inside."""

    node = ""

    def chunks(self, path: str, size: int, chunk: int, root: str) -> Iterator[bytes]:
        with open_inside(path, root) as handle:
            while True:
                data = handle.read(chunk)
                if not data:
                    return
                yield data

    def digest(self, path: str, root: str) -> Tuple[int, str]:
        with open_inside(path, root) as handle:
            return journal.digest(handle, CHUNK)


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


# ---------------------------------------------------------------- copying


def collect_here(dest: str, folders: Sequence[str] = (), cwd: Optional[str] = None, chunk: Optional[int] = None,
                 skip_broken: bool = False, progress: Optional[Progress] = None, every: bool = False) -> Result:
    """The captures under ``folders`` (or this project's, every one's with ``every``: see
    :func:`patchkit.traces.captures.search`) into ``dest``."""
    from patchkit.traces.captures import search

    caps = confine(search(folders, cwd, every))
    return collect(dest, caps, {c.node: Source() for c in caps}, walk_local, chunk, skip_broken, progress)


def collect(dest: str, captures: Sequence[Capture], sources: Dict[str, Source], walk, chunk: Optional[int] = None,
            skip_broken: bool = False, progress: Optional[Progress] = None) -> Result:
    """Copy ``captures`` into ``dest``.  ``sources``: node -> :class:`Source`; ``walk`` as for :func:`plan`.

    ``progress`` is told the bytes to copy (files already there not counted), then each chunk as it is
    written, with the file's number and its node.
    """
    dest = os.path.abspath(dest)
    chunk = chunk or CHUNK
    inside = os.path.realpath(dest) + os.sep  # DEST under a searched folder: its copies are not captures to collect
    listings: Dict[Tuple[str, str], List[Tuple[str, int]]] = {}
    captures = [c if c.problem else c._replace(problem=screen(c, walk, listings))
                for c in unique(sorted((c for c in captures if not os.path.realpath(c.where).startswith(inside)),
                                       key=lambda c: bool(c.problem)))]  # a refused twin never hides a good one
    broken = [c for c in captures if c.problem]
    if broken and not skip_broken:
        first = broken[0]
        more = f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
        raise CaptureError(f"{shown(first.problem, 4000)}{more}; nothing was copied", None,  # it names its file
                           "move the broken capture aside, or pass --skip-broken to collect the others")
    good = [c for c in captures if not c.problem]
    if not good:
        raise CaptureError("no capture to collect", Location(dest), "see `patchkit traces` for what was found")
    there = journal.open_dest(dest)  # None while DEST does not exist; held open from here on, never looked up again
    try:
        recorded = journal.read(there) if there else {}
        items, notes = plan(good, lambda cap, path: listings[(cap.node, path)])
        # everything that could stop the collect is checked before the first byte is written
        keep = _check_existing(there, items, good, sources, recorded) if there else {}
        there = there or journal.open_dest(dest, new=True)
        journal.start(there)
        done = _write(there, items, good, sources, keep, recorded, chunk, given(progress))
        written = [m for m in (_manifest(there, cap) for cap in good) if m]
    finally:
        if there:
            os.close(there.fd)
    groups = sorted({group_of(c) for c in good})
    return Result(dest, tuple(good), tuple(done), tuple(written), tuple(groups), tuple(notes),
                  tuple(c for c in captures if c.problem))


def _write(dest: journal.Dest, items: Sequence[Item], good: Sequence[Capture], sources: Dict[str, Source],
           keep: Dict[str, Dict[str, Any]], recorded: Dict[str, Dict[str, Any]], chunk: int,
           progress: Progress) -> List[Copied]:
    """Each item copied into DEST (or kept, when already there), recorded in the journal as it is done."""
    done: List[Copied] = []
    todo = [i for i in items if i.size >= 0 and i.dest not in keep]
    progress.start(sum(i.size for i in todo), f"copying {len(todo)} file(s)", BYTES)
    number = 0  # of the file being copied, in todo
    for item in items:
        cap = good[item.capture]
        target = os.path.join(dest.path, *journal.parts_of(item.dest))
        if item.size < 0:  # a folder of a torch_npu capture (empty ones too)
            os.close(journal.folder(dest, item.dest))
            continue
        if item.dest in keep:
            done.append(Copied(target, item.source, cap.node, item.size, "already there", item.capture))
            if item.dest not in recorded:
                journal.append(dest, keep[item.dest])
            continue
        number += 1
        what = f"file {number}/{len(todo)} from {shown(cap.node)}"
        entry = _copy(sources[cap.node], item, dest, chunk, lambda n: progress.advance(n, what))
        journal.append(dest, dict(entry, **{"node": cap.node}))
        done.append(Copied(target, item.source, cap.node, item.size, "copied", item.capture))
    return done


def _check_existing(dest: journal.Dest, items: Sequence[Item], caps: Sequence[Capture], sources: Dict[str, Source],
                    recorded: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """The files already in DEST that are these captures' (kept); any other file in the way stops the collect."""
    keep: Dict[str, Dict[str, Any]] = {}
    for group in sorted({group_of(c) for c in caps}):  # where the manifests go, after the traces
        if journal.what_is(dest, f"{group}/{manifest.FOLDER}")[0] not in ("missing", "folder"):
            where = os.path.join(dest.path, group, manifest.FOLDER)
            raise CaptureError(f"{where} is not a folder patchkit collect made", Location(where),
                               "move it aside, or collect into a new folder; nothing was written")
    for item in items:
        kind, size, digest = journal.what_is(dest, item.dest)
        if kind == "missing" or (item.size < 0 and kind == "folder"):
            continue
        target, cap = os.path.join(dest.path, *item.dest.split("/")), caps[item.capture]
        known = recorded.get(item.dest)
        if known is not None and (known.get("size"), known.get("sha256")) == (size, digest) and size == item.size:
            keep[item.dest] = known  # copied and checked by an earlier run, and unchanged since
            continue
        if item.size < 0 or kind != "file" or (size, digest) != sources[cap.node].digest(item.source, item.root):
            raise CaptureError(f"{target} is already there and differs from {shown(item.source)} on {cap.node}",
                               Location(target), "it is not replaced: collect into a new folder, or move that file "
                                                 "aside; nothing was written")
        keep[item.dest] = {"file": item.dest, "size": size, "sha256": digest, "from": item.source, "node": cap.node}
    return keep


def _copy(source: Source, item: Item, dest: journal.Dest, chunk: int, copied: Callable[[int], None]) -> Dict[str, Any]:
    """One file copied to ``<name>.patchkit-part`` in DEST, checked, then linked to its name (never replacing one).

    The part file is removed on every way out but success (a full disk, ``ulimit -f``, a copy that does not match,
    an interrupt); every OSError is an error naming the file and what to do.
    """
    parent, _, name = item.dest.rpartition("/")
    target = os.path.join(dest.path, *item.dest.split("/"))
    fd = journal.folder(dest, parent)
    part, h, written, made = name + PART, hashlib.sha256(), 0, None
    try:
        try:
            os.unlink(part, dir_fd=fd)  # a part file of a killed run is started again, never trusted
        except FileNotFoundError:
            pass
        with journal.create(fd, part) as handle:
            made = os.fstat(handle.fileno())
            for data in source.chunks(item.source, item.size, chunk, item.root):
                handle.write(data)
                h.update(data)
                written += len(data)
                copied(len(data))
            handle.flush()
            os.fsync(handle.fileno())
        size, digest = source.digest(item.source, item.root)
        now = os.stat(part, dir_fd=fd, follow_symlinks=False)
        if (written, h.hexdigest()) != (size, digest) or now.st_size != size or \
                (now.st_dev, now.st_ino) != (made.st_dev, made.st_ino):
            raise CaptureError(f"the copy of {shown(item.source)} from {source.node or 'this machine'} does not "
                               f"match it ({written} bytes, sha256 {h.hexdigest()[:12]}; the source: {size} bytes, "
                               f"{digest[:12]}): it changed while it was copied, or the transfer failed",
                               Location(shown(item.source)), "run the same collect again once the job has finished "
                                                             "writing")
        os.link(part, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)  # never replaces a file
        os.unlink(part, dir_fd=fd)
    except BaseException as exc:
        if made is not None:
            try:
                os.unlink(part, dir_fd=fd)
            except OSError:
                pass
        if isinstance(exc, OSError) and not isinstance(exc, FileExistsError):
            hint = HINTS.get(exc.errno or 0, "check that folder") + "; then run the same collect again: it keeps " \
                                                                 "what was copied"
            raise CaptureError(f"cannot write {target}: {exc.strerror or exc}; the copy was removed",
                               Location(target), hint) from None
        if isinstance(exc, FileExistsError):
            raise CaptureError(f"cannot write {target}: something is already there", Location(target),
                               "DEST holds something patchkit collect did not make there: move it aside, or collect "
                               "into a new folder") from None
        raise
    finally:
        os.close(fd)
    return {"file": item.dest, "size": size, "sha256": digest, "from": item.source}


def _manifest(dest: journal.Dest, cap: Capture) -> Optional[str]:
    """The capture's manifest in DEST (after its traces), naming the copies; None if it is there already."""
    record = dict(cap.data) if cap.data else {
        "format": manifest.FORMAT, "kind": manifest.KIND, "recipe": "", "key": "", "role": "",
        "backend": cap.backend, "rank": cap.rank, "host": cap.host, "pid": cap.pid, "steps": None,
        "note": "written by patchkit collect: the trace was found without a manifest"}
    record["traces"] = [{"name": dest_name(cap, t.name), "kind": t.kind, "size": t.size, "files": t.files}
                        for t in cap.traces]
    record["collected_from"] = {"node": cap.node, "folder": cap.folder, "manifest": cap.manifest,
                                "traces": [t.path for t in cap.traces]}
    first = dest_name(cap, cap.traces[0].name if cap.traces else
                      os.path.basename(cap.manifest or "capture.json")[: -len(".json")])
    data = (json.dumps(record, indent=2, sort_keys=True) + "\n").encode("utf-8", "backslashreplace")
    return journal.write_new(dest, f"{group_of(cap)}/{manifest.FOLDER}", manifest.capture_name(first), data)
