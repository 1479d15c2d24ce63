"""The manifest: a small JSON record patchkit writes next to each capture.

When a capture window closes (or a window is cut short at process exit), :mod:`patchkit.runtime` calls
:func:`record_window`, which writes::

    <save_path>/patchkit-manifests/<capture name>.json

``<capture name>`` is the trace's own name without its ``.pt.trace.json`` ending (torch), the ``*_ascend_pt``
folder's name (npu), or ``<recipe>[.<role>]_<host>_<pid>_steps<first>-<last>`` when the profiler writes its report
itself (nsys). The manifests sit in a folder of their own, not beside the traces in the same folder, because
Holistic Trace Analysis reads every ``*.json`` of a trace folder as a trace.

The record holds: ``format`` (this module's :data:`FORMAT`; a reader refuses a newer one), the recipe, capture key
and role, backend, rank, host, pid, the steps recorded (patchkit's own step index, as the recipe counts), the
window's start and end time, whether it was cut short, the traces (names relative to the save path, with their
sizes), the absolute save path, patchkit's version and the settings used. ``error`` says why a trace was not written
whole (a full disk, a quota; "" when none), as does that trace's entry: such a trace is missing or cut off, so a
reader that knows no ``error`` still finds the capture broken (``FORMAT`` stays 1).

The runtime then adds the save path to ``$PATCHKIT_HOME/captures`` (:func:`note_folder`: once, bounded) so that
``patchkit traces`` finds captures written from any working directory, and after the recipe is reverted.

Standard library only: this runs inside the training process. Writes are atomic (a temporary file in the same
folder, then a link that never replaces an existing file), into a folder reached without following a link another
user controls (:func:`write`).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from patchkit.core import wholejson
from patchkit.core.confined import Refused, open_bounded, open_regular, read_bounded, safe_name

FORMAT = 1  # bump when a reader of format 1 would misread a new manifest
KIND = "patchkit-capture"
FOLDER = "patchkit-manifests"  # inside the save path
INDEX = "captures"  # under $PATCHKIT_HOME: one absolute save path per line
LIMIT = 4 << 20  # bytes of a manifest read: patchkit writes a few KiB (settings, trace names)
TRACE_LIMIT = 32 << 30  # bytes of one trace read (decompressed): some 2.5 times the events patchkit holds to nest
INDEX_LIMIT = 16 * 1024 * 1024  # bytes of the index read: some 100,000 save paths
TRACE_ENDINGS = (".pt.trace.json.gz", ".pt.trace.json")  # torch.profiler.tensorboard_trace_handler
ASCEND_ENDING = "_ascend_pt"  # torch_npu's folder per capture

_noted: set = set()  # save paths this process has put in the index
BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # where str.splitlines ends a line


def home() -> str:
    """``$PATCHKIT_HOME`` (:func:`patchkit.core.private.home`, standard library only: this runs in the job)."""
    from patchkit.core.private import home as state_home

    return state_home()


# ---------------------------------------------------------------- writing (in the job)


def record_window(key: str, backend: str, rank: Any, settings: Mapping[str, Any], first: int, last: int,
                  started: Optional[float], traces: Sequence[str], cut_short: str = "",
                  failed: Sequence[Tuple[str, str]] = ()) -> str:
    """Write the manifest of one closed window; returns its path.  May raise (the runtime says it in one line).
    ``failed``: (trace, why) of each trace that was not written whole."""
    from patchkit import __version__

    save_path = os.path.abspath(str(settings.get("save_path") or "."))
    entries = [_trace_entry(save_path, path) for path in traces]
    entries += [_trace_entry(save_path, path, str(why) or "not written whole") for path, why in failed]
    record = {  # the keys in the order of the module's docstring
        "format": FORMAT, "kind": KIND, "patchkit": __version__,
        "recipe": key.partition("/")[0], "key": key, "role": key.partition("/")[2], "backend": backend, "rank": rank,
        "host": socket.gethostname(), "pid": os.getpid(),
        "steps": {"first": first, "last": last, "count": last - first + 1},
        "start_time": _iso(started), "end_time": _iso(time.time()), "cut_short": cut_short,
        "error": "; ".join(f"{e['name']}: {e['error']}" for e in entries if e.get("error")),
        "save_path": save_path, "traces": entries,
        "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()},
    }
    name = capture_name(entries[0]["name"]) if entries else \
        safe_name(f"{key.replace('/', '.')}_{record['host']}_{record['pid']}_steps{first}-{last}")
    return write(os.path.join(save_path, FOLDER), name, record)


def capture_name(trace_name: str) -> str:
    """The manifest's name for a trace: its name without the ``.pt.trace.json[.gz]`` ending."""
    for ending in TRACE_ENDINGS:
        if trace_name.endswith(ending):
            return trace_name[: -len(ending)]
    return trace_name


