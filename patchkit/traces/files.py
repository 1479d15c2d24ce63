"""Finding captures on disk: torch.profiler traces and torch_npu ``*_ascend_pt`` folders, and whose rank each is.

A PATH given to ``summary``, ``compare`` or ``analyse`` may be

* one trace file (a Chrome trace, ``.json`` or ``.json.gz``);
* one ``*_ascend_pt`` folder (or its ``ASCEND_PROFILER_OUTPUT``);
* any folder: the recipe's ``save_path`` after a run, a folder that
  ``patchkit collect`` filled (one folder holding every rank's
  ``*_ascend_pt``, rank-named torch traces), or a folder with one
  subfolder per rank or per node.  Every ``*.pt.trace.json[.gz]`` file
  and ``*_ascend_pt`` folder under it is a capture.

A capture's rank is read, first found wins, from

1. the manifest patchkit wrote for it: ``patchkit-manifests/<name>.json``
   in the trace's folder (its ``rank`` and ``role``);
2. the capture itself: a torch trace's ``distributedInfo.rank`` (written
   when torch.distributed is initialised); torch_npu's
   ``profiler_info_<rank>.json`` (what msprof-analyze reads too);
3. its path: ``rank3``, ``rank_3`` or ``rank-3`` in the file or folder
   names below PATH, nearest first.

Standard library only; nothing here writes.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from patchkit.core.confined import open_bounded
from patchkit.core.errors import Location, TraceError
from patchkit.core import manifest
from patchkit.core.manifest import FOLDER as MANIFEST_FOLDER, TRACE_LIMIT

TORCH_ENDINGS = (".pt.trace.json", ".pt.trace.json.gz")  # torch.profiler.tensorboard_trace_handler
ASCEND_ENDING = "_ascend_pt"  # torch_npu's folder per capture
ASCEND_OUTPUT = "ASCEND_PROFILER_OUTPUT"  # what torch_npu's parse writes into it
MANIFESTS = MANIFEST_FOLDER  # patchkit's manifests, beside the traces
SKIPPED = (MANIFESTS, "cluster_analysis_output", "__pycache__")  # folders that hold no capture
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z0-9])rank[_-]?(\d+)(?![0-9])", re.IGNORECASE)
_PROF_DIR = re.compile(r"PROF_\d+_\d+_[0-9a-zA-Z]+")
_INFO = re.compile(r"profiler_info(?:_(\d+))?\.json")

LAYOUT_HINT = ("give one trace file, one *_ascend_pt folder, or a folder holding them: the recipe's "
               "profiler.save_path, or a folder `patchkit collect` filled")


class Capture(NamedTuple):
    """One capture: a trace file (``torch``) or a ``*_ascend_pt`` folder (``ascend``)."""

    path: str
    format: str  # "torch" | "ascend"
    rank: Optional[int] = None
    role: str = ""
    rank_from: str = ""  # "manifest", "trace", "profiler_info", "path name", or "" (unknown)
    manifest: str = ""  # the manifest read for it, if any

    @property
    def label(self) -> str:
        who = f"rank {self.rank}" if self.rank is not None else os.path.basename(self.path)
        return f"{who} ({self.role})" if self.role else who


def find(path: str) -> List[Capture]:
    """Every capture at or under ``path``, ranked; a TraceError when there is none or ``path`` is missing."""
    if not os.path.exists(path):
        raise TraceError("no such file or folder", Location(path), hint=LAYOUT_HINT)
    root = os.path.abspath(path)
    found: List[Tuple[str, str]] = []
    if os.path.isfile(root):
        found.append((root, "torch"))
    elif is_ascend_capture(root):
        found.append((root, "ascend"))
    elif os.path.basename(root) == ASCEND_OUTPUT and is_ascend_capture(os.path.dirname(root)):
        root = os.path.dirname(root)
        found.append((root, "ascend"))
    else:
        for top, dirs, files in os.walk(root):
            for d in sorted(dirs):  # a link found on the way (someone else's, in a shared folder) is not followed
                if d.endswith(ASCEND_ENDING) and not os.path.islink(os.path.join(top, d)):
                    found.append((os.path.join(top, d), "ascend"))
            dirs[:] = sorted(d for d in dirs if not d.endswith(ASCEND_ENDING) and d not in SKIPPED
                             and not d.startswith("."))
            found += [(os.path.join(top, f), "torch") for f in sorted(files)
                      if f.endswith(TORCH_ENDINGS) and not os.path.islink(os.path.join(top, f))]
    if not found:
        raise TraceError("no capture here: no *.pt.trace.json[.gz] file and no *_ascend_pt folder under it",
                         Location(path), hint=LAYOUT_HINT + "; `patchkit traces` lists the captures patchkit knows")
    manifests: Dict[str, Dict[str, Tuple[dict, str]]] = {}
    captures = [_ranked(p, kind, root, manifests) for p, kind in found]
    return sorted(captures, key=lambda c: (c.rank is None, c.rank or 0, c.role, c.path))


def is_ascend_capture(folder: str) -> bool:
    """A torch_npu capture folder: it holds FRAMEWORK/, PROF_*/ or ASCEND_PROFILER_OUTPUT/ (or is named *_ascend_pt)."""
    if not os.path.isdir(folder):
        return False
    if folder.rstrip(os.sep).endswith(ASCEND_ENDING):
        return True
    names = os.listdir(folder)
    return "FRAMEWORK" in names or ASCEND_OUTPUT in names or any(_PROF_DIR.fullmatch(n) for n in names)


def check_ascend_capture(folder: str) -> None:
    """A TraceError when a ``*_ascend_pt`` folder holds nothing torch_npu wrote (a copy cut short, an empty folder)."""
    names = os.listdir(folder)
    if "FRAMEWORK" in names or ASCEND_OUTPUT in names or any(_PROF_DIR.fullmatch(n) for n in names):
        return
    raise TraceError("this *_ascend_pt folder holds no FRAMEWORK/, PROF_*/ or ASCEND_PROFILER_OUTPUT/ folder: "
                     "it is empty or was copied in part", Location(folder),
                     hint="copy the whole folder again from the node that wrote it (`patchkit collect` verifies sizes)")


def _ranked(path: str, kind: str, root: str, manifests: Dict[str, Dict[str, Tuple[dict, str]]]) -> Capture:
    folder = os.path.dirname(path)
    if folder not in manifests:
        manifests[folder] = _manifests_in(folder)
    record, where = manifests[folder].get(os.path.basename(path), ({}, ""))
    role = str(record.get("role") or "")
    rank = record.get("rank")
    if isinstance(rank, int) and not isinstance(rank, bool):
        return Capture(path, kind, rank, role, "manifest", where)
    rank = rank_inside(path, kind)
    if rank is not None:
        return Capture(path, kind, rank, role, "trace" if kind == "torch" else "profiler_info", where)
    rank = _rank_in_path(path, root)
    return Capture(path, kind, rank, role, "path name" if rank is not None else "", where)


def capture_name(name: str) -> str:
    """A manifest's name for a trace: the trace's name without ``.pt.trace.json[.gz]`` (a folder keeps its name)."""
    for ending in TORCH_ENDINGS:
        if name.endswith(ending):
            return name[: -len(ending)]
    return name


def _manifests_in(folder: str) -> Dict[str, Tuple[dict, str]]:
    """The patchkit manifests of a folder's captures, by capture file name; a TraceError for one this cannot read."""
    out: Dict[str, Tuple[dict, str]] = {}
    for path in sorted(glob.glob(os.path.join(glob.escape(folder), MANIFESTS, "*.json"))):
        record = read_manifest(path)
        if record is None:
            continue
        for trace in record.get("traces") or ():
            name = os.path.basename(str(trace.get("name", "")) if isinstance(trace, dict) else str(trace))
            if name:
                out.setdefault(name, (record, path))
    return out


