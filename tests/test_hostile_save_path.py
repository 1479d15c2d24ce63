"""A capture's save folder is reached as the state folder is: never a folder, or a link on the way, another user made.

A root job whose working folder is a shared sticky folder (``/tmp``-like), with a relative ``profiler.save_path``,
would put its traces into a folder of that name a second user made there beforehand (the ``stranger`` fixture: a
real user made with useradd).  The runtime refuses it when the capture would start, in every mode (the runtime
driven by a real job here, and ``patchkit attach``): one ``[patchkit]`` line on the job's stderr naming the folder,
its owner and what to do, nothing written into her folder, the job runs on and exits 0.  A folder of the job's own
user records as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import attach_helpers as helpers

pytest.importorskip("torch")
REPO = Path(__file__).resolve().parent.parent

JOB = """\
import json, sys
import torch
import patchkit.runtime as runtime

runtime.configure("sp", backend="torch", level="level0", contents=("cpu",), export_type="text", analysis=False,
                  save_path=sys.argv[1], ranks="all", wait=0, warmup=0, active=2, repeat=1, skip_first=0, mstx=False)
x = torch.randn(8, 8)
for _ in range(4):
    x = torch.tanh(x @ x)
    runtime.step("sp")
print(json.dumps(runtime.report()))
"""


def run_job(cwd, save_path):
    """A real root job driving the runtime with the torch backend, in ``cwd``: (exit status, report, its [patchkit]
    lines, its stderr)."""
    done = subprocess.run([sys.executable, "-c", JOB, str(save_path)], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))
    said = [ln for ln in done.stderr.splitlines() if ln.startswith("[patchkit]")]
    report = json.loads(done.stdout.splitlines()[-1]) if done.stdout.strip() else None
    return done.returncode, report, said, done.stderr


def everything_under(folder):
    return sorted(str(p) for p in Path(folder).rglob("*"))


def refused_once(said, folder, stranger):
    (line,) = [ln for ln in said if "not recording" in ln]
    assert len(said) == 1, said  # the refusal is the job's only line
    assert f"{folder} is owned by uid {stranger.uid}" in line or f"{folder} is a symbolic link owned by uid " \
        f"{stranger.uid}" in line, line
    assert f"owner: {stranger.name}" in line and "use a save path in a folder you own" in line, line


def test_a_relative_save_path_in_a_shared_folder_never_writes_into_the_folder_another_user_made_there(stranger):
    prof = stranger.sticky / "prof"
    stranger.run("mkdir", "-m", "777", str(prof))  # made before root's job starts, open to all: hers
    rc, report, said, err = run_job(stranger.sticky, "./prof")
    assert rc == 0, err
    refused_once(said, prof, stranger)
    assert everything_under(prof) == []
    (capture,) = report
    assert capture["recorded"] == [] and capture["traces"] == [] and "is refused" in capture["error"]


def test_an_absolute_save_path_under_another_user_s_folder_is_refused(stranger, tmp_path):
    hers = stranger.sticky / "outputs"
    stranger.run("mkdir", "-m", "755", str(hers))  # not even writable by root's group: hers all the same
    rc, report, said, err = run_job(tmp_path, hers / "run1" / "traces")
    assert rc == 0, err
    refused_once(said, hers, stranger)
    assert everything_under(hers) == []


def test_a_link_of_another_user_s_on_the_way_is_never_followed(stranger, tmp_path):
    roots = Path(os.path.realpath(tmp_path)) / "roots-own"
    roots.mkdir()
    roots.chmod(0o755)
    stranger.run("ln", "-s", str(roots), str(stranger.sticky / "out"))
    rc, report, said, err = run_job(stranger.sticky, "out/traces")
    assert rc == 0, err
    refused_once(said, stranger.sticky / "out", stranger)
    assert everything_under(roots) == []


def test_a_relative_save_path_in_a_folder_of_the_job_s_own_user_records_as_before(stranger):
    work = stranger.sticky / "roots-work"  # root's own folder, in the same shared folder
    work.mkdir()
    work.chmod(0o755)
    rc, report, said, err = run_job(work, "prof/traces")
    assert rc == 0, err
    (capture,) = report
    assert capture["error"] is None and capture["recorded"] == [[0, 1]], capture
    (trace,) = capture["traces"]
    assert (work / trace).parent == work / "prof" / "traces" and (work / trace).is_file()  # said as the job named it
    assert oct((work / "prof").stat().st_mode & 0o777) == oct(0o755) and (work / "prof").stat().st_uid == 0
    assert not [ln for ln in said if "not recording" in ln], said


@pytest.mark.skipif(bool(helpers.gdb_missing() or helpers.ptrace_denied()),
                    reason=helpers.gdb_missing() or helpers.ptrace_denied() or "")
def test_attach_to_a_job_in_a_shared_folder_refuses_her_folder_and_puts_the_code_back(stranger, tmp_path):
    site = helpers.site(tmp_path)
    prof = stranger.sticky / "prof"
    stranger.run("mkdir", "-m", "777", str(prof))
    job = helpers.Job(stranger.sticky, site, steps=400, pause=0.02)  # its working folder: the shared one
    try:
        job.wait_steps(10)
        done = helpers.attach(tmp_path, [job.pid, helpers.recipe(tmp_path, "logged"), "profiler.save_path=prof",
                                         "--root", site, "--steps", 2, "--json"])
        assert done.returncode == 1, done.stderr  # nothing recorded is a failure, said with what to do
        assert f"pid {job.pid}: nothing recorded: the capture failed (profiler.save_path" in done.stderr
        (status,) = json.loads(done.stdout)
        assert status["state"] == "restored" and status["original_code"] is True, status
        assert status["why"] == "the capture ended with an error before any window"  # not "the window closed"
        (capture,) = status["captures"]
        assert capture["recorded"] == [] and "is refused" in capture["error"], capture
        final, err = job.finish()
    finally:
        job.kill()
    assert job.proc.returncode == 0, err
    refusals = [ln for ln in err.splitlines() if "not recording" in ln]
    assert len(refusals) == 1 and f"{prof} is owned by uid {stranger.uid}" in refusals[0], err
    assert all(final["original"].values()) and final["left"] == []
    assert everything_under(prof) == []
