"""`patchkit attach` on real CPU training loops started without patchkit: exactly the next N steps recorded, each
ProfilerStep# holding its own step's work, the job's own code objects back, its losses those of an unattached run;
decorated targets, a closure, two processes, two ranks under torchrun, Ctrl-C mid-window, detach and --status from
another command, and each refusal (exit 1, nothing changed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import attach_helpers as helpers
from patchkit.attach import records
from attach_helpers import Job, attach, wait_for

pytestmark = pytest.mark.skipif(bool(helpers.gdb_missing() or helpers.ptrace_denied()),
                                reason=helpers.gdb_missing() or helpers.ptrace_denied() or "")
STEPS = 160  # each job's whole run; the window comes in its middle


@pytest.fixture
def site(tmp_path):
    return helpers.site(tmp_path)


def start(jobs, tmp_path, site, **kw):
    job = Job(tmp_path, site, **kw)
    jobs.append(job)
    return job


def check_window(job, status, n):
    """Steps k..k+n-1, k the first call begun after the code went in, each ProfilerStep#j holding step k+j alone."""
    (capture,) = status["captures"]
    (trace,) = capture["traces"]
    spans = helpers.recorded_labels(trace)
    assert [j for j, _ in spans] == list(range(n)) and all(len(labels) == 1 for _, labels in spans), spans
    k = spans[0][1][0]
    assert [labels[0] for _, labels in spans] == list(range(k, k + n))
    log = {ln["step"]: ln for ln in job.steps()}
    at = status["attached_at"]
    assert log[k - 1]["start"] < at < log[k]["end"], "the window starts at the first call after the attach"
    return trace


@pytest.mark.parametrize("mode", ["logged", "wrapped", "closure"])
def test_the_next_steps_are_recorded_and_the_job_is_left_as_it_was(tmp_path, site, jobs, mode):
    unattached = start(jobs, tmp_path, site, mode=mode, steps=STEPS, name="plain")
    job = start(jobs, tmp_path, site, mode=mode, steps=STEPS)
    job.wait_steps(20)
    done = attach(tmp_path, [job.pid, helpers.recipe(tmp_path, mode), "--root", site, "--steps", 3, "--json"])
    assert done.returncode == 0, done.stderr
    (status,) = json.loads(done.stdout)
    assert status["state"] == "restored" and status["original_code"] and status["why"] == "the window closed"
    check_window(job, status, 3)
    assert f"pid {job.pid}: attached" in done.stderr and "the job's own code is back" in done.stderr
    final, err = job.finish(stop=False)
    plain, _ = unattached.finish(stop=False)
    assert final["steps"] == plain["steps"] == STEPS and final["losses"] == plain["losses"]
    assert all(final["original"].values()) and final["left"] == []
    manifests = list((tmp_path / "traces" / "patchkit-manifests").glob("*.json"))
    assert len(manifests) == 1 and json.loads(manifests[0].read_text())["steps"]["count"] == 3
    traces = subprocess.run([sys.executable, "-m", "patchkit", "traces", str(tmp_path / "traces"), "--json"],
                            capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(helpers.REPO)))
    assert f"pkjob-{mode}" in traces.stdout, traces.stderr


def test_two_processes_each_record_their_own_window(tmp_path, site, jobs):
    a = start(jobs, tmp_path, site, name="a")
    b = start(jobs, tmp_path, site, name="b")
    a.wait_steps(10)
    b.wait_steps(10)
    done = attach(tmp_path, ["--pids", f"{a.pid},{b.pid}", helpers.recipe(tmp_path, "logged"), "--root", site,
                             "--steps", 2, "--json"])
    assert done.returncode == 0, done.stderr
    statuses = {s["pid"]: s for s in json.loads(done.stdout)}
    for job in (a, b):
        check_window(job, statuses[job.pid], 2)
        final, _ = job.finish()
        assert all(final["original"].values())


def test_two_ranks_under_torchrun_are_found_by_match_and_the_launcher_is_passed_over(tmp_path, site, jobs):
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    job = start(jobs, tmp_path, site, name="ranks", launcher=launcher, steps=600, env={"OMP_NUM_THREADS": "1"})
    log0, log1 = Path(f"{job.log}.0"), Path(f"{job.log}.1")
    wait_for(lambda: log0.exists() and log1.exists() and len(log1.read_text().splitlines()) > 10, 180, job.proc)
    done = attach(tmp_path, ["--match", str(job.log), helpers.recipe(tmp_path, "logged"), "--root", site,
                             "--steps", 2, "--json"])
    assert done.returncode == 0, done.stderr
    statuses = json.loads(done.stdout)
    recorded = [s for s in statuses if s["state"] == "restored"]
    assert len(recorded) == 2 and all(s["captures"][0]["recorded"] == [[0, 1]] for s in recorded)
    (launcher,) = [s for s in statuses if s["state"] == "passed over"]  # told from /proc: no gdb stop in it
    assert launcher["pid"] == job.pid and launcher["error"].startswith("a launcher (torchrun)"), launcher
    assert len({tuple(s["captures"][0]["traces"]) for s in recorded}) == 2  # each rank its own trace
    job.stop.touch()
    job.proc.communicate(timeout=120)
    for log in (log0, log1):
        final = json.loads(log.read_text().splitlines()[-1])
        assert all(final["original"].values())