def write(folder: str, name: str, record: Mapping[str, Any]) -> str:
    """``folder/name.json`` written whole; an existing file is never replaced (``name-2.json`` then).

    ``folder`` (a save path's ``patchkit-manifests``) is reached as :mod:`patchkit.core.folders` walks: no link
    another user controls followed, every folder on the way root's or yours and writable by nobody else (or
    sticky), the folder itself root's or yours and writable by nobody else; made 0755 where missing.  Raises
    :class:`patchkit.core.folders.Untrusted` or OSError (the runtime says it in one line)."""
    from patchkit.core.folders import OWNED, open_folder

    data = (json.dumps(record, indent=2, sort_keys=True) + "\n").encode("utf-8")
    folder = os.path.abspath(folder)
    with open_folder(folder, OWNED, create=True, mode=0o755) as opened:
        return os.path.join(folder, opened.write(f"{name}.json", data, mode=0o600, replace=False))


def note_folder(save_path: str) -> None:
    """Add ``save_path`` to ``$PATCHKIT_HOME/captures`` once (not again by this process, nor when the index holds
    it: one short O_APPEND write otherwise), in the state folder as :func:`patchkit.core.private.open_state` opens
    it (refused: :class:`NotPrivate`); an index that would grow past :data:`INDEX_LIMIT` is written again with its
    newest half.  One that is not :func:`one_line` is refused (LedgerError): U+2028 would read back as two paths."""
    if save_path in _noted:
        return
    from patchkit.core import private
    from patchkit.core.errors import LedgerError
    from patchkit.core.folders import Untrusted
    from patchkit.core.printable import printable

    if not one_line(save_path):
        raise LedgerError(f"the save path {printable(save_path)} holds a line break or a control character: the "
                          "list of capture folders holds one path a line, so it is left out")
    line = (os.path.normpath(save_path) + "\n").encode("utf-8", "surrogateescape")
    with private.open_state(create=True) as base:
        try:
            fd = base.open(INDEX, os.O_RDWR | os.O_APPEND | os.O_CREAT, private.FILE_MODE)
        except Untrusted as exc:
            raise private.refuse(exc.path, exc.why, False) from None
        try:
            st = os.fstat(fd)
            why = private.problem(st, False)
            if why is not None:
                raise private.refuse(base.join(INDEX), why, False)
            start = max(0, st.st_size - INDEX_LIMIT)  # past the limit (not patchkit's writing): its last lines
            data = os.pread(fd, INDEX_LIMIT, start)
            held = [f"{p}\n".encode("utf-8", "surrogateescape")
                    for p in _lines(data.partition(b"\n")[2] if start else data)]
            if line not in held and st.st_size + len(line) <= INDEX_LIMIT:  # a folder there already is not again
                os.write(fd, line)
            elif line not in held:  # written again, whole: the newest folders that fill half of it, and this one
                while held and sum(map(len, held)) + len(line) > INDEX_LIMIT // 2:
                    held.pop(0)
                private.write(base, INDEX, b"".join(held) + line, "cannot write the list of capture folders")
        finally:
            os.close(fd)
    _noted.add(save_path)


def one_line(path: str) -> bool:
    """Whether ``path`` can be a line of the index: no control character (C0, DEL, C1), nor U+2028 or U+2029."""
    return not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c in BREAKS for c in path)


def indexed_folders() -> List[str]:
    """The save paths the index lists, each once (as :func:`os.path.normpath` writes it), in the order first
    written; refused (:class:`~patchkit.core.private.NotPrivate`) as a state file is."""
    from patchkit.core import private

    base = private.open_state()
    if base is None:
        return []
    with base:
        return _lines(private.read(base, INDEX, INDEX_LIMIT) or b"")


def _lines(data: bytes) -> List[str]:
    """The index's folders: lines end at ``"\\n"`` only; one not absolute or not :func:`one_line` is left out."""
    seen: Dict[str, None] = {}
    for line in (raw.decode("utf-8", "surrogateescape") for raw in data.split(b"\n")):
        if line.startswith(os.sep) and one_line(line):
            seen.setdefault(os.path.normpath(line), None)
    return list(seen)


def _trace_entry(save_path: str, path: str, error: str = "") -> Dict[str, Any]:
    full = os.path.abspath(path)
    try:
        size, files = measure(full)
    except OSError:
        if not error:
            raise
        size, files = 0, 0  # a failed trace its writer never gave its name
    rel = os.path.relpath(full, save_path)
    folder = os.path.isdir(full) or (error and full.endswith(ASCEND_ENDING))
    entry = {"name": rel.replace(os.sep, "/"), "kind": "folder" if folder else "file", "size": size, "files": files}
    if error:
        entry["error"] = error
    return entry


