"""`patchkit attach --match TEXT` among strangers: a decoy never keeps root from its own job.

A second user (the ``stranger`` fixture: useradd, so root only) starts processes whose command lines hold the
text root matches on: one that is not Python (``sleep``), a Python stopped with SIGSTOP, and a Python whose main
thread sits blocked in a call (reading a pipe no one writes), so it never takes the code.  Root's own job runs
under a launcher of root's own (``bash -c ... python .../attach_job.py ...``), which matches too.  Root's attach
records exactly the asked steps of its job, says one ``passed over`` line for each decoy with why, exits 0, and
leaves every decoy as it was: the stopped one still stopped, the blocked one holding no patchkit code (its request
withdrawn before it ever ran it).  When only decoys match, the command fails naming each; a stopped process
named by pid is refused with a line and left stopped.  Each node of ``attach --ray`` runs the same session.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from types import ModuleType, SimpleNamespace

import pytest

import attach_helpers as helpers
from attach_helpers import Job, attach
from patchkit.attach import process

CANNOT = helpers.gdb_missing() or helpers.ptrace_denied()
pytestmark = pytest.mark.skipif(bool(CANNOT), reason=CANNOT or "")

# A Python the second user may run, of a version attach gets into through gdb (root's own live in root's home).
SYSTEM = next((p for p in (f"/usr/bin/python3.{v}" for v in (13, 12, 11, 10)) if os.access(p, os.X_OK)), "")
needs_system_python = pytest.mark.skipif(not SYSTEM, reason="no /usr/bin/python3.10-3.13: the second user needs "
                                                            "a Python of its own to start the Python decoys")

LAUNCHER = ["bash", "-c", '"$0" "$@"; exit $?', sys.executable]  # bash stays: the job's python is its child
BLOCKED = """\
import json, sys, time
print("ready", flush=True)
sys.stdin.buffer.read(1)  # blocked in a call: no bytecode runs, so no pending call either
for _ in range(100):  # bytecodes again: code queued meanwhile runs here
    time.sleep(0.01)
print(json.dumps(sorted(m for m in sys.modules if "patchkit" in m)), flush=True)
"""


def state(pid: int) -> dict:
    with open(f"/proc/{pid}/status") as handle:
        return dict(line.rstrip("\n").split(":\t", 1) for line in handle if ":\t" in line)


def wait_until(ready, what: str, seconds: float = 60) -> None:
    end = time.time() + seconds
    while not ready():
        if time.time() > end:
            pytest.fail(f"{what}: not after {seconds} s")
        time.sleep(0.05)


def folders(pid: int):
    return glob.glob(f"/tmp/patchkit-attach-{pid}-*")


class Decoys:
    """The stranger's processes whose command lines hold ``token``."""

    def __init__(self, stranger, token: str):
        self.stranger, self.token, self.started = stranger, token, []
        self.sleeper = self.start([f"sleep-{token}", "600"], executable="/bin/sleep")
        self.stopped = self.start([SYSTEM, "-c", "import time; time.sleep(600)", token])
        self.blocked = self.start([SYSTEM, "-c", BLOCKED, token], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.blocked.stdout.readline() == "ready\n"
        wait_until(lambda: state(self.stopped.pid)["State"].startswith("S"), "the stranger's python asleep")
        os.kill(self.stopped.pid, signal.SIGSTOP)
        wait_until(lambda: state(self.stopped.pid)["State"].startswith("T"), "the stranger's python stopped")
        self.stale = {pid: set(folders(pid)) for pid in self.pids}  # left by an earlier process of the same pid

    def start(self, argv, **kw):
        kw.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(argv, user=self.stranger.uid, group=self.stranger.gid, extra_groups=[],
                                cwd=self.stranger.sticky, env={"PATH": os.defpath}, stderr=subprocess.PIPE,
                                text=True, **kw)
        self.started.append(proc)
        return proc

    @property
    def pids(self):
        return [p.pid for p in (self.sleeper, self.stopped, self.blocked)]

    def as_they_were(self, queued: bool = True) -> None:
        """Each still running, the stopped one still stopped, none traced, no request folder of any left; the
        blocked one, woken, ran the code queued in it (``queued``), which found its request withdrawn: no
        patchkit in it."""
        for pid in self.pids:
            assert state(pid)["TracerPid"] == "0" and not set(folders(pid)) - self.stale[pid]
        assert state(self.stopped.pid)["State"].startswith("T")
        assert state(self.sleeper.pid)["State"][0] in "SR" and state(self.blocked.pid)["State"][0] in "SR"
        out, err = self.blocked.communicate("x", timeout=60)
        assert json.loads(out) == [], (out, err)
        if queued:
            assert "the request was withdrawn before this process ran it; nothing done" in err, err
        else:
            assert "patchkit" not in err, err

    def kill(self):
        for proc in self.started:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)  # a stopped process too
            proc.wait(timeout=60)
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()


