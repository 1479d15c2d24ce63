"""`patchkit capture --ray`: the same request and wait on every alive node, each in its own PATCHKIT_HOME."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence


def _here(recipe: str, steps: int, ranks: Sequence[int], role: str, timeout: float) -> Dict[str, Any]:
    from patchkit.runtime.requests import ask_and_wait

    return ask_and_wait(recipe, steps, ranks, role, timeout)


def ask_every_node(address: str, recipe: str, steps: int, ranks: Sequence[int], role: str,
                   timeout: float) -> List[Dict[str, Any]]:
    from patchkit.cluster.ray import alive_nodes, connect
    from patchkit.cluster.gather import _get, _pinned

    with connect(address) as ray:
        nodes = alive_nodes(ray)
        refs = [(n, _pinned(ray, _here, n["node_id"]).remote(recipe, steps, list(ranks), role, timeout)) for n in nodes]
        return [_get(ray, ref, f"node {n['ip']}") for n, ref in refs]
