"""Finding captures on this machine: the manifests patchkit's runtime wrote, and traces without one.

A capture is one closed window of one process: its manifest (see
:mod:`patchkit.core.manifest`) and the traces it names, or a trace found with no
manifest (a torch ``*.pt.trace.json[.gz]`` file, a torch_npu ``*_ascend_pt``
folder), written by an older patchkit or by hand-made profiler code.

Where to look when no folder is named is :mod:`patchkit.traces.places`'s: this project's save paths first,
every folder of ``$PATCHKIT_HOME/captures`` only when asked.

Everything here returns data; nothing prints.
"""

from __future__ import annotations

import os
import re
import socket
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from patchkit.core import manifest
from patchkit.core.confined import leads_out, read_bounded
from patchkit.traces import places
from patchkit.traces.files import rank_inside
from patchkit.core.errors import Location, PatchkitError

NO_CAPTURE_HINT = ("a capture appears in the recipe's profiler.save_path when its window closes; name the folder "
                   "(`patchkit traces ./outputs/patchkit/RECIPE`), or check that the job reached the window")


class CaptureError(PatchkitError):
    """No capture where one was expected, or a capture that cannot be used."""

    title = "traces"


class Trace(NamedTuple):
    path: str  # absolute
    name: str  # relative to the capture's folder (its save path), "/"-separated
    kind: str  # file | folder
    size: int
    files: int = 1


class Capture(NamedTuple):
    folder: str  # the folder holding the traces (the save path)
    manifest: Optional[str]  # the manifest's path; None for a trace found without one
    recipe: str  # "" when unknown
    key: str
    role: str
    rank: Optional[int]
    backend: str
    first: Optional[int]  # the first and last recorded step, in the recipe's own count
    last: Optional[int]
    start_time: Optional[str]
    end_time: Optional[str]
    ended: float  # seconds since the epoch: the manifest's end time, else the trace's mtime (newest first)
    host: str
    pid: Optional[int]
    traces: Tuple[Trace, ...]
    problem: str = ""  # why it cannot be used as it is; "" when whole
    node: str = ""  # where it was found: this host, or a Ray node
    data: Optional[Dict[str, Any]] = None  # the manifest as read

    @property
    def size(self) -> int:
        return sum(t.size for t in self.traces)

    @property
    def steps(self) -> str:
        if self.first is None:
            return "-"
        return str(self.first) if self.first == self.last else f"{self.first}-{self.last}"

    @property
    def where(self) -> str:
        return self.manifest or (self.traces[0].path if self.traces else self.folder)

    def to_json(self) -> Dict[str, Any]:
        return {"recipe": self.recipe, "key": self.key, "role": self.role, "rank": self.rank,
                "backend": self.backend, "steps": None if self.first is None else {
                    "first": self.first, "last": self.last, "count": self.last - self.first + 1},
                "start_time": self.start_time, "end_time": self.end_time, "host": self.host, "pid": self.pid,
                "node": self.node, "folder": self.folder, "manifest": self.manifest, "size": self.size,
                "traces": [dict(t._asdict()) for t in self.traces], "broken": bool(self.problem),
                "problem": self.problem}


# ---------------------------------------------------------------- where to look


default_folders = places.default_folders  # where each node looks, over Ray (patchkit.cluster.gather)


def search(folders: Sequence[str] = (), cwd: Optional[str] = None, every: bool = False) -> List[Capture]:
    """The captures under ``folders``; when none is named, this project's (:mod:`patchkit.traces.places`): the
    applied recipes' save paths, then the current folder's, then, with ``every``, the index's other folders; each
    group newest first."""
    if folders:
        return find(folders)
    spots = places.places(cwd)
    there = [p for p in spots if (every or p.group != "other") and os.path.isdir(p.folder)]
    if not there:
        message, hint = places.nothing_there(spots, every)
        raise CaptureError(message, None, hint)
    caps: Dict[str, Capture] = {}
    for group in places.GROUPS:
        for cap in find([p.folder for p in there if p.group == group], require=False):
            caps.setdefault(os.path.realpath(cap.where), cap)
    if not caps:
        raise CaptureError(f"no capture under {', '.join(p.folder for p in there)}", None, NO_CAPTURE_HINT)
    return list(caps.values())