def _iso(seconds: Optional[float]) -> Optional[str]:
    if seconds is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(seconds)) + f".{int(seconds % 1 * 1000):03d}" + \
        time.strftime("%z", time.localtime(seconds))


# ---------------------------------------------------------------- reading (patchkit traces / collect)


def measure(path: str) -> Tuple[int, int]:
    """(bytes, files) of a trace file or folder; symbolic links are not followed."""
    if not os.path.isdir(path):
        return os.lstat(path).st_size, 1
    size = files = 0
    for top, _dirs, names in os.walk(path):
        for n in names:
            st = os.lstat(os.path.join(top, n))
            size += st.st_size
            files += 1
    return size, files


class Unreadable(Exception):
    """Why a file cannot be used as a manifest; ``foreign``: it is readable JSON, just not a manifest."""

    def __init__(self, reason: str, line: Optional[int] = None, col: Optional[int] = None, foreign: bool = False):
        super().__init__(reason)
        self.reason, self.line, self.col, self.foreign = reason, line, col, foreign


def read(path: str) -> Dict[str, Any]:
    """The manifest at ``path``, of a format this patchkit reads; :class:`Unreadable` says why not."""
    from patchkit import __version__

    try:
        raw = read_bounded(path, LIMIT)
    except Refused as exc:
        raise Unreadable(str(exc) if exc.errno == errno.EFBIG else f"the manifest {exc}") from None
    except OSError as exc:
        raise Unreadable(f"cannot read it: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise Unreadable(f"not a readable manifest (not UTF-8: {exc})") from None
    except ValueError as exc:
        how = "cut off" if raw and not raw.rstrip().endswith(b"}") else "bad JSON"
        raise Unreadable(f"not a readable manifest ({how}: {getattr(exc, 'msg', exc)})",
                         getattr(exc, "lineno", None), getattr(exc, "colno", None)) from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise Unreadable("not a patchkit capture manifest", foreign=True)
    fmt = data.get("format")
    if not isinstance(fmt, int) or fmt < 1:
        raise Unreadable(f"format {fmt!r} is not a manifest format", 1)
    if fmt > FORMAT:
        raise Unreadable(f"written by patchkit {data.get('patchkit', '(a newer version)')} in manifest format {fmt}; "
                         f"this patchkit ({__version__}) reads format {FORMAT} and older", 1)
    return data


def load(path: str) -> Tuple[Optional[Dict[str, Any]], str]:
    """(record, "") for a whole manifest this patchkit reads; (None, why not) otherwise."""
    try:
        data = read(path)
    except Unreadable as exc:
        return None, exc.reason
    missing = [k for k in ("recipe", "key", "backend", "rank", "steps", "traces") if k not in data]
    if missing:
        return None, f"the manifest lacks {', '.join(missing)}"
    return data, ""


def check_trace(path: str, recorded_size: Optional[int] = None) -> str:
    """Why the trace at ``path`` cannot be used as it is ("" when it looks whole).  A file is opened only as
    :func:`patchkit.core.confined.open_regular` opens it: a link, a FIFO or a device is refused, never read."""
    if not os.path.lexists(path):
        return "the trace is missing"
    if os.path.isdir(path) and not os.path.islink(path):
        try:
            size, _files = measure(path)
        except OSError as exc:
            return f"cannot read it: {exc.strerror or exc}"
        if recorded_size is not None and size < recorded_size:
            return f"holds {size} bytes, {recorded_size} when it was written: files are missing"
        return ""
    try:
        handle = os.fdopen(open_regular(path), "rb")
    except Refused as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if recorded_size is not None and size != recorded_size:
            return f"is {size} bytes, {recorded_size} when it was written: cut off or changed since"
        if path.endswith(".json"):  # its structure, whatever keys it holds (a torch trace: one object)
            cut = wholejson.cut(handle, size, objects=path.endswith(TRACE_ENDINGS[1]))
            if cut:
                return cut
    if path.endswith(".gz"):
        return _gzip_problem(path)
    return ""


def _gzip_problem(path: str) -> str:
    """Why a gzip trace is not whole, read to its end within the bounds of
    :func:`patchkit.core.confined.open_bounded` (a gzip bomb is refused after a few MiB)."""
    import zlib

    try:
        with open_bounded(path, TRACE_LIMIT, gz=True) as handle:
            while handle.read(1 << 20):
                pass
    except Refused as exc:
        return str(exc)
    except (OSError, EOFError, zlib.error) as exc:
        return f"is not a whole gzip file ({exc})"
    return ""
