"""Running real verl releases, patched by patchkit, on CPU: the helpers of tests/test_real_verl.py.

A *site* is a folder holding one whole verl wheel (tests/verlenv.py unzips
it); patchkit patches it with ``--root SITE``.  A job is one of the drivers
(tests/verl_drive.py for dp_actor / dp_critic, tests/verl_drive_engine.py for
the engine of verl 0.8 and later) run by this interpreter with the
release's dependencies (tests/verlenv.py) first on PYTHONPATH, under
``torchrun`` (gloo on 127.0.0.1) or as one process.  Each rank of a job
writes its numbers (losses, grad norms, log-probs) as JSON; patchkit writes
its traces and manifests under the save path.

What the traces are checked for (:func:`work`): the ``ProfilerStep#N``
spans the torch profiler draws for each step, and inside each span the
model's own work: the forward of the embedding (``aten::embedding``, one per
micro-batch, the model's first operator), its backward
(``EmbeddingBackward0``, the last of the backward) and the optimizer's step
(``Optimizer.step#...``).
"""

from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import verlenv

TESTS = Path(__file__).resolve().parent
DRIVERS = {"dp": TESTS / "verl_drive.py", "engine": TESTS / "verl_drive_engine.py"}

FORWARD = "aten::embedding"
BACKWARD = "autograd::engine::evaluate_function: EmbeddingBackward0"
OPTIMIZER = "Optimizer.step#"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environ(version: str, home: Path, site: Path, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """A job's environment: the installed release, then its dependencies, then this interpreter's packages."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHKIT_", "RANK", "WORLD_SIZE", "LOCAL_",
                                                                     "MASTER_", "PYTHON"))}
    path = os.pathsep.join([str(site), str(verlenv.site_packages(version))])
    env.update(PATCHKIT_HOME=str(home), PYTHONPATH=path, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONHASHSEED="0")
    env.update(extra or {})
    return env


def patchkit(home: Path, *args: str, code: Optional[int] = 0,
             env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    """``patchkit ARGS`` as a user runs it, with its own PATCHKIT_HOME; it must exit with ``code`` (None: any)."""
    run_env = dict(os.environ, PATCHKIT_HOME=str(home))
    run_env.update(env or {})
    done = subprocess.run([sys.executable, "-m", "patchkit", *args], capture_output=True, text=True, env=run_env,
                          timeout=600)
    assert code is None or done.returncode == code, done.stdout + done.stderr
    return done


def command(driver: str, jobs: str, out: Path, ranks: int = 2, updates: int = 1,
            pause: float = 0.0, stop: Optional[Path] = None) -> List[str]:
    """The command line of a job: ``ranks`` processes under torchrun, or one plain process; with ``stop``, one
    that runs until that file exists (at most ``updates`` rounds; tests/verl_drive.py)."""
    py = sys.executable
    tail = [str(DRIVERS[driver]), jobs, "--out", str(out), "--updates", str(updates), "--pause", str(pause)]
    tail += ["--stop", str(stop)] if stop is not None else []
    if ranks == 1:
        return [py, *tail]
    return [py, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(ranks),
            "--master_addr", "127.0.0.1", "--master_port", str(free_port()), *tail]


def run(argv: Sequence[str], env: Dict[str, str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    cwd.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(list(argv), capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    assert done.returncode == 0, "%s\n%s\n%s" % (" ".join(argv), done.stdout[-3000:], done.stderr[-6000:])
    return done


def numbers(out: Path) -> Dict[int, dict]:
    """Each rank's numbers, by rank."""
    got = {}
    for path in sorted(out.glob("numbers-rank*.json")):
        got[int(path.stem[len("numbers-rank"):])] = json.loads(path.read_text())
    return got


def manifests(save_path: Path) -> List[dict]:
    """The manifests of the captures under ``save_path``, by rank, role and first step; ``steps`` as a list."""
    found = []
    for path in glob.glob(str(save_path / "patchkit-manifests" / "*.json")):
        manifest = json.loads(Path(path).read_text())
        steps = manifest["steps"]
        manifest["steps"] = list(range(steps["first"], steps["last"] + 1)) if steps["count"] else []
        assert len(manifest["steps"]) == steps["count"], manifest
        found.append(manifest)
    return sorted(found, key=lambda m: (m["rank"], m["role"], m["steps"][:1]))


def events(save_path: Path, manifest: dict) -> List[dict]:
    (trace,) = [t["name"] for t in manifest["traces"]]
    with open(save_path / trace) as handle:
        return [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]


def work(save_path: Path, manifest: dict) -> Dict[str, Dict[str, int]]:
    """What each ``ProfilerStep#N`` span of one capture holds of the model's work (forward, backward and
    optimizer steps counted), and under ``outside`` what was recorded outside every span."""
    trace = events(save_path, manifest)
    steps = sorted((e for e in trace if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    out = {s["name"]: {"forward": 0, "backward": 0, "optimizer": 0} for s in steps}
    out["outside"] = {"forward": 0, "backward": 0, "optimizer": 0}
    for e in trace:
        kind = ("forward" if e["name"] == FORWARD else "backward" if e["name"] == BACKWARD
                else "optimizer" if e["name"].startswith(OPTIMIZER) else None)
        if kind is None:
            continue
        end = e["ts"] + e.get("dur", 0)
        holder = next((s["name"] for s in steps if s["ts"] <= e["ts"] and end <= s["ts"] + s["dur"]), "outside")
        out[holder][kind] += 1
    return out
