"""Ray clusters on this machine for the tests of ``--ray``: two nodes (tests/test_ray.py, tests/test_collect.py), or
one (tests/test_cluster_attach.py)."""

from __future__ import annotations

import contextlib
from typing import Iterator

import pytest

SMALL = {"object_store_memory": 80 * 1024 * 1024}


@contextlib.contextmanager
def _head(cpus: int, env) -> Iterator:
    """A cluster whose head has ``cpus`` CPUs for tasks and gives its Ray workers ``env``; shut down afterwards."""
    pytest.importorskip("ray", reason='Ray is not installed (pip install "patchkit-profiler[ray]")')
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={**SMALL, "num_cpus": cpus, "include_dashboard": False,
                                                            "env_vars": env})
    try:
        yield cluster
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


@contextlib.contextmanager
def two_nodes(a, b) -> Iterator[str]:
    """A head node and one worker node, each started with its ``env`` (the nodes' own PATCHKIT_HOME, ...); sets
    ``a.id`` and ``b.id`` to their Ray node ids and yields the cluster's address.  The head has no CPU for tasks,
    as heads of training clusters often have none: patchkit's tasks still run there."""
    with _head(0, a.env) as cluster:
        a.id = cluster.head_node.node_id
        b.id = cluster.add_node(**SMALL, num_cpus=1, env_vars=b.env).node_id
        cluster.wait_for_nodes()
        yield cluster.address


@contextlib.contextmanager
def one_node(env) -> Iterator[str]:
    """A one-node cluster (a head with one CPU) whose Ray workers get ``env``; yields its address.  Every node of
    a cluster on one machine sees the same processes: a test of what each node finds needs one node."""
    with _head(1, env) as cluster:
        cluster.wait_for_nodes()
        yield cluster.address
