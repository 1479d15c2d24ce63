"""attach.passover: each process --match found checked on its own, its refusal returned (never raised), the refusals
that are the same for every process told apart, and the error when every one was passed over; Session.prepare
passing over what a check of one process refused, and nothing else; launchers and Ray's own processes told from
/proc alone, before any other check; and the whole command on a job under bash -c, nohup, timeout and torchrun.
(tests/test_hostile_attach_decoys.py runs the whole command against a second user's decoys.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import attach_helpers as helpers
from patchkit.attach import access, passover, records, session
from patchkit.attach.passover import Launcher, Passed, PassedOver, checked, for_every_process, launcher, nothing_left
from patchkit.attach.process import AttachError, Process, children, python_name, read, where


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


PY = "/usr/bin/python3.11"
VENV = "/venv/bin/python"


@pytest.mark.parametrize("exe,argv,found", [
    ("/usr/bin/bash", ["bash", "-c", "cd /x && python /x/train.py > run.log"], ("launcher", "bash")),
    ("/usr/bin/dash", ["/bin/sh", "-c", "python /x/train.py"], ("launcher", "dash")),
    ("/usr/bin/timeout", ["timeout", "600", "python", "/x/train.py"], ("launcher", "timeout")),
    ("/usr/bin/env", ["env", "A=1", "python", "/x/train.py"], ("launcher", "env")),
    ("/usr/bin/nohup", ["nohup", "python", "/x/train.py"], ("launcher", "nohup")),
    ("/usr/bin/setsid", ["setsid", "-w", "python", "/x/train.py"], ("launcher", "setsid")),
    ("/usr/bin/srun", ["srun", "-N2", "python", "/x/train.py"], ("launcher", "srun")),
    ("/opt/openmpi/bin/mpirun", ["mpirun", "-np", "8", "python", "/x/train.py"], ("launcher", "mpirun")),
    ("/usr/bin/mpiexec.hydra", ["mpiexec", "-n", "2", "python", "/x/train.py"], ("launcher", "mpiexec.hydra")),
    ("/venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet", ["raylet", "--node_ip_address=1"],
     ("ray", "raylet")),
    ("/venv/lib/ray/core/src/ray/gcs/gcs_server", ["gcs_server", "--log_dir=/tmp/x"], ("ray", "gcs_server")),
    (PY, [VENV, "-m", "torch.distributed.run", "--nproc-per-node", "2", "/x/train.py"], ("launcher", "torchrun")),
    (PY, [VENV, "-u", "-mtorch.distributed.launch", "/x/train.py"], ("launcher", "torch.distributed.launch")),
    (PY, [VENV, "/venv/bin/torchrun", "--standalone", "/x/train.py"], ("launcher", "torchrun")),
    (PY, [VENV, "/venv/bin/accelerate", "launch", "/x/train.py"], ("launcher", "accelerate launch")),
    (PY, [VENV, "-m", "accelerate.commands.launch", "/x/train.py"], ("launcher", "accelerate launch")),
    (PY, [VENV, "-m", "accelerate.commands.accelerate_cli", "launch", "t.py"], ("launcher", "accelerate launch")),
    (PY, [VENV, "/venv/bin/deepspeed", "/x/train.py"], ("launcher", "deepspeed")),
    (PY, [VENV, "-u", "-m", "deepspeed.launcher.launch", "--world_info=e30=", "/x/train.py"],
     ("launcher", "deepspeed.launcher.launch")),
    ("/opt/py/bin/python3.13t", ["ray::IDLE"], ("ray", "ray::IDLE")),
    (PY, ["ray::DashboardAgent"], ("ray", "ray::DashboardAgent")),
    (PY, [VENV, "/venv/lib/python3.11/site-packages/ray/dashboard/dashboard.py", "--host=127.0.0.1"],
     ("ray", "ray/dashboard/dashboard.py")),
    (PY, [VENV, "-u", "/venv/lib/python3.11/site-packages/ray/_private/log_monitor.py", "--logs-dir=/x"],
     ("ray", "ray/_private/log_monitor.py")),
    # the job's own processes, and what /proc does not say for certain
    (PY, [VENV, "/x/train.py"], None),
    (PY, [VENV, "-u", "/x/train.py", "--local_rank=0"], None),  # a rank torchrun or deepspeed started
    (PY, [VENV, "-m", "verl.trainer.main_ppo", "trainer.n_gpus_per_node=8"], None),
    (PY, [VENV, "-c", "import torch.distributed.run"], None),
    (PY, [VENV, "/venv/bin/accelerate", "config"], None),
    (PY, [VENV, "/venv/bin/accelerate", "--", "launch"], None),
    (PY, [VENV, "/home/me/torchrun.py"], None),  # the user's own script
    (PY, [VENV, "/home/me/ray/dashboard/dashboard.py.bak"], None),
    (PY, ["ray::WorkerDict.actor_rollout_compute_log_prob"], None),  # a Ray worker that runs the job's task
    (PY, [VENV, "ray::IDLE"], None),
    (PY, ["torchrun --standalone /x/train.py"], None),  # a title a Python gave itself: one word
    ("/usr/bin/sleep", ["sleep", "60"], None),
    ("", ["bash", "-c", "python /x/train.py"], None),  # another user's, not to be looked into: the kernel says nothing
    ("/tmp/x/python3", ["bash", "-c", "x"], None),  # a Python by its file, whatever it calls itself
])
def test_a_launcher_is_told_from_proc_alone(exe, argv, found):
    proc = Process(42, (0,) * 4, (0,) * 4, (), 1, exe, False, tuple(argv), 9, 0, 0, os.path.basename(exe))
    assert launcher(proc) == found


def started(argv, **kw):
    """A process, once /proc shows it runs ``argv`` (before its exec, the child is a copy of this Python: pytest's
    command line)."""
    proc = subprocess.Popen(argv, **kw)
    for _ in range(600):  # a guard against a hang, not a measurement
        if read(proc.pid).argv == tuple(argv):
            return proc
        time.sleep(0.05)
    pytest.fail(f"{argv} never ran")


def test_a_launcher_is_passed_over_with_one_line_and_no_other_check(tmp_path, monkeypatch):
    monkeypatch.setattr(access, "check", lambda *a: pytest.fail("a launcher is not checked further"))
    torchrun = tmp_path / "bin" / "torchrun"  # a console script as pip writes one: run as `python SCRIPT ...`
    torchrun.parent.mkdir()
    torchrun.write_text("import time\ntime.sleep(60)\n")
    procs = [started(["bash", "-c", "sleep 60; true"]), started(["timeout", "60", "sleep", "60"]),
             started([sys.executable, str(torchrun), "--nproc-per-node", "2", "/x/train.py"])]
    try:
        said = [checked(p.pid, 1) for p in procs]
        assert [s.why for s in said] == [
            "a launcher (bash), its Python children are matched on their own",
            "a launcher (timeout), its Python children are matched on their own",
            "a launcher (torchrun), its Python children are matched on their own"]
        assert all(isinstance(s, Passed) and isinstance(s.error, Launcher) and s.as_json()["error"] == s.why
                   for s in said)
        assert said[0].command == "bash -c sleep 60; true"
        for _ in range(600):  # the shell's child, once it runs
            kids = children(procs[0].pid)
            if kids and read(kids[0]).argv == ("sleep", "60"):
                break
            time.sleep(0.05)
        error = said[0].error  # named by pid, the refusal names what it started
        assert error.message == f"process {procs[0].pid} is a launcher (bash), not a process that trains"
        assert error.hint.startswith(f"give the pid of the process it started that trains: {kids[0]} (sleep 60); ")
        session_ = session.Session([p.pid for p in procs], str(helpers.recipe(tmp_path, "logged")),
                                   root=str(helpers.site(tmp_path)), steps=2)
        with pytest.raises(PassedOver) as every:
            session_.prepare(pass_over=True)
        assert f"pid {procs[2].pid}: a launcher (torchrun), its Python children are matched on their own" in \
            every.value.message
    finally:
        for p in procs:
            for k in children(p.pid):
                os.kill(k, signal.SIGKILL)
            p.kill()
            p.wait()


class Launched(helpers.Running):
    """The job's script started by a launcher: its journal (``.RANK`` appended under torchrun) and its stop file."""

    def __init__(self, tmp_path, name, command, env):
        self.log, self.stop = tmp_path / f"{name}.log", tmp_path / f"{name}.stop"
        with open(tmp_path / f"{name}.err", "w") as err:
            self.proc = subprocess.Popen(command(self.log, self.stop), cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                         stderr=err, text=True)

    def logged(self, suffix=""):
        path = f"{self.log}{suffix}"
        return len(open(path).read().splitlines()) if os.path.exists(path) else 0


