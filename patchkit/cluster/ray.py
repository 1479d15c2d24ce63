"""The same patchkit operation on every alive node of a Ray cluster.

verl trains on Ray clusters where every node has its own Python environment,
so a patch made on the head node alone profiles nothing on the workers.  Each
function here runs one task per alive node, pinned to it with Ray's
node-affinity scheduling (``soft=False``), and the task calls the same
:mod:`patchkit` function there (:mod:`patchkit.cluster.node`): each node loads
the recipe, reads its own ``PATCHKIT_ROOT`` and ``PATCHKIT_HOME`` and
resolves its own targets.  Every function returns one
:class:`~patchkit.cluster.node.NodeResult` per node, and tells an optional ``progress``
(:mod:`patchkit.core.progress`) each node as it answers; the command line
(:mod:`patchkit.cli.cluster`) says what they hold.

``apply`` is all or nothing across the cluster: it first plans on every node
(nothing is written if any node cannot apply), then applies everywhere, and
if a node still fails it puts the nodes that changed something back as they
were (reverted, or re-applied with their earlier settings).

Ray is optional (``pip install "patchkit-profiler[ray]"``); it is imported only inside
these functions.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence

from patchkit.core.errors import PatchkitError
from patchkit.core.progress import Progress, given
from patchkit.cluster.node import NodeResult, NodeState, on_node

INSTALL_HINT = ('pip install "patchkit-profiler[ray]" (Ray 2.9 or later; the same build here and in every node\'s '
                'environment: a wheel built from the checkout, or a path every node shares)')


def timeout() -> float:
    """Seconds to wait for every node's answer (``PATCHKIT_RAY_TIMEOUT``, default 300)."""
    return float(os.environ.get("PATCHKIT_RAY_TIMEOUT", "300") or 300)


class ClusterError(PatchkitError):
    """Ray is missing or unreachable, or the operation failed on some node."""

    title = "cluster"


def _import_ray():
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: F401  (Ray >= 2.9)
    except ImportError:
        raise ClusterError("--ray needs Ray, which is not installed in this environment", hint=INSTALL_HINT) from None
    return ray


@contextlib.contextmanager
def connect(address: str) -> Iterator[Any]:
    """Connected to the cluster at ``address`` (``auto``: the one this machine belongs to); yields ``ray``.

    A connection the caller already made is used as it is and left open.
    """
    ray = _import_ray()
    if ray.is_initialized():
        yield ray
        return
    _probe(address)
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:
        raise ClusterError(f"cannot connect to the Ray cluster at {address}: {exc}",
                           hint="start it (`ray start --head`) or pass its address as shown by `ray status`; "
                                "`--ray auto` finds a cluster this machine is part of") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def _probe(address: str, seconds: float = 10.0) -> None:
    """Fail fast on a HOST:PORT nobody listens on: ray.init would retry it for many minutes."""
    import socket

    if "://" in address or ":" not in address:
        return  # auto, ray://... (Ray Client has its own timeout), a bare name Ray resolves itself
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=seconds).close()
    except OSError as exc:
        raise ClusterError(f"cannot connect to the Ray cluster at {address}: {exc.strerror or exc}",
                           hint="check the address (the head node's GCS address, as `ray status` prints it), "
                                "or use `--ray auto` on a node of the cluster") from None


def alive_nodes(ray) -> List[Dict[str, str]]:
    nodes = [{"node_id": n["NodeID"], "ip": n.get("NodeManagerAddress", "?")} for n in ray.nodes() if n.get("Alive")]
    if not nodes:
        raise ClusterError("the Ray cluster has no alive node", hint="check `ray status`")
    return sorted(nodes, key=lambda n: (n["ip"], n["node_id"]))


WHAT = {"plan": "planning", "apply": "applying", "rollback": "putting back", "revert": "reverting",
        "status": "reading the status"}  # what a bar says while the nodes work


def _run(ray, op: str, nodes: List[Dict[str, str]], label: str, kwargs_for,
         progress: Optional[Progress] = None) -> List[NodeResult]:
    """One task per node, each pinned to it; collect one result per node, failures included.

    ``progress`` is told the nodes, then each node as it answers (in the order they do).
    """
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(on_node)
    refs = []
    for n in nodes:
        strategy = NodeAffinitySchedulingStrategy(node_id=n["node_id"], soft=False)
        # num_cpus=0: runs on a head node started with --num-cpus=0 too; no retries: apply must not run twice
        refs.append(task.options(num_cpus=0, max_retries=0, scheduling_strategy=strategy)
                    .remote(op, {"label": label, "kwargs": kwargs_for(n)}))
    limit = timeout()
    pending = _wait(ray, refs, limit, given(progress), f"{WHAT.get(op, op)} on {len(nodes)} node(s)")
    results = []
    for n, ref in zip(nodes, refs):
        if ref in pending:
            ray.cancel(ref, force=True)
            results.append(NodeResult(n["node_id"], n["ip"], label, NodeState.FAILED,
                                      f"no answer within {limit:g} s (PATCHKIT_RAY_TIMEOUT); "
                                      "check this node with `patchkit status --ray`", ok=False))
            continue
        try:
            data = ray.get(ref)
        except Exception as exc:  # the task could not run there: node died, patchkit missing, ...
            results.append(NodeResult(n["node_id"], n["ip"], label, NodeState.FAILED, _task_failure(exc), ok=False))
            continue
        results.append(NodeResult(**data))
    return results


