"""attach.session as an API: every check before any injection, the records another command finds (status, detach),
a record of an ended process forgotten, the processes asked for, and an injection that fails withdrawn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import attach_helpers as helpers
from patchkit.attach import records, session
from patchkit.attach.process import AttachError


def test_every_process_is_checked_before_any_is_injected(tmp_path):
    site = helpers.site(tmp_path)
    sleeper = subprocess.Popen(["sleep", "60"])
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.3)
        s = session.Session([sleeper.pid, job.pid], str(helpers.recipe(tmp_path, "logged")), root=str(site), steps=2)
        with pytest.raises(AttachError, match="is not a Python interpreter"):
            s.prepare()
        assert s.attached == [] and not [p for p in os.listdir("/tmp") if p.startswith(f"patchkit-attach-{job.pid}-")]
        nowhere = session.Session([sleeper.pid], str(helpers.recipe(tmp_path, "logged")), root=str(tmp_path), steps=2)
        with pytest.raises(AttachError, match="is not a Python interpreter"):  # before the plan's own error
            nowhere.prepare()
    finally:
        for p in (sleeper, job):
            p.kill()
            p.wait()


def test_the_processes_asked_for():
    me = session.processes(os.getppid(), [], None)
    assert [p.pid for p in me] == [os.getppid()]
    with pytest.raises(AttachError, match="no process of yours has"):
        session.processes(None, [], "no-process-has-this-in-its-command-line-0x9f3")


@pytest.mark.skipif(bool(helpers.gdb_missing()), reason=helpers.gdb_missing() or "")
def test_an_injection_that_fails_is_withdrawn_everywhere(tmp_path, monkeypatch):
    site = helpers.site(tmp_path)
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                           env=dict(os.environ, PYTHONPATH=str(site)))
    try:
        time.sleep(0.5)
        s = session.Session([job.pid], str(helpers.recipe(tmp_path, "logged")), root=str(site), steps=2)
        s.prepare()

        def refuse(*a):
            raise AttachError("the kernel said no", None)

        monkeypatch.setattr(session.inject, "send", refuse)
        with pytest.raises(AttachError, match="the kernel said no"):
            s.inject()
        assert not os.path.exists(s.attached[0].folder.base) and records.records(job.pid) == []
    finally:
        job.kill()
        job.wait()


def test_an_unreadable_status_fails_that_process_in_one_line_and_asks_it_out():
    from types import SimpleNamespace

    from patchkit.attach import payload
    from patchkit.attach.process import read

    me = read(os.getpid())
    a = session.Attached(SimpleNamespace(proc=me), payload.folder(me, {"recipe": "r"}, ""))
    a.state = "recording"
    s = session.Session([me.pid], "r")
    s.attached = [a]
    with open(os.path.join(a.folder.out, "status.json"), "w") as handle:
        handle.write('{"state": "recording", "x": ' + "[" * 10000 + "]" * 10000 + "}")  # before: RecursionError
    told = []
    s.poll(told.append)
    assert told == [a] and a.state == "failed" and a.done
    assert a.status["error"] == "the job wrote an unreadable status (nested more than 8 deep)"
    assert os.path.isfile(os.path.join(a.folder.out, "detach"))
    assert s.close() == [] and not os.path.exists(a.folder.base)


def test_restored_is_done_once_it_says_clean_or_the_job_ended_or_past_the_bound(monkeypatch):
    """The agent says "restored" as soon as the code is back (a job may end at once), then "clean" once the name it
    put in the module is out too: the command waits for that, not for a job that ended, and not for ever."""
    from types import SimpleNamespace

    from patchkit.attach import payload
    from patchkit.attach.process import read

    me = read(os.getpid())
    a = session.Attached(SimpleNamespace(proc=me), payload.folder(me, {"recipe": "r"}, ""))
    a.state = "recording"
    s = session.Session([me.pid], "r")
    s.attached = [a]

    def says(**status):
        with open(os.path.join(a.folder.out, "status.json"), "w") as handle:
            json.dump(dict({"state": "restored", "original_code": True}, **status), handle)
        s.poll()

    try:
        says()
        assert a.state == "restored" and not a.done and not s.wait(timeout=0.2)  # this process lives on
        says(clean=False)  # a call still in the recipe's code: said, and done
        assert a.done
        a.status, a.state = {}, "recording"
        says()
        monkeypatch.setattr(session, "alive", lambda proc: False)  # the job ended before it said "clean"
        assert a.done
        monkeypatch.setattr(session, "alive", lambda proc: True)
        assert not a.done
        a.settled_by = time.monotonic() - 1  # past the bound (a job that never says it)
        assert a.done and s.wait(timeout=1)
    finally:
        s.close()


@pytest.mark.skipif(bool(helpers.gdb_missing()), reason=helpers.gdb_missing() or "")
def test_the_capture_s_folder_is_the_save_path_resolved_in_the_job_s_working_folder_at_injection(tmp_path,
                                                                                                monkeypatch):
    site = helpers.site(tmp_path)
    (tmp_path / "cwd").mkdir()
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path / "cwd",
                           env=dict(os.environ, PYTHONPATH=str(site)))
    try:
        time.sleep(0.5)
        s = session.Session([job.pid], str(helpers.recipe(tmp_path, "logged")), ["profiler.save_path=rel/t"],
                            root=str(site), steps=2)
        s.prepare()
        monkeypatch.setattr(session.inject, "send", lambda *a: None)
        s.inject()
        assert s.attached[0].save_folder == str(tmp_path / "cwd" / "rel" / "t")
        s.close()
    finally:
        job.kill()
        job.wait()


def test_a_status_that_goes_back_is_not_the_agent_s_and_that_process_is_asked_out(tmp_path, monkeypatch):
    """An agent writes attached, recording, closing, then restored: a status that goes back (her process
    rewriting it to flood the terminal with lines) fails that process, said once, and it is asked out."""
    from attach_helpers import fake_process
    from patchkit.attach import payload
    from patchkit.attach.access import Target
    from patchkit.attach.probe import Interpreter

    a = session.Attached(Target(fake_process(os.geteuid(), os.getpid()), Interpreter((3, 11, 2), False, "", ""),
                                "gdb", "gdb"))
    a.folder = payload.folder(a.target.proc._replace(started=session.read(os.getpid()).started), {"recipe": "r"}, "")
    a.target = a.target._replace(proc=session.read(os.getpid()))
    s = session.Session([os.getpid()], "r")
    s.attached = [a]
    said = []
    try:
        for state in ("recording", "attached", "recording"):
            with open(os.path.join(a.folder.out, "status.json"), "w") as handle:
                json.dump({"state": state, "pid": os.getpid()}, handle)
            s.poll(lambda x: said.append(x.state))
        assert said == ["recording", "failed"] and a.done
        assert "its status went back from recording to attached" in a.status["error"]
        assert os.path.exists(os.path.join(a.folder.out, "detach"))
    finally:
        payload.remove(a.folder)


def test_with_match_the_checks_have_one_bound_and_a_process_still_being_checked_then_is_passed_over(tmp_path,
                                                                                                   monkeypatch):
    """Her helper, stopped by her, keeps her process's check going: --match passes it over once the bound is
    reached, and attaches the others; given by pid, it would be waited for."""
    import threading

    from patchkit.attach import passover
    from patchkit.attach.access import Target
    from patchkit.attach.probe import Interpreter

    site, release = helpers.site(tmp_path), threading.Event()
    hers = subprocess.Popen(["sleep", "60"])

    def checked(pid, lines, install=None):
        if pid == hers.pid:
            release.wait(60)  # her helper, stopped
            return passover.Passed(pid, "", AttachError("late", session.where(pid)))
        return Target(session.read(pid), Interpreter((3, 11, 7), False, sys.executable, ""), "gdb", "gdb")

    monkeypatch.setattr(passover, "checked", checked)
    monkeypatch.setattr(passover, "CHECKS", 1.0)
    try:
        s = session.Session([hers.pid, os.getpid()], str(helpers.recipe(tmp_path, "logged")), root=str(site), steps=2)
        s.prepare(pass_over=True)
        assert [a.pid for a in s.attached] == [os.getpid()]
        (passed,) = s.passed
        assert passed.pid == hers.pid and passed.why == f"process {hers.pid} was not checked within 1 s (its user's " \
                                                        "helper did not answer in time)"
        assert passed.command == "sleep 60"
    finally:
        release.set()
        hers.kill()
        hers.wait()

