"""The benchmarks still run: each script is run once with the smallest settings (figures come from real runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.mark.parametrize("script,args,says", [
    ("runtime_overhead.py", ["--calls", "200", "--reps", "1", "--window-calls", "5"], "ratio injected / prof.step()"),
    ("startup.py", ["--rounds", "1"], "goal <= 1.5x"),
    ("traces.py", ["--quick"], "goal (peak < 300 MB and no slower than HTA) applies to the 1 GB trace"),
    ("attach.py", ["--quick"], "goal"),  # where gdb or tracing is missing it says so instead of measuring
    ("auto.py", ["--quick"], "goal"),
])
def test_the_benchmark_runs_to_its_verdict(script, args, says, tmp_path):
    done = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, cwd=tmp_path,
                          timeout=600)
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: a goal missed on this run; never a crash
    assert says in done.stdout and "Traceback" not in done.stderr
