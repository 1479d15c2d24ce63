"""Signals meant for root's terminal never reach the neighbour's job through gdb (issue 37, class 4).

Root attaches to a job of another user's (the ``stranger`` fixture: made with useradd, so root only; the job's
files in the stranger's sticky folder).  ``gdb`` on the attaching command's PATH is a stand-in that runs the real
gdb with one more call before gdb's own commands, a three-second ``sleep`` inside the job, so that a signal lands
while gdb runs a function in the job, without timing luck: the test waits until the job is traced and running
that call.  Then the attaching command's whole process group gets a hangup (its terminal closed), SIGTERM or
SIGINT (Ctrl-C); or gdb's own time limit expires in that call.  Each time the job lives on, neither stopped nor
traced, sees no KeyboardInterrupt, keeps stepping with its own code (nothing recorded), and the command ends
with its documented status (130 interrupted, 1 with a line past gdb's time) and leaves no request folder.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import attach_helpers as helpers

pytestmark = pytest.mark.skipif(bool(helpers.gdb_missing() or helpers.ptrace_denied()),
                                reason=helpers.gdb_missing() or helpers.ptrace_denied() or "")

REPO = Path(__file__).resolve().parent.parent

JOB = """\
import json, os, sys, time
import pkjob.train as train
inner = vars(train.Trainer)["step_logged"].__closure__[0].cell_contents
original = inner.__code__
t = train.Trainer()
log = open(sys.argv[1], "a")
saw, i = None, 0
try:
    while not os.path.exists(sys.argv[2]):
        t.step_logged(i)
        log.write(json.dumps({"step": i}) + "\\n")
        log.flush()
        i += 1
        time.sleep(0.02)
except BaseException as exc:
    saw = type(exc).__name__
log.write(json.dumps({"final": True, "saw": saw, "back": inner.__code__ is original,
                      "left": sorted(n for n in vars(train) if "patchkit" in n)}) + "\\n")
"""

SLOW_GDB = """#!/bin/sh
exec {gdb} -ex 'sharedlibrary libc[.-]' -ex 'print ((unsigned int (*)(unsigned int)) sleep)({seconds})' "$@"
"""


def stranger_python(stranger) -> str:
    """A CPython 3.10-3.13 the stranger can run, that imports patchkit's runtime from this checkout as them."""
    for candidate in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if not candidate:
            continue
        try:
            done = subprocess.run([candidate, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                                   "import patchkit.runtime.attach.agent; print('%d.%d' % sys.version_info[:2])", str(REPO)],
                                  user=stranger.uid, group=stranger.gid, extra_groups=[], capture_output=True,
                                  text=True, timeout=60, cwd="/")
        except PermissionError:  # in a folder only root may enter
            continue
        if done.returncode == 0 and done.stdout.strip() in ("3.10", "3.11", "3.12", "3.13"):
            return candidate
    pytest.skip("no CPython 3.10-3.13 here that another user can run and import this checkout's patchkit from "
                "(the interpreter or the checkout lies in a folder only root can read)")


class StrangersJob:
    """The stranger's job: pkjob's Trainer stepped in a loop, one line per step, a last line with what it saw."""

    def __init__(self, stranger, python: str):
        self.site = helpers.site(stranger.sticky)
        helpers.plain(self.site)
        script, self.log, self.stop = (stranger.sticky / n for n in ("job.py", "job.log", "job.stop"))
        script.write_text(JOB)
        self.proc = subprocess.Popen([python, str(script), str(self.log), str(self.stop)], user=stranger.uid,
                                     group=stranger.gid, extra_groups=[], cwd=stranger.sticky, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env={"PATH": os.defpath,
                                                                             "PYTHONPATH": str(self.site)},
                                     start_new_session=True)
        self.pid = self.proc.pid

    def lines(self):
        text = self.log.read_text() if self.log.exists() else ""
        return [json.loads(ln) for ln in text.splitlines() if ln.endswith("}")]

    def steps(self) -> int:
        return sum(1 for ln in self.lines() if "step" in ln)

    def status(self) -> dict:
        fields = dict(ln.split(":\t", 1) for ln in Path(f"/proc/{self.pid}/status").read_text().splitlines()
                      if ":\t" in ln)
        return {"state": fields["State"].split()[0], "tracer": int(fields["TracerPid"])}


