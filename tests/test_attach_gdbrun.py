"""attach.gdbrun: a tool that gets into a job runs in its own session with nothing of the command's; one past its time
is asked to leave, SIGINT first, then SIGTERM, SIGKILL last (said with what it may leave); an interrupt waits for
the tool, withdrawing the request first; PATCHKIT_GDB_TIMEOUT sets the time, a wrong value is one line.  (The real
gdb in a real job: tests/test_hostile_attach_signals.py.)"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from patchkit.attach import gdbrun
from patchkit.attach.process import AttachError

RECORD = """import json, os, sys
fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
print(json.dumps({"sid": os.getsid(0), "pgid": os.getpgid(0), "pid": os.getpid(),
                  "stdin": os.readlink("/proc/self/fd/0"), "fds": fds}))
"""


def test_the_tool_runs_in_its_own_session_with_no_terminal_and_no_descriptor_of_ours():
    import json

    r, w = os.pipe()
    kept = os.dup2(r, 57)  # an inheritable descriptor of this command's
    try:
        code, said = gdbrun.run([sys.executable, "-c", RECORD], os.getpid(), 60, lambda: None)
    finally:
        for fd in (kept, r, w):
            os.close(fd)
    seen = json.loads(said)
    assert code == 0 and seen["sid"] == seen["pgid"] == seen["pid"] != os.getsid(0)
    assert seen["stdin"] == "/dev/null" and 57 not in seen["fds"] and max(seen["fds"]) <= 3  # 3: the listing's own


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(gdbrun, "ASKS", ((signal.SIGINT, 3.0), (signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)))


@pytest.mark.parametrize("ignores,says", [
    ("", "it was interrupted and let go of the process, which runs on as it was"),
    ("INT", "did not leave when interrupted and was terminated; process 4242 runs on unless gdb was inside a call"),
    ("INT TERM", "it was killed: process 4242 may be left stopped (`kill -CONT 4242` resumes it) or may have ended"),
])
def test_a_tool_past_its_time_is_asked_to_leave_gently_first(quick, ignores, says):
    tool = ["sh", "-c", f"trap '' {ignores}; exec sleep 60" if ignores else "exec sleep 60"]
    with pytest.raises(AttachError) as err:
        gdbrun.run(tool, 4242, 1, lambda: None)
    assert err.value.message.startswith("gdb did not finish within 1 s; ") and says in err.value.message
    assert "PATCHKIT_GDB_TIMEOUT" in err.value.hint


def test_an_interrupt_withdraws_first_then_waits_for_the_tool_to_end_then_goes_on(tmp_path, monkeypatch):
    told, withdrawn = [], threading.Event()
    monkeypatch.setattr(gdbrun, "_tell", told.append)
    go, done = tmp_path / "go", tmp_path / "done"
    tool = ["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done; touch {done}"]

    def ctrl_c():
        import _thread

        _thread.interrupt_main()
        withdrawn.wait(60)
        go.touch()  # the tool ends only once the interrupt was taken and the request withdrawn

    threading.Timer(0.2, ctrl_c).start()
    with pytest.raises(KeyboardInterrupt):
        gdbrun.run(tool, 4242, 60, withdrawn.set)
    assert done.exists() and withdrawn.is_set()
    assert told == ["waiting for gdb to leave process 4242 before stopping"]


def test_an_interrupt_while_other_threads_run_tools_is_settled_in_the_main_thread(tmp_path, monkeypatch):
    told, withdrawn = [], []
    monkeypatch.setattr(gdbrun, "_tell", told.append)
    go, started = tmp_path / "go", threading.Event()

    def one(pid):
        started.set()
        return gdbrun.run(["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done; echo left {pid}"], pid, 60,
                          lambda: (withdrawn.append(pid), go.touch()))

    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(one, 4242)
        never = pool.submit(one, 4343)  # not begun when the interrupt comes: never started
        for _ in range(6000):
            if gdbrun._in_jobs:
                break
            time.sleep(0.01)
        else:
            pytest.fail("the first tool never started")
        gdbrun.settle(pool)
    assert first.result() == (0, "left 4242\n") and never.cancelled()
    assert withdrawn == [4242] and told == ["waiting for gdb to leave process 4242 before stopping"]


@pytest.mark.parametrize("value,seconds", [("", 120.0), ("2.5", 2.5), ("abc", None), ("0", None), ("-1", None)])
def test_the_time_a_tool_may_take_comes_from_patchkit_gdb_timeout(monkeypatch, value, seconds):
    monkeypatch.setenv("PATCHKIT_GDB_TIMEOUT", value)
    if seconds is not None:
        assert gdbrun.limit() == seconds
        return
    with pytest.raises(AttachError, match=f"PATCHKIT_GDB_TIMEOUT='{value}' is not a number of seconds"):
        gdbrun.limit()