# ---------------------------------------------------------------- finding


def find(folders: Sequence[str], node: str = "", require: bool = True) -> List[Capture]:
    """Every capture under ``folders``, newest first.  ``require``: no folder, or no capture at all, is an error."""
    node = node or socket.gethostname()
    found: Dict[str, Capture] = {}
    for folder in folders:
        if not os.path.isdir(folder):
            if require:
                what = "is not a folder" if os.path.exists(folder) else "does not exist"
                raise CaptureError(f"{folder} {what}", Location(folder),
                                   "name the folder a recipe's profiler.save_path points at")
            continue
        for cap in _walk(os.path.abspath(folder), node):
            found.setdefault(os.path.realpath(cap.where), cap)
    caps = sorted(found.values(), key=lambda c: (-c.ended, c.where))
    if require and not caps:
        what = f"no patchkit manifest, *.pt.trace.json file or *{manifest.ASCEND_ENDING} folder"
        if len(folders) == 1:
            raise CaptureError(f"no capture here: {what} under it", Location(folders[0]), NO_CAPTURE_HINT)
        raise CaptureError(f"no capture under {', '.join(folders)}: {what}", None, NO_CAPTURE_HINT)
    return caps


def unique(caps: Sequence[Capture]) -> List[Capture]:
    """The captures less those seen twice (a folder several nodes share): same process, window and traces."""
    seen, out = set(), []
    for c in caps:
        ident = (c.host, c.pid, c.first, c.last, tuple((t.name, t.size) for t in c.traces), c.manifest is None)
        if ident not in seen:
            seen.add(ident)
            out.append(c)
    return out


def _walk(top: str, node: str) -> List[Capture]:
    manifests: List[str] = []
    traces: List[str] = []
    for here, dirs, files in os.walk(top):
        if os.path.basename(here) == manifest.FOLDER:
            manifests += [os.path.join(here, f) for f in sorted(files) if f.endswith(".json") and not f.startswith(".")]
            dirs[:] = []
            continue
        for d in list(dirs):
            if d.endswith(manifest.ASCEND_ENDING):
                traces.append(os.path.join(here, d))
                dirs.remove(d)
        traces += [os.path.join(here, f) for f in files if f.endswith(manifest.TRACE_ENDINGS)]
        dirs.sort()
    caps, claimed = [], set()
    for path in manifests:
        cap = _from_manifest(path, node)
        claimed.update(t.path for t in cap.traces)
        caps.append(cap)
    caps += [_bare(path, node) for path in sorted(traces) if path not in claimed]
    return caps


