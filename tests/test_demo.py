"""`patchkit demo` runs the whole loop for real: diff, apply, train on CPU, trace, revert."""

from __future__ import annotations

import subprocess
import sys


def test_demo_captures_three_steps_and_restores_the_sample(tmp_path):
    done = subprocess.run([sys.executable, "-m", "patchkit", "demo"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "+        _patchkit_runtime.start(\"verl-fsdp-update\")  # patchkit:verl-fsdp-update" in out
    assert "3 steps (ProfilerStep#2, ProfilerStep#3, ProfilerStep#4)" in out
    assert "bytes identical to the sample: yes" in out
    assert out.rstrip().splitlines()[-1].startswith("demo: ok")
    assert list(tmp_path.iterdir()) == []  # the demo works in its own temporary folder
