"""Real captures for the tests of manifests, `patchkit traces` and `patchkit collect`.

The bundled demo sample (a verl-shaped actor) is patched with
``verl-fsdp-update`` and trained on CPU in subprocesses: one process, or two
ranks of a real ``torch.distributed`` gloo group on 127.0.0.1 sharing one
save path, as ranks on one node do.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import patchkit
from patchkit.demo.runner import SAMPLE

REPO = Path(__file__).resolve().parent.parent
RECIPE = "verl-fsdp-update"
TORCH = ("backend=torch", "schedule.wait=1", "schedule.warmup=0", "schedule.active=2", "schedule.repeat=1")

# rank R of a gloo group: the demo's training, then a barrier so that both ranks' windows are in one run
LAUNCH = """
import sys
import torch.distributed as dist
dist.init_process_group("gloo")
from patchkit.demo.train import main
code = main(["--updates", sys.argv[1]])
dist.barrier()
dist.destroy_process_group()
sys.exit(code)
"""


def patched(base: Path, *overrides: str, recipe: str = RECIPE, ledger=None) -> Path:
    """A copy of the demo sample under ``base`` with ``recipe`` applied (recorded in ``ledger``, if given)."""
    site = base / "site"
    shutil.copytree(SAMPLE, site, ignore=shutil.ignore_patterns("__pycache__"))
    outcomes = patchkit.apply(patchkit.load(recipe, list(overrides)), str(site), ledger=ledger)
    assert [o.state for o in outcomes] == ["patched"]
    return site


def job_env(site: Path, extra=None) -> dict:
    """The environment of a training process: ``extra`` over this one, the sample and patchkit first on the path."""
    env = dict(os.environ)
    env.pop("PATCHKIT_STRICT", None)
    env.pop("RANK", None)
    env.update(extra or {})
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(site), str(REPO), env.get("PYTHONPATH", "")] if p)
    return env


def train(site: Path, cwd: Path, updates: int = 2, env=None) -> subprocess.CompletedProcess:
    cwd.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "patchkit.demo.train", "--updates", str(updates)], cwd=cwd,
                          env=job_env(site, env), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_ranks(site: Path, cwd: Path, world: int = 2, updates: int = 2, env=None):
    """``world`` processes of one gloo group, each the demo's training; returns their (stdout, stderr)."""
    cwd.mkdir(parents=True, exist_ok=True)
    port = str(free_port())
    procs = []
    for rank in range(world):
        extra = dict(env or {}, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                     MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable, "-c", LAUNCH, str(updates)], cwd=cwd,
                                      env=job_env(site, extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stdout + stderr
        out.append((stdout, stderr))
    return out


def snapshot(root: Path) -> dict:
    """Every file under ``root`` with its bytes (and every folder), to prove nothing changed."""
    if not root.exists():
        return {}
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


_RUNS: dict = {}


def two_rank_run(factory) -> Path:
    """The save path of one real two-rank gloo run (made once per test session; copy it before changing it)."""
    if "two" not in _RUNS:
        base = factory.mktemp("two-ranks")
        site = patched(base, *TORCH, "profiler.save_path=outputs/traces")
        train_ranks(site, base / "job", env={"PATCHKIT_HOME": str(base / "home")})
        _RUNS["two"] = base / "job" / "outputs" / "traces"
    return _RUNS["two"]


def cli(*args, code=0):
    """``patchkit ARGS`` in this process: the exit status it must give, and never a traceback."""
    from click.testing import CliRunner

    from patchkit.cli.commands import main

    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result
