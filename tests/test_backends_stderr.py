"""A torch-backend job's stderr holds patchkit's announced lines, and nothing caused by patchkit's own defaults.

The job is the README's worked example on the demo's verl-shaped sample:
``patchkit apply verl-fsdp-update granularity=micro schedule.wait=1
schedule.active=2 --backend torch``, then the training run, each in a process
of its own as a user runs them, with the install the README gives (the
``torch`` extra brings numpy, without which torch says "Failed to initialize
NumPy").  The recipe keeps ``schedule.warmup`` at its default, 0, about which
torch.profiler warns unless the torch backend's code ignores that warning.

One kind of line is torch's own, whatever the settings: torch 2.13's profiler
library (kineto) writes ``USDT: ... profiler_start`` and ``profiler_stop`` at
each window's edges (``KINETO_LOG_LEVEL=6`` hides them, and its errors with
them), so those two are let through by name.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
SAMPLE = REPO / "patchkit" / "demo" / "sample"
KINETO = re.compile(r"USDT:\S+ \S+ \d+:\d+ \S+\] profiler_(start|stop)\Z")


def readme_apply():
    """The worked example's apply line, from the README itself."""
    found = re.search(r"^patchkit (apply verl-fsdp-update granularity=micro [^\n#]*?--backend torch)",
                      README.read_text(encoding="utf-8"), re.M)
    assert found, "the README's worked example no longer applies verl-fsdp-update with --backend torch"
    return found.group(1).split()


def test_the_torch_extra_brings_numpy():
    try:
        import tomllib
    except ImportError:  # Python < 3.11: patchkit's own dependency
        import tomli as tomllib
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert any(re.match(r"numpy\b", req) for req in extras["torch"])
    assert '".[torch,' in README.read_text(encoding="utf-8")  # the README's install takes that extra


def test_a_torch_job_with_the_readme_s_settings_says_only_what_patchkit_announces(tmp_path):
    pytest.importorskip("torch")
    site = tmp_path / "site-packages"
    shutil.copytree(SAMPLE, site, ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PATCHKIT_HOME=str(tmp_path / "home"), PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    for name in ("PATCHKIT_STRICT", "PATCHKIT_ROOT", "KINETO_LOG_LEVEL", "PYTHONWARNINGS", "RANK"):
        env.pop(name, None)
    applied = subprocess.run([sys.executable, "-m", "patchkit", *readme_apply(), "--root", str(site)], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=300)
    assert applied.returncode == 0, applied.stderr

    job = subprocess.run([sys.executable, "-m", "patchkit.demo.train", "--updates", "2"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert job.returncode == 0, job.stderr
    said = job.stderr.splitlines()
    ours = [line for line in said if line.startswith("[patchkit] ")]
    assert [line for line in said if line not in ours and not KINETO.match(line)] == [], job.stderr
    assert len(ours) == 2 and "recording steps 1-2 (rank 0, torch)" in ours[0] and "trace: " in ours[1], job.stderr
    assert "recorded steps 1-2" in job.stdout
