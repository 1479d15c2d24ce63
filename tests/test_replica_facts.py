"""What patchkit's replica rule relies on still holds in every released verl (tests/test_replicas.py tests the rule).

profiler.replicas reads a rollout process's Agent Loop replica from $VERL_REPLICA_RANK, or as
``$RANK // profiler.replica_size``.  Per release, from the real files (tests/realwheels.py):

* 0.8 and 0.9: vLLMHttpServer.__init__ sets os.environ["VERL_REPLICA_RANK"] to its replica, and vLLM runs its
  workers as child processes of that server ("mp" executor), which inherit it.
* 0.6: in hybrid mode the vLLM server drives verl's own workers (ExternalZeroMQDistributedExecutor), and
  replica r is workers[world_size*r : world_size*(r+1)] with world_size = tp*dp*pp: $RANK // replica_size.
* 0.4 and 0.5: the vLLM server of replica (dp rank) d drives actor_names[d*tp : (d+1)*tp] of verl's workers;
  SGLang (0.5): worker_dp_rank = current_global_rank // tp_size: $RANK // replica_size with replica_size = tp.
* 0.7, and the SGLang servers from 0.6 on: the engine's processes belong to the server actor and verl tells them
  nothing about the replica; the runtime then captures nothing and says why.
* Every release: verl's Worker reads its rank from $RANK, which verl sets on every process of a worker group.
"""

from __future__ import annotations

import ast
import re

import pytest
from packaging.version import Version

import realwheels
from patchkit.runtime.control import REPLICA_ENV

_WORKER = "verl/single_controller/base/worker.py"
_VLLM = "verl/workers/rollout/vllm_rollout/vllm_async_server.py"
_SGLANG = "verl/workers/rollout/sglang_rollout/async_sglang_server.py"
_REPLICA = "verl/workers/rollout/replica.py"

VERSIONS = [r.version for r in realwheels.releases("verl") if _WORKER in r.files]  # 0.2, 0.3: the actors only


def _text(version, relpath):
    return realwheels.target_path("verl", version, relpath).read_text(encoding="utf-8")


def _flat(text):
    return re.sub(r"\s+", "", text)


def _sets_replica_env(version):
    """Whether vLLMHttpServer.__init__ assigns os.environ[REPLICA_ENV] = str(replica_rank)."""
    tree = ast.parse(_text(version, _VLLM))
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "vLLMHttpServer"), None)
    if cls is None:
        return False
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    return any(isinstance(n, ast.Assign) and ast.unparse(n) == f"os.environ['{REPLICA_ENV}'] = str(replica_rank)"
               for n in ast.walk(init))


def test_every_supported_verl_is_checked():
    assert VERSIONS == ["0.4.1", "0.5.0", "0.6.1", "0.7.1", "0.8.0", "0.9.1"]


@pytest.mark.parametrize("version", VERSIONS)
def test_verl_workers_read_their_rank_from_RANK(version):
    text = _text(version, _WORKER)
    assert 'os.environ["RANK"]' in text or "os.environ.get(\"RANK\"" in text


@pytest.mark.parametrize("version", VERSIONS)
def test_the_replica_env_var_is_set_from_0_8_on_and_inherited_by_vllm_s_workers(version):
    sets = _sets_replica_env(version)
    assert sets == (Version(version) >= Version("0.8")), version
    if sets:
        assert '"distributed_executor_backend":"mp"' in _flat(_text(version, _VLLM))  # child processes inherit it
    # SGLang's servers never set it
    if Version(version) >= Version("0.5"):
        assert REPLICA_ENV not in _text(version, _SGLANG)


def test_0_6_hybrid_vllm_runs_in_verl_s_workers_laid_out_replica_by_replica():
    server = _flat(_text("0.6.1", _VLLM))
    assert "distributed_executor_backend=ExternalZeroMQDistributedExecutoriflen(self.workers)>0elseNone" in server
    replica = _flat(_text("0.6.1", _REPLICA))
    assert ("self.workers=worker_group.workers[self.world_size*self.replica_rank:self.world_size*"
            "(self.replica_rank+1)]") in replica
    assert ("self.world_size=(self.config.tensor_model_parallel_size*self.config.data_parallel_size"
            "*self.config.pipeline_model_parallel_size") in replica


@pytest.mark.parametrize("version", ["0.4.1", "0.5.0"])
def test_0_4_and_0_5_servers_drive_verl_s_workers_tp_by_tp(version):
    assert "actor_names=actor_names[vllm_dp_rank*vllm_tp_size:(vllm_dp_rank+1)*vllm_tp_size]" in _flat(
        _text(version, _VLLM))
    if version == "0.5.0":
        assert "worker_dp_rank=current_global_rank//self._tp_size" in _flat(_text(version, _SGLANG))


def test_0_7_vllm_workers_are_the_server_s_children_and_learn_no_replica():
    server = _text("0.7.1", _VLLM)
    assert '"distributed_executor_backend":"mp"' in _flat(server) and REPLICA_ENV not in server
    assert "ExternalZeroMQDistributedExecutor" not in server