def read_manifest(path: str) -> Optional[Dict[str, Any]]:
    """A patchkit capture manifest (None for a JSON file that is not one); a TraceError when it cannot be used."""
    try:
        return manifest.read(path)
    except manifest.Unreadable as exc:
        if exc.foreign:
            return None
        newer = exc.reason.startswith("written by")
        raise TraceError(exc.reason, Location(path, exc.line, exc.col),
                         hint="upgrade patchkit where you run this command (a build of patchkit-profiler as new as "
                              "the one that wrote it)" if newer else
                              "copy it again, or delete it: the trace is then read without it") from None


def rank_inside(path: str, kind: str) -> Optional[int]:
    """The rank a capture (``kind`` "torch" or "ascend") records about itself, without reading a whole trace."""
    if kind == "ascend":
        try:
            names = sorted(os.listdir(path))
        except OSError:
            return None
        for name in names:
            match = _INFO.fullmatch(name)
            if match and match.group(1) is not None:
                return int(match.group(1))
        return None
    return _distributed_rank(path)


def _distributed_rank(path: str) -> Optional[int]:
    """``distributedInfo.rank`` from the head of a torch trace (torch writes it before the events); read as
    :func:`patchkit.core.confined.open_bounded` reads (a link, a FIFO or a device is never opened)."""
    import io
    import zlib

    try:
        with io.TextIOWrapper(open_bounded(path, TRACE_LIMIT, gz=path.endswith(".gz")), encoding="utf-8") as handle:
            head = handle.read(1 << 16)
    except (OSError, EOFError, UnicodeDecodeError, zlib.error):
        return None  # reading the trace itself says what is wrong with it
    at = head.find('"distributedInfo"')
    if at < 0:
        return None
    match = re.search(r'"rank"\s*:\s*(\d{1,18})(?!\d)', head[at: head.find("}", at) + 1])
    return int(match.group(1)) if match else None  # no rank of 19 digits or more: a trace no profiler wrote


def _rank_in_path(path: str, root: str) -> Optional[int]:
    rel = os.path.relpath(path, os.path.dirname(root)) if path != root else os.path.basename(path)
    for part in reversed(rel.split(os.sep)):
        match = _RANK_IN_NAME.search(part)
        if match:
            return int(match.group(1))
    return None
