"""Agent Loop replicas: profiler.replicas picks whole rollout replicas (every process of them), never ranks.

The runtime reads a process's replica from $VERL_REPLICA_RANK (verl 0.8 and later set it in the vLLM server
process, whose vLLM workers inherit it) or, where verl sets none, as ``rank // profiler.replica_size``
(the rule verl's own rollout adapters apply to $RANK).  tests/test_real_targets.py checks on the released
wheels that verl still does both.
"""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

from patchkit.runtime import backends  # noqa: E402
from patchkit import runtime  # noqa: E402
from patchkit.core.errors import OverrideError, RecipeError  # noqa: E402
from patchkit.recipe.load import load, load_recipe  # noqa: E402
from patchkit.runtime.control import REPLICA_ENV, replica  # noqa: E402
from runtime_helpers import lines, settings, trace_files  # noqa: E402
from runtime_helpers import no_profiler_left_running  # noqa: E402,F401  (a fixture)


# ---------------------------------------------------------------------------
# the rule, process by process


@pytest.mark.parametrize("env,size,rank,expected", [
    ("0", 0, 5, 0),  # the env var wins over the rank
    ("3", 4, 0, 3),
    (None, 4, 0, 0), (None, 4, 3, 0), (None, 4, 4, 1), (None, 4, 11, 2),  # rank // replica_size
    (None, 1, 6, 6),
])
def test_the_replica_of_a_process(monkeypatch, env, size, rank, expected):
    _env(monkeypatch, REPLICA_ENV, env)
    monkeypatch.setenv("RANK", str(rank))
    assert replica(size)[0] == expected


def _env(monkeypatch, name, value):
    if value is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("env,size,rank,why", [
    (None, 0, "3", "set profiler.replica_size"),
    ("x", 2, "3", "is not a replica index"), ("-1", 2, "3", "is not a replica index"),
    (None, 2, None, "nor $RANK"),  # an engine's own process (vLLM's mp workers of verl 0.7, SGLang's schedulers)
])
def test_no_replica_when_the_process_cannot_tell(monkeypatch, env, size, rank, why):
    _env(monkeypatch, REPLICA_ENV, env)
    _env(monkeypatch, "RANK", rank)
    value, said = replica(size)
    assert value is None and why in said


@pytest.mark.usefixtures("no_profiler_left_running")
def test_the_rank_is_read_from_the_environment_not_torch_distributed(tmp_path, monkeypatch):
    import torch.distributed as dist

    # inside an engine's process torch.distributed counts within one replica: rank 0 in replica 1 as well
    monkeypatch.delenv(REPLICA_ENV, raising=False)
    monkeypatch.setenv("RANK", "2")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        runtime.configure("rd", **settings(tmp_path / "rd", replicas=(0,), replica_size=2))
        runtime.step("rd")
        runtime.step("rd")
    finally:
        dist.destroy_process_group()
    assert trace_files(tmp_path / "rd") == [] and "rd" in runtime._finished


def _run(tmp_path, monkeypatch, key, rank, env=None, **given):
    monkeypatch.setenv("RANK", str(rank))
    if env is None:
        monkeypatch.delenv(REPLICA_ENV, raising=False)
    else:
        monkeypatch.setenv(REPLICA_ENV, env)
    runtime.configure(key, **settings(tmp_path / key, **given))
    for _ in range(2):
        runtime.step(key)
    return trace_files(tmp_path / key)


@pytest.mark.usefixtures("no_profiler_left_running")
@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_every_process_of_replica_0_profiles_from_the_rank(tmp_path, monkeypatch, rank):
    # two replicas of tp=2: ranks 0-1 are replica 0, ranks 2-3 replica 1
    files = _run(tmp_path, monkeypatch, f"rp{rank}", rank, replicas=(0,), replica_size=2)
    assert bool(files) == (rank < 2)
    if rank >= 2:
        assert f"rp{rank}" in runtime._finished and runtime.report() == []