def _from_manifest(path: str, node: str) -> Capture:
    folder = os.path.dirname(os.path.dirname(path))
    data, problem = manifest.load(path)
    if data is None:  # still claim the traces it names, so that they are not listed again as traces without one
        return Capture(folder, path, "", "", "", None, "", None, None, None, None, _mtime(path), "", None,
                       _named(folder, path), f"{path}: {problem}", node)
    traces, problems = [], []
    if data.get("error"):  # the runtime saw a trace fail to be written whole (a full disk, a quota, a killed writer)
        problems.append(f"{path}: the capture failed: {str(data['error'])[:2000]}")
    for entry in data.get("traces") if isinstance(data.get("traces"), list) else ():
        if not isinstance(entry, dict):
            problems.append(f"{path}: a trace entry that is not an object: not a manifest patchkit wrote")
            continue
        full = os.path.normpath(os.path.join(folder, str(entry.get("name", ""))))
        failed = bool(entry.get("error") and data.get("error"))  # said above
        if failed and not os.path.lexists(full):
            continue  # never given its name
        refused = leads_out(full, folder) if os.path.lexists(full) else ""
        if refused:  # a manifest from someone else names a file elsewhere: not even its size is read
            problems.append(f"{path}: the trace {full} {refused}")
            continue
        why = "" if failed else manifest.check_trace(full, entry.get("size") if entry.get("kind") == "file" else None)
        if why == "the trace is missing":
            problems.append(f"{full}: {why} (the manifest {path} names it)")
            continue
        if why:
            problems.append(f"{full}: {why}")
        try:
            size, files = manifest.measure(full)
        except OSError:
            size, files = entry.get("size") or 0, entry.get("files") or 1
        traces.append(Trace(full, str(entry.get("name")), "folder" if os.path.isdir(full) else "file", size, files))
    steps = data.get("steps") if isinstance(data.get("steps"), dict) else {}
    return Capture(
        folder=folder, manifest=path, recipe=str(data.get("recipe", "")), key=str(data.get("key", "")),
        role=str(data.get("role") or ""), rank=_int(data.get("rank")), backend=str(data.get("backend", "")),
        first=_int(steps.get("first")), last=_int(steps.get("last")), start_time=data.get("start_time"),
        end_time=data.get("end_time"), ended=_epoch(data.get("end_time")) or _mtime(path),
        host=str(data.get("host", "")), pid=_int(data.get("pid")), traces=tuple(traces),
        problem="; ".join(problems), node=node, data=data)


def _named(folder: str, path: str) -> Tuple[Trace, ...]:
    """The traces a manifest this patchkit cannot read names, as far as its JSON says.  Whatever its format, it is
    read as :func:`patchkit.core.manifest.read` reads (bounded; a link or a FIFO never), and a name that is a link or
    leads outside the capture's folder is left out, its size never read."""
    import json

    try:
        entries = json.loads(read_bounded(path, manifest.LIMIT))["traces"]
        names = [e["name"] for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)]
    except Exception:
        return ()
    out = []
    for name in names:
        full = os.path.normpath(os.path.join(folder, name))
        if not os.path.lexists(full) or leads_out(full, folder):
            continue
        try:
            size, files = manifest.measure(full)
        except OSError:
            continue
        out.append(Trace(full, name, "folder" if os.path.isdir(full) else "file", size, files))
    return tuple(out)


def _bare(path: str, node: str) -> Capture:
    """A trace no manifest names: what its name and first bytes say."""
    folder = os.path.dirname(path)
    is_dir = os.path.isdir(path)
    try:
        size, files = manifest.measure(path)
    except OSError:
        size, files = 0, 0
    trace = Trace(path, os.path.basename(path), "folder" if is_dir else "file", size, files)
    if is_dir:
        rank, problem = rank_inside(path, "ascend"), ""
        if not any(n.startswith("profiler_info") and n.endswith(".json") for n in _listdir(path)):
            problem = (f"{path}: no profiler_info*.json: torch_npu is still writing it, or the process ended "
                       "before the profiler was stopped")
        backend = "npu"
    else:
        rank, problem, backend = rank_inside(path, "torch"), manifest.check_trace(path), "torch"
        problem = f"{path}{'' if os.path.islink(path) else ':'} {problem}" if problem else ""  # as a link named
    match = re.match(r"(?P<host>.+?)_(?P<pid>\d+)[._]", os.path.basename(path))
    return Capture(folder, None, "", "", "", rank, backend, None, None, None, None, _mtime(path),
                   match.group("host") if match else "", _int(match.group("pid")) if match else None,
                   (trace,), problem, node)


def _listdir(path: str) -> List[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _int(value: Any) -> Optional[int]:
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None


def _epoch(text: Any) -> Optional[float]:
    from datetime import datetime

    if not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
    except ValueError:
        return None


def _mtime(path: str) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return 0.0