def test_ctrl_c_mid_window_puts_the_code_back_and_keeps_what_was_recorded(tmp_path, site, jobs):
    unattached = start(jobs, tmp_path, site, steps=2 * STEPS, name="plain")
    job = start(jobs, tmp_path, site, steps=2 * STEPS)
    job.wait_steps(20)
    env = dict(os.environ, PYTHONPATH=str(helpers.REPO))
    cmd = [sys.executable, "-m", "patchkit", "attach", str(job.pid), str(helpers.recipe(tmp_path, "logged")), "--root",
           str(site), "--steps", "500", "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    wait_for(lambda: list((tmp_path / "traces").glob("*.json")) or helpers.recording(), 60, proc)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted: putting the job's own code back" in err
    (status,) = json.loads(out)
    assert status["state"] == "restored" and status["original_code"] and status["why"] == "detached"
    (first, last), = status["captures"][0]["recorded"]
    assert first == 0 and 1 <= last < 499  # part of the window, flushed at the next step
    final, _ = job.finish(stop=False)
    plain, _ = unattached.finish(stop=False)
    assert final["losses"] == plain["losses"] and all(final["original"].values()) and final["left"] == []


def test_status_and_detach_from_another_command(tmp_path, site, jobs):
    job = start(jobs, tmp_path, site, steps=100000)
    job.wait_steps(10)
    env = dict(os.environ, PYTHONPATH=str(helpers.REPO))
    cmd = [sys.executable, "-m", "patchkit", "attach", str(job.pid), str(helpers.recipe(tmp_path, "logged")), "--root",
           str(site), "--steps", "500"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    wait_for(lambda: helpers.recording(), 60, proc)
    shown = attach(tmp_path, ["--status", job.pid])
    assert shown.returncode == 0 and f"pid {job.pid}: pkjob-logged: recording" in shown.stdout, shown.stderr
    gone = subprocess.run([sys.executable, "-m", "patchkit", "detach", str(job.pid)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert gone.returncode == 0 and "the job's own code is back" in gone.stdout, (gone.stdout, gone.stderr, job.finish()[1][-3000:])
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "(detached)" in err
    assert "nothing attached" in attach(tmp_path, ["--status", job.pid]).stderr
    final, _ = job.finish()
    assert all(final["original"].values())


def test_each_refusal_is_an_error_and_changes_nothing(tmp_path, site, jobs):
    recipe = helpers.recipe(tmp_path, "logged")
    job = start(jobs, tmp_path, site, steps=100000)
    job.wait_steps(5)
    sleeper = subprocess.Popen(["sleep", "60"])
    quiet = start(jobs, tmp_path, site, name="quiet", steps=100000, env={"PYTHON_DISABLE_REMOTE_DEBUG": "1"})
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             env=dict(os.environ, PYTHONPATH=str(site)))
    try:
        quiet.wait_steps(1)
        cases = [
            ([999999, recipe], {}, "there is no process 999999"),
            ([sleeper.pid, recipe], {}, "is not a Python interpreter"),
            ([quiet.pid, recipe], {}, "PYTHON_DISABLE_REMOTE_DEBUG"),
            ([job.pid, recipe], {"PATH": os.path.dirname(sys.executable)}, "gdb is not installed"),
            ([other.pid, recipe], {}, "has not imported pkjob.train"),
            ([job.pid, recipe, "schedule.active=3"], {}, "a schedule of your own does not apply"),
        ]
        for args, env, says in cases:
            done = attach(tmp_path, [*args, "--root", site], env=env)
            assert done.returncode == 1 and says in done.stderr and "Traceback" not in done.stderr, (says, done.stderr)
        train = site / "pkjob" / "train.py"
        train.write_text(train.read_text().replace("self.done += 1", "self.done += 1  # edited\n        pass"))
        done = attach(tmp_path, [job.pid, recipe, "--root", site])
        assert done.returncode == 1 and "changed on disk since the job imported it" in done.stderr
    finally:
        for p in (sleeper, other):
            p.kill()
            p.wait()
    final, err = job.finish()
    quiet.finish()
    assert all(final["original"].values()) and final["left"] == [] and not list((tmp_path / "traces").glob("*"))
    assert not [p for p in os.listdir("/tmp") if p.startswith(f"patchkit-attach-{job.pid}-")]


def test_only_the_owner_or_root_may_attach(tmp_path, site, jobs):
    system = f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"  # one another user may run
    if os.geteuid() != 0 or not os.path.exists(system):
        pytest.skip("needs root (to run the command as another user) and a system Python of this version")
    import site as site_module
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="patchkit-home-"))
    os.chown(home, 65534, 65534)
    job = start(jobs, tmp_path, site, steps=100000)
    try:
        job.wait_steps(2)
        env = {"PATH": os.defpath, "PATCHKIT_HOME": str(home),
               "PYTHONPATH": os.pathsep.join([str(helpers.REPO), *site_module.getsitepackages()])}
        sample = helpers.REPO / "patchkit" / "demo" / "sample"  # a recipe and a tree that user may read
        done = subprocess.run([system, "-m", "patchkit", "attach", str(job.pid), "verl-fsdp-update", "--root",
                               str(sample)], capture_output=True, text=True, env=env, cwd="/", timeout=300,
                              user=65534, group=65534, extra_groups=[])
        assert done.returncode == 1 and "only its owner or root may attach" in done.stderr, done.stderr
    finally:
        import shutil

        shutil.rmtree(home, ignore_errors=True)
    final, _ = job.finish()
    assert all(final["original"].values())


def test_each_process_is_said_once_attached_even_when_first_seen_recording_and_a_launcher_is_passed_over(capsys):
    from types import SimpleNamespace as NS

    from patchkit.cli.attach import Said

    said = Said(match="train")
    status = {"targets": ["m:Trainer.fit"], "functions": 1, "steps": 2, "running": ["Trainer.fit"]}
    said(NS(pid=7, state="recording", status=status))
    said(NS(pid=7, state="restored", status=dict(status, original_code=True, why="the window closed", captures=[])))
    said(NS(pid=8, state="refused", status={"error": "the job has not imported m (yet?): attach when it has", "reason": "not imported"}))
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "pid 7: attached (m:Trainer.fit: 1 function(s)); recording the next 2 step(s) from the next call"
    assert lines[1].startswith("pid 7: note: Trainer.fit is running now and keeps its own code until it returns")
    assert lines[2:4] == ["pid 7: recording",
                          "pid 7: nothing recorded: its capture never started in this process; the job's own code "
                          "is back (the window closed)"]
    assert lines[4] == "pid 8: passed over: the job has not imported m (yet?): attach when it has" and len(lines) == 5
    Said()(NS(pid=8, state="refused", status={"error": "the job has not imported m"}))
    assert capsys.readouterr().err == "pid 8: refused: the job has not imported m; nothing changed\n"


def test_a_window_still_waiting_is_said_with_what_to_do(capsys):
    from types import SimpleNamespace as NS

    from patchkit.cli.attach import still_waiting

    still_waiting([NS(pid=7, status={"targets": ["m:Trainer.fit"]})], 60.0)
    assert capsys.readouterr().err == ("pid 7: still waiting for the next call of m:Trainer.fit (60 s); a function "
                                       "not called again never opens the window: Ctrl-C puts the job's own code "
                                       "back\n")
    still_waiting([NS(pid=7, status={"targets": ["m:Trainer.fit"], "calls": 0}),
                   NS(pid=8, status={"targets": ["m:Trainer.fit"], "calls": 450})], 120.0)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == ("pid 7: still waiting: no call of m:Trainer.fit since its code went in (120 s); a function not "
                        "called again never opens the window: Ctrl-C puts the job's own code back")
    assert lines[1] == ("pid 8: still waiting: m:Trainer.fit called 450 time(s) since its code went in (120 s), the "
                        "recipe's point not reached: a point no call reaches (after a return) never opens the window; "
                        "`patchkit points` shows each one's points: Ctrl-C puts the job's own code back")


def test_a_job_that_ends_with_its_window_open_ends_the_attach_too(tmp_path, site, jobs):
    job = start(jobs, tmp_path, site, steps=100000)
    job.wait_steps(5)
    environ = dict(os.environ, PYTHONPATH=str(helpers.REPO))
    environ.pop("PATCHKIT_RUN", None)
    attaching = subprocess.Popen([sys.executable, "-m", "patchkit", "attach", str(job.pid),
                                  str(helpers.recipe(tmp_path, "logged")), "--root", str(site), "--steps", "1000",
                                  "--json"], cwd=tmp_path, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
    wait_for(lambda: [s["state"] for s in records.status(job.pid)] == ["recording"], 120, attaching)
    job.finish()  # the job ends (its --stop file) with the window open
    out, err = attaching.communicate(timeout=120)  # a guard: before the fix this waited for ever
    assert attaching.returncode == 1, err
    (status,) = json.loads(out)
    assert status["state"] == "gone" and status["error"] == "the process ended", status
    assert f"pid {job.pid}: the process ended" in err


def test_what_a_job_says_is_running_is_read_as_a_stranger_s(capsys):
    from types import SimpleNamespace as NS

    from patchkit.cli.attach import Said

    for running in ("Trainer.fit", {"a": 1}, [1, None, "x" * 5000] + ["f"] * 100):
        Said()(NS(pid=7, state="attached", status={"targets": ["m:f"], "running": running}))
    lines = capsys.readouterr().err.splitlines()
    notes = [ln for ln in lines if ": note: " in ln]
    assert len(lines) == 3 + 20 and len(notes) == 20 and all(len(ln) < 500 for ln in notes)