@pytest.mark.skipif(bool(helpers.gdb_missing() or helpers.ptrace_denied()),
                    reason=helpers.gdb_missing() or helpers.ptrace_denied() or "")
def test_match_records_every_python_process_of_jobs_under_launchers_and_passes_the_launchers_over(tmp_path):
    import shlex

    site = helpers.site(tmp_path)
    train = tmp_path / "train.py"  # the job's script, matched by its path: every launcher's command line holds it
    train.write_text(helpers.JOB.read_text())
    env = {k: v for k, v in os.environ.items() if k not in ("PATCHKIT_RUN", "RANK", "WORLD_SIZE")}
    env.update(PYTHONPATH=str(site), OMP_NUM_THREADS="1")
    py = sys.executable

    def job(log, stop):
        return [str(train), "--steps", "100000", "--journal", str(log), "--stop", str(stop)]

    jobs = {
        "bash": Launched(tmp_path, "bash", lambda log, stop: [
            "bash", "-c", f"cd {shlex.quote(str(tmp_path))} && {shlex.join([py, *job(log, stop)])} > run.log"], env),
        "nohup": Launched(tmp_path, "nohup", lambda log, stop: ["nohup", py, *job(log, stop)], env),
        "timeout": Launched(tmp_path, "timeout", lambda log, stop: ["timeout", "600", py, *job(log, stop)], env),
        "torchrun": Launched(tmp_path, "ranks", lambda log, stop: [
            py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *job(log, stop)], env),
    }
    try:
        helpers.wait_for(lambda: all(j.logged() > 10 for k, j in jobs.items() if k != "torchrun"), 180,
                         jobs["bash"].proc)
        helpers.wait_for(lambda: jobs["torchrun"].logged(".0") > 10 and jobs["torchrun"].logged(".1") > 10, 180,
                         jobs["torchrun"].proc)
        launchers = {jobs["bash"].proc.pid: "bash", jobs["timeout"].proc.pid: "timeout",
                     jobs["torchrun"].proc.pid: "torchrun"}
        pythons = [*children(jobs["bash"].proc.pid), jobs["nohup"].proc.pid, *children(jobs["timeout"].proc.pid),
                   *children(jobs["torchrun"].proc.pid)]
        assert len(pythons) == 5 and all(str(train) in read(p).argv and python_name(read(p).exe) for p in pythons)
        done = helpers.attach(tmp_path, ["--match", train, helpers.recipe(tmp_path, "logged"), "--root", site,
                                         "--steps", 2, "--json"])
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        said = {s["pid"]: s for s in json.loads(done.stdout)}
        assert sorted(said) == sorted([*launchers, *pythons]), said
        for pid in pythons:
            assert said[pid]["state"] == "restored" and said[pid]["original_code"], said[pid]
            assert said[pid]["captures"][0]["recorded"] == [[0, 1]], said[pid]
        for pid, name in launchers.items():
            why = f"a launcher ({name}), its Python children are matched on their own"
            assert (said[pid]["state"], said[pid]["error"]) == ("passed over", why)
            (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith(f"pid {pid}: ")]
            assert line.startswith(f"pid {pid}: passed over: {why}; "), line
        for j in jobs.values():
            j.stop.touch()
        for j in jobs.values():
            assert j.proc.wait(timeout=120) == 0, (tmp_path / f"{j.log.stem}.err").read_text()[-3000:]
        finals = [json.loads(open(path).read().splitlines()[-1]) for path in
                  [jobs[k].log for k in ("bash", "nohup", "timeout")] + [f"{jobs['torchrun'].log}.{r}" for r in (0, 1)]]
        assert all(f["final"] and all(f["original"].values()) and f["left"] == [] for f in finals), finals
    finally:
        for j in jobs.values():
            for pid in children(j.proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            j.proc.kill()
            j.proc.wait()
