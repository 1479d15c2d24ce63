"""Attach plans on the files the job runs: a job importing its package through PYTHONPATH, or from a venv other
than patchkit's, is attached without --root (the next N steps recorded, losses those of an unattached run, the
code back); --root still wins; a process whose path has the package nowhere is refused naming its path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import attach_helpers as helpers
from attach_helpers import Job, attach
from patchkit.attach import payload, plans
from patchkit.attach.process import read

needs_gdb = pytest.mark.skipif(bool(helpers.gdb_missing() or helpers.ptrace_denied()),
                               reason=helpers.gdb_missing() or helpers.ptrace_denied() or "")
STEPS = 120


def recorded(done, job, plain, n=3):
    assert done.returncode == 0, done.stderr
    (status,) = json.loads(done.stdout)
    assert status["state"] == "restored" and status["original_code"], status
    (capture,) = status["captures"]
    assert [j for j, _ in helpers.recorded_labels(capture["traces"][0])] == list(range(n))
    helpers.left_as_it_was(plain, job, STEPS)
    return status


@needs_gdb
def test_a_job_importing_its_package_through_pythonpath_is_attached_without_root(tmp_path, jobs):
    site = helpers.site(tmp_path)  # on the job's PYTHONPATH only: patchkit's own environment has no pkjob
    plain = Job(tmp_path, site, steps=STEPS, name="plain")
    job = Job(tmp_path, site, steps=STEPS)
    jobs += [plain, job]
    job.wait_steps(10)
    done = attach(tmp_path, [job.pid, helpers.recipe(tmp_path, "logged"), "--steps", 3, "--json"])
    recorded(done, job, plain)
    assert "not installed" not in done.stderr


@needs_gdb
def test_a_job_in_another_venv_is_attached_without_root(tmp_path, jobs):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    venv_site = next(venv.glob("lib/python3*/site-packages"))
    site = helpers.site(tmp_path)
    for name in ("pkjob", "pkjob-1.0.dist-info"):
        (site / name).rename(venv_site / name)
    import torch  # the venv takes torch from this environment through a .pth line, as a shared install would

    (venv_site / "shared.pth").write_text(str(Path(torch.__file__).parent.parent) + "\n")
    empty = tmp_path / "empty"  # the job's PYTHONPATH holds no pkjob: only the venv does
    empty.mkdir()
    plain = Job(tmp_path, empty, steps=STEPS, name="plain", python=str(venv / "bin" / "python"))
    job = Job(tmp_path, empty, steps=STEPS, python=str(venv / "bin" / "python"))
    jobs += [plain, job]
    job.wait_steps(10)
    done = attach(tmp_path, [job.pid, helpers.recipe(tmp_path, "logged"), "--steps", 3, "--json"])
    recorded(done, job, plain)


@needs_gdb
def test_a_package_on_no_folder_of_the_job_s_path_is_refused_naming_the_path(tmp_path, jobs):
    site = helpers.site(tmp_path)
    job = Job(tmp_path, site, steps=400)
    jobs.append(job)
    job.wait_steps(5)
    recipe = helpers.recipe(tmp_path, "logged")
    text = recipe.read_text().replace("package: pkjob", "package: pkjob_gone").replace(
        "distribution: pkjob", "distribution: pkjob-gone").replace("pkjob/train.py", "pkjob_gone/train.py")
    recipe.write_text(text)
    done = attach(tmp_path, [job.pid, recipe, "--steps", 2])
    assert done.returncode == 1
    assert f"process {job.pid} has no pkjob_gone on its path" in done.stderr and str(site) in done.stderr
    assert "hint: pass --root DIR" in done.stderr
    final, _ = job.finish()
    assert all(final["original"].values())


def test_root_wins_over_the_job_s_path(tmp_path, monkeypatch):
    site = helpers.site(tmp_path)
    s = payload.settings(str(helpers.recipe(tmp_path, "logged")), [], None, 2)
    given = plans.Plans(s, 2, str(site))
    given.find([os.getpid()])
    assert given.keys[os.getpid()] == (None, -1)  # not asked: --root names the files
    assert given.spec(os.getpid())["modules"][0]["file"] == str(site / "pkjob" / "train.py")
    monkeypatch.setenv("PATCHKIT_ROOT", str(site))
    env = plans.Plans(s, 2, None)
    env.find([os.getpid()])
    assert env.keys[os.getpid()] == (None, -1)


def test_processes_of_one_environment_share_one_plan_and_the_plans_are_bounded(tmp_path, monkeypatch):
    site = helpers.site(tmp_path)
    s = payload.settings(str(helpers.recipe(tmp_path, "logged")), [], None, 2)
    p = plans.Plans(s, 2, None)
    me = read(os.getpid())
    monkeypatch.setattr(plans, "job_root", lambda proc, settings: (str(site), ("x",)))
    p.find([me.pid, me.ppid])
    assert p.spec(me.pid) is p.spec(me.ppid)
    many = plans.Plans(s, 2, None)
    many.keys = {pid: (f"/nowhere/{pid}", 0) for pid in range(plans.MAX_PLANS + 2)}
    many.plan(list(many.keys))
    last = many.failed(plans.MAX_PLANS + 1)
    assert last is not None and f"more than {plans.MAX_PLANS} environments" in last.message


SYSTEM = next((p for p in (f"/usr/bin/python3.{v}" for v in (13, 12, 11, 10)) if os.access(p, os.X_OK)), "")


@needs_gdb
@pytest.mark.skipif(not SYSTEM, reason="no /usr/bin/python3.10-3.13: the second user needs a Python of its own")
@pytest.mark.parametrize("planted", ["link to /etc/shadow", "fifo"])
def test_a_stranger_s_job_whose_path_holds_a_planted_copy_is_passed_over_and_root_s_own_is_recorded(
        tmp_path, jobs, stranger, planted):
    import tempfile
    import uuid

    token = f"pkplans-{uuid.uuid4().hex[:10]}"
    open_dir = Path(tempfile.mkdtemp(prefix="patchkit-plans-", dir="/tmp"))
    os.chmod(open_dir, 0o755)
    hers = stranger.sticky / "site"
    stranger.run("mkdir", "-p", str(hers / "pkjob"))
    stranger.run("touch", str(hers / "pkjob" / "__init__.py"))
    if planted == "fifo":
        stranger.run("mkfifo", str(hers / "pkjob" / "train.py"))  # would hang a reader
    else:
        stranger.run("ln", "-s", "/etc/shadow", str(hers / "pkjob" / "train.py"))
    decoy = subprocess.Popen([SYSTEM, "-c", "import time\nwhile True: time.sleep(0.1)", token], user=stranger.uid,
                             group=stranger.gid, extra_groups=[], cwd=str(stranger.sticky),
                             env={"PATH": os.defpath, "PYTHONPATH": str(hers)}, stderr=subprocess.PIPE, text=True)
    try:
        site = helpers.site(open_dir)
        job = Job(tmp_path, site, steps=100000, name=token)
        jobs.append(job)
        job.wait_steps(5)
        done = attach(tmp_path, ["--match", token, helpers.recipe(tmp_path, "logged"), "--steps", 2, "--json"],
                      timeout=240)
        assert done.returncode == 0, done.stderr
        said = {s["pid"]: s for s in json.loads(done.stdout)}
        assert said[job.pid]["state"] == "restored" and said[job.pid]["original_code"]
        (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith(f"pid {decoy.pid}: passed over: ")]
        assert str(hers / "pkjob" / "train.py") in line
        assert ("leads out of" in line) if planted != "fifo" else ("FIFO" in line)
        assert "root:" not in done.stdout + done.stderr  # not a byte of /etc/shadow
        assert decoy.poll() is None and not glob_folders(decoy.pid)
    finally:
        decoy.kill()
        decoy.communicate()
        import shutil

        shutil.rmtree(open_dir, ignore_errors=True)


def glob_folders(pid: int):
    import glob

    return glob.glob(f"/tmp/patchkit-attach-{pid}-*")
