"""``traces --ray`` and ``collect --ray``: captures on every node of a Ray cluster, without a shared filesystem.

One task pinned to each alive node (node-affinity scheduling, ``soft=False``,
as :mod:`patchkit.cluster.ray` does) looks for captures there, under the folders
given or the node's own defaults (its ledger's applied recipes, resolved
against the driver's working directory, and its ``$PATCHKIT_HOME/captures``).
``collect`` then fetches each file's bytes from its node with tasks pinned to
that node: chunk by chunk (a few chunks in flight at a time, so memory stays
bounded whatever the trace's size), and a last task computes the file's
size and sha256 there to check the copy.  The driver writes DEST.

What a node sends is not trusted more than a local folder: the node refuses
captures whose manifest or traces are links or lead out of their folder
(:func:`patchkit.traces.collect.confine`) and reads a file only inside its folder
(:func:`patchkit.traces.collect.open_inside`); the driver reduces every name to a
safe file name, checks every path it writes against DEST, and takes no more
bytes from a read than it asked for.

Ray is imported only inside these functions.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from patchkit.traces.captures import Capture, CaptureError, NO_CAPTURE_HINT, default_folders, find, unique
from patchkit.cluster.ray import ClusterError, alive_nodes, connect, timeout
from patchkit.traces.collect import Result, Source, collect as copy_into, confine, open_inside, shown, walk_local
from patchkit.core.errors import Location
from patchkit.core.progress import Progress, given
from patchkit.traces.journal import digest

IN_FLIGHT = 4  # chunk reads asked of a node at once


class NodeScan(NamedTuple):
    node_id: str
    ip: str
    node: str  # "<node id, 12 characters> (<ip>)"
    ok: bool
    message: str  # why the node could not be searched, or the folders it searched
    captures: Tuple[Capture, ...] = ()
    listings: Optional[Dict[str, List[Tuple[str, int]]]] = None  # folder trace -> its files


# ---------------------------------------------------------------- on each node


def _scan_here(folders: Sequence[str], cwd: str) -> NodeScan:
    import ray

    node_id, ip = ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()
    label = f"{node_id[:12]} ({ip})"
    try:
        dirs = list(folders) if folders else [p for p, _why in default_folders(cwd)]
        caps = confine(find([d for d in dirs if os.path.isdir(d)], node=label, require=False))
        listings = {t.path: walk_local(None, t.path) for c in caps if not c.problem for t in c.traces
                    if t.kind == "folder"}
        there = [d for d in dirs if os.path.isdir(d)]
        return NodeScan(node_id, ip, label, True, "searched " + (", ".join(there) if there else "no folder"),
                        tuple(caps), listings)
    except Exception as exc:  # report, never crash the driver
        return NodeScan(node_id, ip, label, False, f"{type(exc).__name__}: {exc}")


def _read_here(path: str, offset: int, length: int, root: str) -> bytes:
    with open_inside(path, root) as handle:
        handle.seek(offset)
        return handle.read(length)


def _digest_here(path: str, root: str) -> Tuple[int, str]:
    with open_inside(path, root) as handle:
        return digest(handle)


# ---------------------------------------------------------------- on the driver


def _pinned(ray, fn, node_id: str):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return ray.remote(fn).options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))


def _get(ray, ref, what: str):
    try:
        return ray.get(ref, timeout=timeout())
    except Exception as exc:
        last = next((ln for ln in reversed(str(exc).strip().splitlines()) if ln.strip()), type(exc).__name__)
        raise ClusterError(f"{what}: {last.strip()}", hint="check that node (`ray status`); raise PATCHKIT_RAY_TIMEOUT "
                                                           "for a slow one") from None


def _scan(ray, folders: Sequence[str], cwd: str, progress: Optional[Progress] = None) -> List[NodeScan]:
    nodes = alive_nodes(ray)
    refs = [_pinned(ray, _scan_here, n["node_id"]).remote(list(folders), cwd) for n in nodes]
    progress = given(progress)
    progress.start(len(nodes), f"searching {len(nodes)} node(s)", "nodes")
    out = []
    for n, ref in zip(nodes, refs):
        try:
            out.append(_get(ray, ref, f"node {n['node_id']} ({n['ip']})"))
        except ClusterError as exc:
            out.append(NodeScan(n["node_id"], n["ip"], f"{n['node_id'][:12]} ({n['ip']})", False, exc.message))
        progress.advance(1, f"{n['node_id'][:12]} ({n['ip']})")
    return out


def _abs(folders: Sequence[str]) -> List[str]:
    """A relative DIR names the same folder on every node: made absolute here (from the driver's directory)."""
    return [f if f.startswith("~") else os.path.abspath(f) for f in folders]


def scan(address: str, folders: Sequence[str] = (), cwd: Optional[str] = None,
         progress: Optional[Progress] = None) -> List[NodeScan]:
    """Every node's captures (under ``folders``, or its defaults); ``progress`` is told each node that answered."""
    with connect(address) as ray:
        return _scan(ray, _abs(folders), cwd or os.getcwd(), progress)


def found(scans: Sequence[NodeScan], folders: Sequence[str]) -> List[Capture]:
    """The captures of every node, newest first; none at all (or a DIR on no node) is an error."""
    caps = unique(sorted((c for s in scans for c in s.captures), key=lambda c: (-c.ended, c.node, c.where)))
    if not caps and all(s.ok for s in scans):
        where = ", ".join(_abs(folders)) if folders else "the applied recipes' save paths"
        raise CaptureError(f"no capture under {where} on any of the {len(scans)} node(s)",
                           Location(folders[0]) if len(folders) == 1 else None, NO_CAPTURE_HINT)
    return caps


class RaySource(Source):
    """The files of one Ray node, read by tasks pinned to it."""

    def __init__(self, ray, node_id: str, node: str):
        self.ray, self.node = ray, node
        self._read = _pinned(ray, _read_here, node_id)
        self._digest = _pinned(ray, _digest_here, node_id)

    def chunks(self, path: str, size: int, chunk: int, root: str) -> Iterator[bytes]:
        """The file's bytes, ``chunk`` at a time with IN_FLIGHT reads asked ahead; never more than asked for."""
        offset, pending = 0, []  # type: int, List[Any]
        while offset < size or pending:
            while offset < size and len(pending) < IN_FLIGHT:
                pending.append(self._read.remote(path, offset, chunk, root))
                offset += chunk
            data = _get(self.ray, pending.pop(0), f"reading {shown(path)} on {self.node}")
            data = checked_chunk(data, chunk, path, self.node)
            if data:
                yield data

    def digest(self, path: str, root: str) -> Tuple[int, str]:
        return _get(self.ray, self._digest.remote(path, root), f"checking {shown(path)} on {self.node}")


def checked_chunk(data: Any, chunk: int, path: str, node: str) -> bytes:
    """A read's answer from a node: bytes, at most the ``chunk`` asked for (an empty one at the file's end)."""
    if not isinstance(data, bytes) or len(data) > chunk:
        raise CaptureError(f"{node} answered a read of {chunk} bytes of {shown(path)} with "
                           f"{len(data) if isinstance(data, bytes) else type(data).__name__}", Location(shown(path)),
                           "check that node's patchkit (the same version on every node); nothing was kept")
    return data


def collect(address: str, dest: str, folders: Sequence[str] = (), cwd: Optional[str] = None,
            chunk: Optional[int] = None, skip_broken: bool = False,
            progress: Optional[Progress] = None) -> Tuple[Result, List[NodeScan]]:
    """Every node's captures copied into ``dest`` on this machine; ``progress`` is told the nodes searched, then
    the bytes copied (each file's with its node)."""
    with connect(address) as ray:
        scans = _scan(ray, _abs(folders), cwd or os.getcwd(), progress)
        failed = [s for s in scans if not s.ok]
        if failed and not skip_broken:
            raise ClusterError(f"node {failed[0].node} could not be searched: {failed[0].message}; nothing was copied",
                               hint="fix that node, or pass --skip-broken to collect the other nodes' captures")
        caps = found(scans, folders)
        listings = {(s.node, path): files for s in scans for path, files in (s.listings or {}).items()}
        sources: Dict[str, Source] = {s.node: RaySource(ray, s.node_id, s.node) for s in scans if s.ok}
        result = copy_into(dest, caps, sources, lambda cap, path: listings.get((cap.node, path)), chunk, skip_broken,
                           progress)
        return result, scans
