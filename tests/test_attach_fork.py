"""A child forked while a recipe is attached runs the job's own code and records nothing (patchkit.runtime.attach.fork).

A real CPU job, attached with gdb by ``patchkit attach``, forks at every step a child with ``os.fork`` and one with
multiprocessing's ``fork`` start method; each child calls the target a few times (more than the window's steps)
and says what it ran.  Exactly the parent's requested steps are recorded, in one trace of the parent's, the
children run the original code object and hold no capture, and the parent gets its code back as before.  Then the
hook itself, in this process: a fork mid-window, and a fork while another thread holds the runtime's lock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import attach_helpers as helpers
from patchkit.runtime.attach import agent, fork
from test_attach_agent import inner_of, job, spec_for, status, wait_state  # noqa: F401  (job: a fixture)

gdb = pytest.mark.skipif(bool(helpers.gdb_missing() or helpers.ptrace_denied()),
                         reason=helpers.gdb_missing() or helpers.ptrace_denied() or "")

FORKING = """\
import json, multiprocessing, os, sys
import torch

torch.set_num_threads(1)
from pkjob import train

journal, stop, results = sys.argv[1:4]
trainer = train.Trainer(0, 0.02)
inner = vars(train.Trainer)["step_logged"].__closure__[0].cell_contents
original = inner.__code__
log = open(journal, "a")


def capturing():
    process = sys.modules.get("patchkit.runtime.process")
    return sorted(process.captures) if process else []


def child(kind, swapped, recording):
    at_start = inner.__code__ is original
    for i in range(5):
        trainer.step_logged(1000 + i)
    out = {"kind": kind, "pid": os.getpid(), "original_at_start": at_start, "original": inner.__code__ is original,
           "parent_swapped": swapped, "parent_recording": recording, "capturing": capturing()}
    with open(os.path.join(results, kind + "-" + str(os.getpid()) + ".json"), "w") as f:
        json.dump(out, f)


i = 0
while not os.path.exists(stop) and i < 3000:
    trainer.step_logged(i)
    log.write(json.dumps({"step": i}) + "\\n")
    log.flush()
    swapped, recording = inner.__code__ is not original, bool(capturing())
    pid = os.fork()
    if pid == 0:
        try:
            child("fork", swapped, recording)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    worker = multiprocessing.get_context("fork").Process(target=child, args=("mp", swapped, recording))
    worker.start()
    worker.join()
    i += 1
log.write(json.dumps({"final": True, "original": inner.__code__ is original,
                      "left": sorted(n for n in vars(train) if "patchkit" in n)}) + "\\n")
"""


class Forking(helpers.Running):
    """The job above: one line per step in its log; its children's reports in ``results``; stderr in a file."""

    def __init__(self, tmp: Path, site: Path):
        self.log, self.stop, self.results = tmp / "forking.log", tmp / "forking.stop", tmp / "children"
        self.results.mkdir()
        script = tmp / "forking.py"
        script.write_text(FORKING)
        self.err = open(tmp / "forking.err", "w+")
        env = dict(os.environ, PYTHONPATH=str(site))
        env.pop("PATCHKIT_RUN", None)
        self.proc = subprocess.Popen([sys.executable, str(script), str(self.log), str(self.stop), str(self.results)],
                                     cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=self.err, text=True)
        self.pid = self.proc.pid

    def children(self):
        return [json.loads(p.read_text()) for p in sorted(self.results.glob("*.json"))]

    def stderr(self):
        self.err.seek(0)
        return self.err.read()


@gdb
def test_children_forked_while_attached_run_the_job_s_code_and_only_the_parent_records(tmp_path):
    site = helpers.site(tmp_path)
    job = Forking(tmp_path, site)
    try:
        job.wait_steps(3)
        done = helpers.attach(tmp_path, [job.pid, helpers.recipe(tmp_path, "logged"), "--root", site, "--steps", 3,
                                         "--json"])
        assert done.returncode == 0, done.stderr + job.stderr()[-3000:]
        (status_,) = json.loads(done.stdout)
        assert status_["state"] == "restored" and status_["original_code"] is True, status_
        assert status_["why"] == "the window closed"
        (capture,) = status_["captures"]
        assert capture["recorded"] == [[0, 2]], capture
        (trace,) = capture["traces"]
        assert f"_{job.pid}." in os.path.basename(trace)
        job.stop.touch()
        job.proc.wait(timeout=300)
    finally:
        job.kill()
    assert job.proc.returncode == 0, job.stderr()[-3000:]
    final = job.lines()[-1]
    assert final["final"] and final["original"] is True and final["left"] == []
    children = job.children()
    assert all(c["original_at_start"] and c["original"] and c["capturing"] == [] for c in children), \
        [c for c in children if not (c["original_at_start"] and c["original"] and c["capturing"] == [])]
    for kind in ("fork", "mp"):  # the case itself happened: forked mid-window, from the parent's swapped code
        assert any(c["parent_recording"] and c["parent_swapped"] for c in children if c["kind"] == kind), children
    saved = sorted((tmp_path / "traces").rglob("*"))
    assert [p.name for p in saved if p.name.endswith(".pt.trace.json")] == [os.path.basename(trace)]
    assert len([p for p in saved if p.parent.name == "patchkit-manifests"]) == 1, saved
    pids = {str(c["pid"]) for c in children}
    assert not [p for p in saved if pids & set(p.name.replace(".", "_").split("_"))], saved
    assert "in the child" not in job.stderr()  # the hook said nothing: everything went back


