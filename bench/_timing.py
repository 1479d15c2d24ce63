"""Shared helpers: run commands side by side, interleaved, and take medians (the machine is noisy)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Sequence

PYTHON = sys.executable


def wall(cmd: Sequence[str], env=None) -> float:
    start = time.perf_counter()
    done = subprocess.run(list(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{done.stderr.decode()[-2000:]}")
    return elapsed


def interleaved(commands: Dict[str, Sequence[str]], rounds: int, env=None) -> Dict[str, float]:
    """Median wall time of each command, the commands taking turns round after round."""
    times: Dict[str, List[float]] = {name: [] for name in commands}
    for cmd in commands.values():  # warm-up: .pyc files written, files in the page cache
        wall(cmd, env)
    for _ in range(rounds):
        for name, cmd in commands.items():
            times[name].append(wall(cmd, env))
    return {name: statistics.median(ts) for name, ts in times.items()}


def verdict(ratio: float, goal: float) -> str:
    return "PASS" if ratio <= goal else "FAIL"


def env_with(**extra) -> dict:
    """The environment for timed commands: like an installed package, with compiled .pyc files."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env
