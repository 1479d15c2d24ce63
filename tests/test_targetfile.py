"""Writing a target: only over the bytes planned from, under a lock of the file's folder; no lost update.

The races are the ones a tester saw lose lines: a user's line appended while
``apply`` planned, and two state folders applying different recipes to one
file at once.  A writer killed while it holds the lock leaves nothing held.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from patchkit.engine import marks
from patchkit.state import planning
import patchkit
from patchkit.core.errors import LockedError
from patchkit.state.targetfile import Changed, atomic_write, locked, write_source

from conftest import snapshot

DP = "verl/workers/actor/dp_actor.py"


def test_atomic_write_replaces_content_and_keeps_the_mode(tmp_path):
    path = tmp_path / "f.py"
    path.write_bytes(b"old\r\n")
    path.chmod(0o640)
    atomic_write(path, b"new\r\n")
    assert path.read_bytes() == b"new\r\n"
    assert path.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["f.py"]  # no temporary file left behind


def test_a_file_that_changed_since_it_was_read_is_not_written(tmp_path):
    path = tmp_path / "f.py"
    path.write_bytes(b"x = 1\ny = 2\n")  # someone appended y = 2 after patchkit read x = 1
    with pytest.raises(Changed) as info:
        write_source(path, b"x = 1  # patchkit\n", expected=b"x = 1\n")
    assert str(path) in info.value.render() and "run the command again" in info.value.render()
    assert path.read_bytes() == b"x = 1\ny = 2\n"
    write_source(path, b"new\n", expected=b"x = 1\ny = 2\n")
    assert path.read_bytes() == b"new\n"


def test_a_line_appended_while_apply_plans_is_kept(tree, monkeypatch):
    """The user's line lands between patchkit's read and its write: apply plans again and keeps it."""
    root = tree("verl-0.6")
    target = root / DP
    real_plan = planning.plan
    calls = []

    def plan_then_user_appends(*args, **kwargs):
        p = real_plan(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            with open(target, "a", encoding="utf-8") as handle:
                handle.write("USER_LINE = 1\n")
        return p

    monkeypatch.setattr("patchkit.state.transaction.plan", plan_then_user_appends)
    [outcome] = patchkit.apply(patchkit.load("verl-fsdp-update"), str(root))
    assert outcome.state.written and len(calls) == 2
    text = target.read_text(encoding="utf-8")
    assert "USER_LINE = 1\n" in text and "verl-fsdp-update" in marks.applied_ids(text)
    patchkit.revert(["verl-fsdp-update"], root=str(root))
    assert target.read_text(encoding="utf-8").endswith("USER_LINE = 1\n")
    assert "patchkit" not in target.read_text(encoding="utf-8")


def test_a_file_that_keeps_changing_is_refused_after_three_plans(tree, monkeypatch):
    root = tree("verl-0.6")
    target = root / DP
    real_plan = planning.plan

    def plan_then_user_appends(*args, **kwargs):
        p = real_plan(*args, **kwargs)
        with open(target, "a", encoding="utf-8") as handle:
            handle.write("# another line\n")
        return p

    monkeypatch.setattr("patchkit.state.transaction.plan", plan_then_user_appends)
    with pytest.raises(Changed):
        patchkit.apply(patchkit.load("verl-fsdp-update"), str(root))
    assert "patchkit" not in target.read_text(encoding="utf-8")
    assert patchkit.status(root=str(root)) == []


def test_two_state_folders_patching_one_file_lose_neither_patch(tree, tmp_path):
    """Two users (two PATCHKIT_HOMEs) apply different recipes to one file at the same moment, eight times."""
    root = tree("verl-0.6")
    original = snapshot(root)
    for round_ in range(8):
        procs = []
        for rid in ("verl-fsdp-update", "verl-fsdp-logprob"):
            home = tmp_path / f"home-{rid}-{round_}"
            home.mkdir(mode=0o700)
            env = dict(os.environ, PATCHKIT_HOME=str(home))
            procs.append(subprocess.Popen([sys.executable, "-m", "patchkit", "apply", rid, "--root", str(root)],
                                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for proc in procs:
            _out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        text = (root / DP).read_text(encoding="utf-8")
        assert set(marks.applied_ids(text)) >= {"verl-fsdp-update", "verl-fsdp-logprob"}, f"round {round_}"
        (root / DP).write_bytes(original[DP])


def test_the_lock_waits_for_its_holder_and_a_killed_holder_releases_it(tmp_path, monkeypatch):
    path = tmp_path / "f.py"
    path.write_bytes(b"x = 1\n")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from patchkit.state.targetfile import locked
        with locked({str(path)!r}):
            print("held", flush=True)
            time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LockedError, match="another process holds the lock of"):
            with locked(path, timeout=0.3):
                pass
        os.kill(holder.pid, signal.SIGKILL)  # kill -9 while it holds the lock: the kernel lets go of it
        holder.wait(timeout=30)
        write_source(path, b"x = 2\n", expected=b"x = 1\n")  # a lock still held would be a LockedError
        assert path.read_bytes() == b"x = 2\n"
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