def forked(check):
    """``check()`` run in a child forked from here (os.fork); what it returned, or its error, back through a pipe.
    One torch thread while it forks (a child of a process whose OpenMP pool ran waits for it forever, as a
    DataLoader worker would), and a child that hangs is ended by an alarm (its answer then: it said nothing)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    read, write = os.pipe()
    pid = -1
    try:
        pid = os.fork()
    finally:
        if pid != 0:
            torch.set_num_threads(threads)
    if pid == 0:
        try:
            signal.alarm(60)
            os.close(read)
            try:
                out = {"ok": check()}
            except BaseException as exc:  # noqa: BLE001 - said to the parent
                out = {"error": f"{type(exc).__name__}: {exc}"}
            os.write(write, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as handle:
        said = handle.read()
    os.waitpid(pid, 0)
    return json.loads(said or '{"error": "the child said nothing"}')


def test_a_fork_mid_window_gets_the_original_code_and_never_drives_the_parent_s_profiler(job, tmp_path, capfd):
    train, site = job
    spec = spec_for(tmp_path, site, steps=4)
    inner, original = inner_of(train), inner_of(train).__code__
    trainer = train.Trainer(0, 0.0)
    agent.attach(spec)
    trainer.step_logged(0)
    wait_state(spec, "recording")
    from patchkit.runtime import process

    def child():
        for i in range(6):  # past the window's end: a copied capture would close and write it here
            trainer.step_logged(10 + i)
        return {"original": inner.__code__ is original, "captures": sorted(process.captures),
                "active": agent.ACTIVE == {}, "runtime_left": agent.RUNTIME in vars(train),
                "finished": "pkjob-logged" in process.finished, "done": sorted(process.done)}

    got = forked(child)
    assert got == {"ok": {"original": True, "captures": [], "active": True, "runtime_left": True, "finished": True,
                          "done": []}}, got
    assert inner.__code__ is not original and agent.ACTIVE  # the parent's attachment is untouched
    for i in range(1, 5):
        trainer.step_logged(i)
    s = wait_clean(spec)
    assert s["captures"][0]["recorded"] == [[0, 3]] and inner.__code__ is original
    assert len(list((tmp_path / "traces").glob("*.pt.trace.json"))) == 1
    assert "in the child" not in capfd.readouterr().err


def test_a_fork_while_another_thread_holds_the_runtime_s_lock_does_not_hang_the_child(job, tmp_path):
    train, site = job
    spec = spec_for(tmp_path, site, steps=2)
    inner, original = inner_of(train), inner_of(train).__code__
    agent.attach(spec)
    from patchkit.runtime import process

    held, release = threading.Event(), threading.Event()

    def holder():
        with process.lock:  # as the watcher holds it while it looks at the capture
            held.set()
            release.wait(60)

    thread = threading.Thread(target=holder, daemon=True)
    thread.start()
    held.wait(60)
    try:
        got = forked(lambda: (train.Trainer(0, 0.0).step_logged(0), inner.__code__ is original,
                              process.lock.acquire(timeout=30))[1:])
    finally:
        release.set()
        thread.join(60)
    assert got == {"ok": [True, True]}, got
    Path(spec["channel"], "detach").touch()
    wait_clean(spec)


def wait_clean(spec):
    """The status once the attachment is gone for good (its last word: its name out of the module, ACTIVE left), so
    that the next test's attach of the same recipe meets nothing of it."""
    s = wait_state(spec, "restored")
    for _ in range(600):
        if s.get("clean"):
            return s
        time.sleep(0.05)
        s = status(spec)
    pytest.fail(f"the attachment did not finish: {s}")


def test_the_hook_is_registered_once_and_does_nothing_with_nothing_attached(monkeypatch):
    calls = []
    monkeypatch.setattr(fork, "HOOKED", [])
    monkeypatch.setattr(os, "register_at_fork", lambda **kw: calls.append(kw))
    fork.watch_forks()
    fork.watch_forks()
    assert calls == [{"after_in_child": fork.in_child}]
    monkeypatch.setattr(fork, "ACTIVE", {})
    assert fork.in_child() is None