@pytest.fixture
def strangers_job(stranger):
    job = StrangersJob(stranger, stranger_python(stranger))
    yield job
    if job.proc.poll() is None:
        job.proc.kill()
        job.proc.communicate()


def slow_gdb(tmp_path, seconds: int) -> Path:
    folder = tmp_path / "slow-gdb"
    folder.mkdir()
    (folder / "gdb").write_text(SLOW_GDB.format(gdb=shutil.which("gdb"), seconds=seconds))
    (folder / "gdb").chmod(0o755)
    return folder


def wait(ready, seconds: float, what: str) -> None:
    end = time.time() + seconds
    while not ready():
        if time.time() > end:
            pytest.fail(f"{what}: not so after {seconds} s")
        time.sleep(0.02)


def attach_in_gdb_s_call(tmp_path, job, sleep: int, env=None):
    """``patchkit attach`` (in a session of its own, as a terminal's) started on the job through the slow gdb; back
    once gdb runs its call in the job (the job traced, and running: no longer stopped by gdb)."""
    wait(lambda: job.steps() >= 5, 120, "the stranger's job stepping")
    recipe = helpers.recipe(tmp_path, "logged")
    environ = dict(os.environ, PYTHONPATH=str(REPO), PATH=f"{slow_gdb(tmp_path, sleep)}:{os.environ['PATH']}",
                   **(env or {}))
    environ.pop("PATCHKIT_RUN", None)
    attach = subprocess.Popen([sys.executable, "-m", "patchkit", "attach", str(job.pid), str(recipe), "--root",
                               str(job.site), "--timeout", "60"], cwd=tmp_path, env=environ, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)

    def in_call():
        if attach.poll() is not None:
            pytest.fail(f"the attach ended before gdb got in (exit {attach.returncode}): {attach.communicate()[1]}")
        now = job.status()
        return now["tracer"] != 0 and now["state"] in ("S", "R")

    wait(in_call, 120, "gdb running its call in the job")
    time.sleep(0.3)  # well inside the three seconds
    return attach


def left_alone(job, attach, tmp_path):
    """The job alive, neither stopped nor traced, stepping on with its own code; nothing recorded; no folder left."""
    out, err = attach.communicate(timeout=300)
    assert job.proc.poll() is None, f"the job ended ({job.proc.returncode}): {job.proc.communicate()[1][-2000:]}"
    now = job.status()
    assert now["state"] not in ("T", "t") and now["tracer"] == 0, (now, err)
    steps = job.steps()
    wait(lambda: job.steps() >= steps + 10, 120, "the job stepping on after the attach ended")
    job.stop.touch()
    _, job_err = job.proc.communicate(timeout=120)
    final = [ln for ln in job.lines() if "final" in ln][-1]
    assert final == {"final": True, "saw": None, "back": True, "left": []}, (final, job_err)
    assert "Traceback" not in job_err and "KeyboardInterrupt" not in job_err, job_err
    assert "recording" not in err and "recorded" not in err, err
    assert not (tmp_path / "traces").exists()
    assert glob.glob(f"/tmp/patchkit-attach-{job.pid}-*") == []
    return err


@pytest.mark.parametrize("sign", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT], ids=["hangup", "term", "ctrl-c"])
def test_a_signal_to_the_attaching_command_s_group_waits_for_gdb_and_leaves_the_job_running(
        tmp_path, strangers_job, sign):
    attach = attach_in_gdb_s_call(tmp_path, strangers_job, 3)
    os.killpg(attach.pid, sign)  # as a closed terminal, `kill -TERM -PGID`, Ctrl-C do
    err = left_alone(strangers_job, attach, tmp_path)
    assert attach.returncode == 130, err
    assert f"waiting for gdb to leave process {strangers_job.pid} before stopping" in err, err
    assert "interrupted: putting the job's own code back" in err, err
    assert "Traceback" not in err, err


def test_gdb_past_its_time_in_a_call_is_interrupted_not_killed_and_the_job_runs_on(tmp_path, strangers_job):
    attach = attach_in_gdb_s_call(tmp_path, strangers_job, 60, env={"PATCHKIT_GDB_TIMEOUT": "8"})
    err = left_alone(strangers_job, attach, tmp_path)
    assert attach.returncode == 1, err
    assert (f"pid {strangers_job.pid}: gdb did not finish within 8 s; it was interrupted and let go of the process, "
            "which runs on as it was") in err, err
    assert "Traceback" not in err, err
