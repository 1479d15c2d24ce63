"""attach.passover: each process --match found checked on its own, its refusal returned (never raised), the refusals
that are the same for every process told apart, and the error when every one was passed over; Session.prepare
passing over what a check of one process refused, and nothing else.  (tests/test_hostile_attach_decoys.py runs
the whole command against a second user's decoys.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

import attach_helpers as helpers
from patchkit.attach import access, passover, records, session
from patchkit.attach.passover import Passed, PassedOver, checked, for_every_process, nothing_left
from patchkit.attach.process import AttachError, Process, where


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "60"])
    for _ in range(600):  # until it runs sleep (before its exec, the child is a copy of this Python)
        with open(f"/proc/{proc.pid}/cmdline", "rb") as handle:
            if handle.read() == b"sleep\0" + b"60\0":
                break
        time.sleep(0.05)
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def site(tmp_path):
    return helpers.site(tmp_path)


@pytest.fixture
def python(site):
    """A Python process that imports nothing of the recipe's (the probe finds patchkit's runtime: it passes)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env=dict(os.environ, PYTHONPATH=str(site)))
    time.sleep(0.5)
    yield proc
    proc.kill()
    proc.wait()


def stopped_state(pid: int) -> bool:
    for _ in range(600):  # a guard against a hang, not a measurement
        with open(f"/proc/{pid}/status") as handle:
            if any(line.startswith("State:\tT") for line in handle):
                return True
        time.sleep(0.05)
    return False


def test_a_process_that_is_not_python_is_its_own_refusal_with_its_command_line(sleeper):
    found = checked(sleeper.pid, 1)
    assert isinstance(found, Passed) and found.pid == sleeper.pid and found.command == "sleep 60"
    assert found.why.startswith(f"process {sleeper.pid} is not a Python interpreter")
    assert found.as_json() == {"pid": sleeper.pid, "state": "passed over", "passed_over": True, "error": found.why,
                               "command": "sleep 60"}
    gone = checked(999999, 1)
    assert isinstance(gone, Passed) and gone.why == "there is no process 999999" and gone.command == ""


def test_a_stopped_process_is_refused_before_any_other_check_and_left_stopped(python, monkeypatch):
    os.kill(python.pid, signal.SIGSTOP)
    assert stopped_state(python.pid)
    monkeypatch.setattr(access, "check", lambda *a: pytest.fail("a stopped process goes no further"))
    found = checked(python.pid, 1)
    assert isinstance(found, Passed) and found.why.startswith(f"process {python.pid} is stopped (state T")
    assert stopped_state(python.pid)


def test_whatever_a_check_raises_is_that_process_s_refusal_never_a_traceback(python, monkeypatch):
    def crash(*a):
        raise KeyError("version")  # a stranger's interpreter answered something no check expected

    monkeypatch.setattr(access, "check", crash)
    found = checked(python.pid, 1)
    assert isinstance(found, Passed) and found.why == "KeyError: 'version'" and found.error.where == where(python.pid)


def _proc(uid=1000) -> Process:
    return Process(42, (uid,) * 4, (uid,) * 4, (), 1, "/usr/bin/python3.11", False, ("python3.11", "t.py"), 9, 0, 0,
                   "python3.11")


def test_only_what_is_the_same_for_every_process_is_the_command_s():
    gdb = AttachError("gdb is not installed: getting into Python 3.11.2 goes through gdb", where(1), access.GDB_PACKAGE)
    assert for_every_process(gdb)
    for scope in (1, 2, 3):
        message, hint = access.ptrace_problem(_proc(), 1000, 0, scope, False)
        assert for_every_process(AttachError(message, where(1), hint)), scope
    message, hint = access.ptrace_problem(_proc(uid=1001), 1000, 0, 0, False)  # another user's: that process's
    assert not for_every_process(AttachError(message, where(1), hint))
    assert not for_every_process(AttachError("process 1 is stopped (state T: ...)", where(1), "kill -CONT 1"))


def test_every_process_passed_over_is_named_with_why_on_one_line():
    error = nothing_left([(7, "process 7 is not a Python interpreter (it runs /tmp/x\nhint: forged)"),
                          (8, "no answer: it ran no Python for 3 s")])
    assert isinstance(error, PassedOver) and isinstance(error, AttachError)
    assert error.message == ("every process matched was passed over: pid 7: process 7 is not a Python interpreter "
                             "(it runs /tmp/x\\x0ahint: forged); pid 8: no answer: it ran no Python for 3 s")
    assert "\n" not in error.render().split("\n  hint: ")[0]
    many = nothing_left([(p, "x" * 1000) for p in range(30)])
    assert many.message.endswith("; and 10 more") and many.message.count("pid ") == passover.SHOWN
    assert len(many.message) < 30 * 330


@pytest.mark.skipif(bool(helpers.gdb_missing()), reason=helpers.gdb_missing() or "")
def test_prepare_passes_over_one_process_s_refusal_only_when_asked(tmp_path, site, sleeper, python):
    recipe = str(helpers.recipe(tmp_path, "logged"))
    strict = session.Session([sleeper.pid, python.pid], recipe, root=str(site), steps=2)
    with pytest.raises(AttachError, match="is not a Python interpreter"):
        strict.prepare()
    s = session.Session([sleeper.pid, python.pid], recipe, root=str(site), steps=2)
    s.prepare(pass_over=True)
    assert [a.pid for a in s.attached] == [python.pid] and [p.pid for p in s.passed] == [sleeper.pid]
    alone = session.Session([sleeper.pid], recipe, root=str(site), steps=2)
    with pytest.raises(PassedOver, match=f"every process matched was passed over: pid {sleeper.pid}: process "):
        alone.prepare(pass_over=True)
    bad = session.Session([sleeper.pid, python.pid], recipe, ["schedule.active=3"], root=str(site), steps=2)
    with pytest.raises(AttachError, match="a schedule of your own does not apply"):  # the recipe: the command's
        bad.prepare(pass_over=True)


@pytest.mark.skipif(bool(helpers.gdb_missing()), reason=helpers.gdb_missing() or "")
def test_gdb_missing_refuses_the_command_even_with_pass_over(tmp_path, site, sleeper, python, monkeypatch):
    monkeypatch.setattr(access.shutil, "which", lambda name, *a, **k: None)
    s = session.Session([sleeper.pid, python.pid], str(helpers.recipe(tmp_path, "logged")), root=str(site), steps=2)
    with pytest.raises(AttachError) as exc:
        s.prepare(pass_over=True)
    assert exc.value.hint == access.GDB_PACKAGE and not isinstance(exc.value, PassedOver)


@pytest.mark.skipif(bool(helpers.gdb_missing()), reason=helpers.gdb_missing() or "")
def test_with_pass_over_a_process_the_code_could_not_be_sent_to_is_said_failed_its_request_withdrawn(
        tmp_path, site, python, monkeypatch):
    s = session.Session([python.pid], str(helpers.recipe(tmp_path, "logged")), root=str(site), steps=2)
    s.prepare(pass_over=True)

    def refuse(*a):
        raise AttachError("the kernel said no", None)

    monkeypatch.setattr(session.inject, "send", refuse)
    s.inject()  # no raise: flow.run decides (another user's: passed over; one's own: every process comes out)
    (a,) = s.attached
    assert (a.state, a.status) == ("failed", {"error": "the kernel said no"})
    assert os.listdir(a.folder.base) == ["out"]  # the request withdrawn
    s.close()
    assert not os.path.exists(a.folder.base) and records.records(python.pid) == []