@pytest.fixture
def token():
    return f"pkdecoy-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def open_site():
    """The job's package in a folder every user may read (pytest's own folder is root's 0700): a decoy of the
    stranger's is asked for its code, not refused for a file its user cannot read."""
    import shutil
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp(prefix="patchkit-decoys-", dir="/tmp"))
    os.chmod(folder, 0o755)
    yield helpers.site(folder)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def decoys(stranger, token):
    started = Decoys(stranger, token)
    yield started
    started.kill()


@pytest.fixture
def launched(tmp_path, token, open_site):
    """Root's own job, started by a launcher of root's: (the job, the launcher's pid, the job's python's pid)."""
    site = open_site
    job = Job(tmp_path, site, name=token, steps=100000, launcher=LAUNCHER)
    python = []
    try:
        job.wait_steps(10)
        python = children(job.pid)
        assert len(python) == 1 and process.read(python[0]).argv[0] == sys.executable
        yield job, site, python[0]
    finally:
        for pid in python or children(job.pid):  # first: it holds the launcher's pipes, which job.kill() reads
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        job.kill()


def children(pid: int):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(p) for p in handle.read().split()]
    except OSError:
        return []


def passed_lines(stderr: str, pid: int):
    return [ln for ln in stderr.splitlines() if ln.startswith(f"pid {pid}: passed over: ")]


@needs_system_python
def test_decoys_are_passed_over_and_root_s_own_job_records_exactly_its_steps(tmp_path, decoys, launched, token):
    job, site, python = launched
    done = attach(tmp_path, ["--match", token, helpers.recipe(tmp_path, "logged"), "--root", site, "--steps", 2,
                             "--timeout", 10, "--json"])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    said = {s["pid"]: s for s in json.loads(done.stdout)}
    assert sorted(said) == sorted([job.pid, python, *decoys.pids])
    mine = said[python]
    assert (mine["state"], mine["original_code"], mine["why"]) == ("restored", True, "the window closed")
    (capture,) = mine["captures"]
    assert capture["recorded"] == [[0, 1]]
    (trace,) = capture["traces"]
    spans = helpers.recorded_labels(trace)
    assert [j for j, _ in spans] == [0, 1] and all(len(labels) == 1 for _, labels in spans), spans
    assert spans[1][1][0] == spans[0][1][0] + 1  # two steps of the job, one after the other
    why = {job.pid: "a launcher (bash), its Python children are matched on their own",
           decoys.sleeper.pid: "is not a Python interpreter (it runs /usr/bin/sleep)",
           decoys.stopped.pid: "is stopped (state T: SIGSTOP, or Ctrl-Z in its terminal)",
           decoys.blocked.pid: "no answer: it ran no Python for 10 s"}
    for pid, says in why.items():
        (line,) = passed_lines(done.stderr, pid)
        assert says in line, line
        assert said[pid]["error"] and said[pid]["state"] in ("passed over", "no answer"), said[pid]
    assert said[decoys.sleeper.pid]["command"] == f"sleep-{token} 600"
    assert not passed_lines(done.stderr, python)
    decoys.as_they_were()
    final, _ = job.finish()
    assert all(final["original"].values()) and final["left"] == []


@needs_system_python
def test_when_only_decoys_match_the_command_fails_naming_each(tmp_path, decoys, token, open_site):
    site = open_site
    done = attach(tmp_path, ["--match", token, helpers.recipe(tmp_path, "logged"), "--root", site, "--timeout", 3])
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (error,) = [ln for ln in done.stderr.splitlines() if "every process matched was passed over" in ln]
    assert f"pid {decoys.sleeper.pid}: process {decoys.sleeper.pid} is not a Python interpreter" in error
    assert f"pid {decoys.stopped.pid}: process {decoys.stopped.pid} is stopped" in error
    assert f"pid {decoys.blocked.pid}: no answer: it ran no Python for 3 s" in error
    assert not list((tmp_path / "traces").glob("*"))
    decoys.as_they_were()


@needs_system_python
def test_a_process_whose_user_cannot_read_the_planned_file_is_passed_over_with_nothing_sent(tmp_path, decoys,
                                                                                            token):
    site = helpers.site(tmp_path)  # under pytest's folder: root's, 0700
    done = attach(tmp_path, ["--match", token, helpers.recipe(tmp_path, "logged"), "--root", site, "--timeout", 3])
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (error,) = [ln for ln in done.stderr.splitlines() if "every process matched was passed over" in ln]
    assert (f"pid {decoys.blocked.pid}: the job's user uid {decoys.stranger.uid} cannot read "
            f"{site / 'pkjob' / 'train.py'}") in error
    decoys.as_they_were(queued=False)  # refused before anything was sent to it