@pytest.mark.usefixtures("no_profiler_left_running")
@pytest.mark.parametrize("env,profiles", [("0", True), ("1", False), ("2", True)])
def test_the_replica_from_verl_s_env_var(tmp_path, monkeypatch, env, profiles):
    # vLLM worker processes of a verl >= 0.8 server: every one has RANK of its own (here 1), the replica from verl
    files = _run(tmp_path, monkeypatch, "re", 1, env=env, replicas=(0, 2))
    assert bool(files) == profiles


@pytest.mark.usefixtures("no_profiler_left_running")
def test_an_unknown_replica_profiles_nothing_and_says_why_once(tmp_path, monkeypatch, capsys):
    files = _run(tmp_path, monkeypatch, "ru", 0, replicas=(0,))
    runtime.step("ru")
    assert files == []
    said = [ln for ln in lines(capsys) if "ru: not starting: profiler.replicas is set" in ln]
    assert len(said) == 1 and "profiler.replica_size" in said[0]


def test_the_backend_refuses_replicas_with_ranks():
    assert backends.validate({"replicas": (0,), "ranks": (1,)}) == [
        "profiler.replicas and profiler.ranks are both set: pick one"]
    assert backends.validate({"replicas": (0,), "replica_size": 4}) == []


# ---------------------------------------------------------------------------
# recipes


ROLLOUT = textwrap.dedent("""\
    id: bad
    description: a rollout recipe
    target:
      package: vllm
      files: [vllm/v1/worker/gpu_worker.py]
    backend: torch
    profiler:
      ranks: all
      replicas: [0]
    points:
      - class: Worker
        method: execute_model
        at: after_call
        call: self.model_runner.execute_model
    """)


def _write(tmp_path, text):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


def test_a_rollout_recipe_takes_replicas(tmp_path):
    recipe = load_recipe(_write(tmp_path, ROLLOUT))
    assert recipe.recipe.profiler.replicas == (0,) and recipe.recipe.profiler.replica_size == 0


@pytest.mark.parametrize("old,new,fragment,hint", [
    ("package: vllm", "package: verl", "profiler.replicas is for rollout workers", "profiler.ranks"),
    ("ranks: all", "ranks: [1]", "profiler.replicas and profiler.ranks are both set", "replicas=[0]"),
    ("replicas: [0]", "replicas: [-1]", "profiler.replicas must be `all` or a list", "replicas: all"),
])
def test_bad_replicas_name_their_line(tmp_path, old, new, fragment, hint):
    with pytest.raises(RecipeError) as info:
        load_recipe(_write(tmp_path, ROLLOUT.replace(old, new)))
    err = info.value
    assert fragment in err.message and hint in err.hint
    assert err.where.path.endswith("bad.yaml") and (err.where.line, err.where.col) == (9, 13)


@pytest.mark.parametrize("rid", ["vllm-decode", "vllm-ascend-decode", "sglang-forward"])
def test_the_rollout_recipes_accept_replicas_on_the_command_line(rid):
    s = load(rid, ["replicas=[0]", "profiler.replica_size=2"])
    assert s.runtime_settings()["replicas"] == (0,) and s.runtime_settings()["replica_size"] == 2


def test_a_training_recipe_refuses_replicas_on_the_command_line():
    with pytest.raises(OverrideError) as info:
        load("verl-fsdp-update", ["profiler.replicas=[0]"])
    assert "rollout workers" in info.value.message and "command line" in str(info.value.where)


def test_replicas_with_ranks_on_the_command_line_is_an_error():
    with pytest.raises(OverrideError) as info:
        load("vllm-decode", ["profiler.replicas=[0]", "profiler.ranks=[0]"])
    assert "both set" in info.value.message


def test_show_says_which_replicas_profile_and_how_the_replica_is_read():
    from click.testing import CliRunner

    from patchkit.cli.commands import main

    result = CliRunner().invoke(main, ["show", "vllm-decode", "replicas=[0]", "profiler.replica_size=4"])
    assert result.exit_code == 0, result.output
    assert "replicas=(0,), replica_size=4, steps=()," in result.output
    assert "# Replicas: 0, every process of them; the replica is $VERL_REPLICA_RANK, else $RANK // 4." in result.output
    result = CliRunner().invoke(main, ["show", "vllm-decode"])
    assert "# Replicas:" not in result.output