def _wait(ray, refs: List[Any], limit: float, progress: Progress, label: str) -> List[Any]:
    """Wait for every task, at most ``limit`` seconds in all, telling ``progress`` each one done; those still running."""
    progress.start(len(refs), label, "nodes")
    deadline, pending = time.monotonic() + limit, list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=max(deadline - time.monotonic(), 0.0))
        if not ready:
            break
        progress.advance(len(ready))
    return pending


def _task_failure(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    last = next((ln for ln in reversed(text) if ln.strip()), type(exc).__name__)
    if "No module named 'patchkit'" in str(exc):
        return f"patchkit is not installed in this node's environment ({last.strip()}); {INSTALL_HINT}"
    return f"the task could not run: {type(exc).__name__}: {last.strip()}"


def _root_arg(root: Optional[str]) -> Optional[str]:
    """--root names the same folder on every node: make a relative one absolute here, keep ~ for each node."""
    if root is None or root.startswith("~") or os.path.isabs(root):
        return root
    return os.path.abspath(root)


def _recipe_kwargs(recipe: str, overrides: Sequence[str], backend: Optional[str], root: Optional[str],
                   skip_version_check: bool = False, strict_versions: Optional[bool] = None):
    from patchkit.state.versioncheck import strict_default

    kwargs = {"recipe": recipe, "overrides": list(overrides), "backend": backend, "root": _root_arg(root)}
    if skip_version_check:  # only when asked: a node with an older patchkit then fails on it rather than checking
        kwargs["skip_version_check"] = True
    if strict_versions or (strict_versions is None and strict_default()):  # strict here is strict on every node
        kwargs["strict_versions"] = True
    return kwargs


def plan(address: str, recipe: str, overrides: Sequence[str] = (), backend: Optional[str] = None,
         root: Optional[str] = None, skip_version_check: bool = False, strict_versions: Optional[bool] = None,
         progress: Optional[Progress] = None) -> List[NodeResult]:
    """``api.plan`` on every node: what apply would change there (``.diff``); writes nothing."""
    kwargs = _recipe_kwargs(recipe, overrides, backend, root, skip_version_check, strict_versions)
    with connect(address) as ray:
        return _run(ray, "plan", alive_nodes(ray), recipe, lambda n: kwargs, progress)


diff = plan


def apply(address: str, recipe: str, overrides: Sequence[str] = (), backend: Optional[str] = None,
          root: Optional[str] = None, skip_version_check: bool = False, strict_versions: Optional[bool] = None,
          progress: Optional[Progress] = None) -> List[NodeResult]:
    """Apply on every node, or on none: plan everywhere first, then apply, and undo it where it worked if a node fails.

    The failing nodes come back with ``ok`` false and their reason; the others
    say ``not applied`` (the plan failed elsewhere), ``rolled back``, or
    ``left as it was`` (nothing had changed there).  ``progress`` is told the nodes of each stage (plan, apply,
    putting back) as they answer.
    """
    kwargs = _recipe_kwargs(recipe, overrides, backend, root, skip_version_check, strict_versions)
    with connect(address) as ray:
        nodes = alive_nodes(ray)
        planned = _run(ray, "plan", nodes, recipe, lambda n: kwargs, progress)
        if not all(r.ok for r in planned):
            for r in planned:
                if r.ok:
                    r.state, r.message = NodeState.NOT_APPLIED, "another node cannot apply; nothing was written here"
            return planned
        applied = _run(ray, "apply", nodes, recipe, lambda n: kwargs, progress)
        skipped = {r.node_id: r.version_skipped for r in planned}
        for r in applied:
            r.version_skipped = r.version_skipped or skipped.get(r.node_id, "")
        if all(r.ok for r in applied):
            return applied
        undo = [r for r in applied if r.ok and r.changed]
        by_id = {r.node_id: r for r in undo}
        rolled = _run(ray, "rollback", [n for n in nodes if n["node_id"] in by_id], recipe,
                      lambda n: {"recipe": by_id[n["node_id"]].recipe, "root": by_id[n["node_id"]].root,
                                 "previous": by_id[n["node_id"]].previous}, progress) if undo else []
        for r in rolled:
            if not r.ok:
                r.state = NodeState.ROLLBACK_FAILED
        rolled_by_id = {r.node_id: r for r in rolled}
        out = []
        for r in applied:
            if r.node_id in rolled_by_id:
                out.append(rolled_by_id[r.node_id])
            elif r.ok:
                r.state, r.message = NodeState.LEFT_AS_IT_WAS, f"{r.state} before this command; " + r.message
                out.append(r)
            else:
                out.append(r)
        return out


def revert(address: str, recipes: Sequence[str] = (), everything: bool = False,
           root: Optional[str] = None, force: bool = False, progress: Optional[Progress] = None) -> List[NodeResult]:
    """``api.revert`` on every node; a node where the recipe is not applied says ``nothing to revert``."""
    if not recipes and not everything:
        raise PatchkitError("say which recipes to revert, or --all", hint="patchkit revert --ray ADDRESS RECIPE... or --all")
    kwargs = {"recipes": list(recipes), "everything": everything, "root": _root_arg(root), "force": force}
    label = "all" if everything else ",".join(recipes)
    with connect(address) as ray:
        return _run(ray, "revert", alive_nodes(ray), label, lambda n: kwargs, progress)


def status(address: str, root: Optional[str] = None, progress: Optional[Progress] = None) -> List[NodeResult]:
    """``api.status`` on every node: each node's records under its own PATCHKIT_HOME (``.files``), and the
    patchkit lines no record of it explains under ``root`` (default: the node's PATCHKIT_ROOT or environment)."""
    kwargs = {"root": _root_arg(root)}
    with connect(address) as ray:
        return _run(ray, "status", alive_nodes(ray), "", lambda n: kwargs, progress)