@needs_system_python
def test_a_stopped_process_named_by_pid_is_refused_with_a_line_and_left_stopped(tmp_path, decoys):
    site = helpers.site(tmp_path)
    pid = decoys.stopped.pid
    for named in ([pid], ["--pids", f"{pid},{decoys.blocked.pid}"]):
        done = attach(tmp_path, [*named, helpers.recipe(tmp_path, "logged"), "--root", site, "--timeout", 3])
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert f"process {pid} is stopped (state T: SIGSTOP, or Ctrl-Z in its terminal)" in done.stderr
        assert f"kill -CONT {pid}" in done.stderr and "passed over" not in done.stderr
    decoys.as_they_were(queued=False)  # refused before anything was sent to any process named


@pytest.fixture
def a_node(monkeypatch):
    """What a Ray task's node is asked for: its id (the rest of the session is this machine's)."""
    ray = ModuleType("ray")
    ray.get_runtime_context = lambda: SimpleNamespace(get_node_id=lambda: "n" * 56)
    monkeypatch.setitem(sys.modules, "ray", ray)


@needs_system_python
def test_each_node_of_attach_ray_passes_the_decoys_over_too(tmp_path, decoys, launched, token, a_node):
    from patchkit.cluster import attach as on_nodes

    job, site, python = launched
    asked = {"match": token, "recipe": str(helpers.recipe(tmp_path, "logged")), "overrides": [], "backend": None,
             "root": str(site), "versions": [False, None], "steps": 2, "timeout": 10.0, "driver": os.getpid(),
             "machine": process.machine()}
    answer = on_nodes.checked(on_nodes._here(asked), {"node_id": "n" * 56, "ip": "10.0.0.1"})
    assert answer.state == on_nodes.RECORDED and answer.ok, answer
    (mine,) = answer.attached
    assert mine["pid"] == python and mine["captures"][0]["recorded"] == [[0, 1]]
    passed = {p["pid"]: p for p in answer.processes if p["passed_over"]}
    assert sorted(passed) == sorted([job.pid, *decoys.pids])
    assert "is stopped" in passed[decoys.stopped.pid]["error"] and passed[decoys.blocked.pid]["state"] == "no answer"
    decoys.as_they_were()
    os.kill(python, signal.SIGKILL)
    answer = on_nodes.checked(on_nodes._here(dict(asked, timeout=3.0)), {"node_id": "n" * 56, "ip": "10.0.0.1"})
    assert answer.state == on_nodes.NOTHING_TO_ATTACH, answer  # only decoys (and the launcher) left
    assert "was passed over" in answer.message


WATCHER = """\
import os, signal, sys, time
sign, marker, mode, end = getattr(signal, sys.argv[1]), sys.argv[2].encode(), sys.argv[3], time.time() + 600


def mine():  # her processes whose command line holds the marker: patchkit's helper, once it runs as her
    found = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and int(name) != os.getpid() and os.stat("/proc/" + name).st_uid == os.getuid():
                with open("/proc/" + name + "/cmdline", "rb") as handle:
                    if marker in handle.read():
                        found.append(int(name))
        except (OSError, ValueError):
            pass
    return found


while time.time() < end:  # each helper, as soon as it is hers
    for pid in mine():
        try:
            os.kill(pid, sign)
        except OSError:
            pass
    time.sleep(0.002)
"""


def pythons_of_hers(stranger, token, n):
    started = [subprocess.Popen([SYSTEM, "-c", "import time; time.sleep(600)", token], user=stranger.uid,
                                group=stranger.gid, extra_groups=[], cwd=stranger.sticky, env={"PATH": os.defpath},
                                stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(n)]
    return started


@needs_system_python
def test_her_stopping_the_helper_run_as_her_passes_only_her_processes_over_within_the_checks_bound(
        tmp_path, stranger, launched, token):
    sign, mode = "SIGSTOP", "each"  # every question asked as her, stopped (tests/test_attach_session.py: the bound)
    job, site, python = launched
    hers = pythons_of_hers(stranger, token, 12)
    stale = {pid: set(folders(pid)) for pid in [python, *(p.pid for p in hers)]}  # an earlier process's, its pid
    watcher = subprocess.Popen([SYSTEM, "-c", WATCHER, sign, "import_error", mode], user=stranger.uid, group=stranger.gid,
                               extra_groups=[], cwd=stranger.sticky, env={"PATH": os.defpath},
                               stdin=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        done = attach(tmp_path, ["--match", token, helpers.recipe(tmp_path, "logged"), "--root", site, "--steps", 2,
                                 "--timeout", 10, "--json"])
    finally:
        for proc in hers + [watcher]:
            proc.kill()
            proc.wait(timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    said = {s["pid"]: s for s in json.loads(done.stdout)}
    assert said[python]["state"] == "restored" and said[python]["captures"][0]["recorded"] == [[0, 1]]
    passed = [ln for p in hers for ln in passed_lines(done.stderr, p.pid)]
    assert len(passed) == len(hers), done.stderr  # each: its helper out of time, or its check past the bound
    assert all("was not checked within 30 s" in ln or "helper" in ln for ln in passed), passed
    assert not [pid for pid in stale if set(folders(pid)) - stale[pid]]

