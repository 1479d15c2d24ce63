"""`patchkit capture --ray`: the same request and wait on every alive node, each in its own PATCHKIT_HOME."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from patchkit.core.progress import Progress, given


def _here(recipe: str, steps: int, ranks: Sequence[int], role: str, timeout: float) -> Dict[str, Any]:
    from patchkit.runtime.requests import ask_and_wait

    return ask_and_wait(recipe, steps, ranks, role, timeout)


def ask_every_node(address: str, recipe: str, steps: int, ranks: Sequence[int], role: str,
                   timeout: float, progress: Optional[Progress] = None) -> List[Dict[str, Any]]:
    """Each node's :func:`patchkit.runtime.requests.ask_and_wait`; ``progress`` is told each node that answered."""
    from patchkit.cluster.ray import alive_nodes, connect
    from patchkit.cluster.gather import _get, _pinned

    progress = given(progress)
    with connect(address) as ray:
        nodes = alive_nodes(ray)
        refs = [(n, _pinned(ray, _here, n["node_id"]).remote(recipe, steps, list(ranks), role, timeout)) for n in nodes]
        progress.start(len(nodes), f"waiting for {len(nodes)} node(s)", "nodes")
        out = []
        for n, ref in refs:
            out.append(_get(ray, ref, f"node {n['ip']}"))
            progress.advance(1, f"node {n['ip']}")
        return out
