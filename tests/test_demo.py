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
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("demo: ok") and last.endswith(" is deleted now (--keep keeps it)")
    captured = out.split("== 5. what was captured\n", 1)[1].splitlines()
    assert "ProfilerStep#2" in captured[0] and "`patchkit demo --keep` keeps it to open" in captured[1]  # beside it
    assert list(tmp_path.iterdir()) == []  # the demo works in its own temporary folder


def test_demo_keep_keeps_the_trace_it_names(tmp_path):
    import shutil

    done = subprocess.run([sys.executable, "-m", "patchkit", "demo", "--keep"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    trace = next(ln.split(": ")[0].strip() for ln in done.stdout.splitlines() if "ProfilerStep#2" in ln)
    kept = done.stdout.rstrip().splitlines()[-1]
    try:
        assert kept.startswith("kept ") and trace.startswith(kept[len("kept "):])
        assert "(kept after the demo: open it in Perfetto or TensorBoard)" in done.stdout
        assert __import__("os").path.isfile(trace)
    finally:
        shutil.rmtree(kept[len("kept "):], ignore_errors=True)
