"""Shared helpers: run commands side by side, interleaved, and take medians (the machine is noisy)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from typing import Dict, List, Sequence

PYTHON = sys.executable


def wall(cmd: Sequence[str], env=None) -> float:
    """CPU time (user + system) the command's process used.

    On a shared 2-core machine the wall clock mostly measures the neighbours;
    the CPU time a process spends is what its own work costs, and it is what
    "wall time" means when the machine is otherwise idle.
    """
    proc = subprocess.Popen(list(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, stderr = proc.communicate()
    usage = os.wait4(proc.pid, 0)[2] if proc.returncode is None else None
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{stderr.decode()[-2000:]}")
    return _last_child_cpu() if usage is None else usage.ru_utime + usage.ru_stime


_seen_cpu = [0.0]


def _last_child_cpu() -> float:
    """CPU time of the child that just ended: the growth of this process's children total."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = usage.ru_utime + usage.ru_stime
    spent, _seen_cpu[0] = total - _seen_cpu[0], total
    return spent


def interleaved(commands: Dict[str, Sequence[str]], rounds: int, env=None, pick=statistics.median) -> Dict[str, float]:
    """Median (or ``pick``) of each command's time, the commands taking turns round after round."""
    times: Dict[str, List[float]] = {name: [] for name in commands}
    _last_child_cpu()
    for cmd in commands.values():  # warm-up: .pyc files written, files in the page cache
        wall(cmd, env)
    for _ in range(rounds):
        for name, cmd in commands.items():
            times[name].append(wall(cmd, env))
    return {name: pick(ts) for name, ts in times.items()}


def verdict(ratio: float, goal: float) -> str:
    return "PASS" if ratio <= goal else "FAIL"


def env_with(**extra) -> dict:
    """The environment for timed commands: like an installed package, with compiled .pyc files."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env
