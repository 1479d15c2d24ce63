"""Attach, proven on the real code: a verl 0.7.1 job started without patchkit records exactly the asked micro- or
mini-batches of ``update_policy``, and trains on as if nobody had looked.

The job is tests/verl_drive.py under ``torchrun`` (2 ranks, gloo, CPU) on the whole verl wheel unzipped into a
folder of its own (tests/verlenv.py), nothing of patchkit applied: verl's own ``DataParallelPPOActor`` runs
``update_policy`` round after round (3 mini-batches of 3 micro-batches each) until the test creates its stop
file.  Once every rank has finished a few rounds, ``patchkit attach`` gets in with the built-in
``verl-fsdp-update`` recipe and ``--steps 2``: through gdb, into a process whose ``update_policy`` sits behind
verl's ``GPUMemoryLogger`` (a decorator that keeps the function only in its closure), landing wherever the
job happens to be (in the middle of an update or between two).  The window is the next call's first two steps
on each attached rank, so what each span holds is known exactly; the tests check, from the manifests and
traces (tests/realverl.py):

- each attached rank recorded steps 0-1 and nothing else; an unattached rank recorded nothing; the torchrun
  launcher, matched by ``--match`` too, was passed over (it never imports verl);
- each ``ProfilerStep#`` span holds its own step's work: one micro-batch's forward and backward
  (``granularity=micro``), or a whole mini-batch with its optimizer step (``granularity=mini``), and nothing of
  the model's work lies outside them;
- each rank's job got its own code objects back, ran on, stopped when told and exited 0, and its losses and
  grad norms of every round, the window's and those after, equal those of an unattached run of the same seed;
- the user's ``patchkit traces`` lists the captures.

Ctrl-C of the attaching command mid-window (``--steps 1000``) closes each rank's window at its next step: the
steps recorded so far are kept, one micro-batch a span, across two ``update_policy`` calls.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import pytest
import yaml

import attach_helpers
import realverl
import verlenv
from test_real_verl import MICRO, MINI, NOTHING, each_span


pytestmark = pytest.mark.skipif(bool(attach_helpers.gdb_missing() or attach_helpers.ptrace_denied()),
                                reason=attach_helpers.gdb_missing() or attach_helpers.ptrace_denied() or "")

VERSION = "0.7.1"  # the newest release verl-fsdp-update is proven on
RECIPE = "verl-fsdp-update"
MOST = 2000  # rounds at most: the job runs until the test stops it
PAUSE = 0.1  # seconds between two rounds (one round is about 0.3 s of training here)
READY = 3  # rounds every rank has finished before the attach: verl imported, update_policy called and returned
SECONDS = 300  # a guard against a job that hangs, not a measurement

_BASELINE: dict = {}


def baseline(rounds: int, factory) -> dict:
    """Each rank's numbers of the first ``rounds`` rounds of an unattached run of the same seed (one run for the
    session, longer when a test needs more rounds)."""
    if len(_BASELINE.get(0, {}).get("rounds", [])) < rounds:
        base = factory.mktemp("attach-baseline")
        site = verlenv.install(VERSION, base / "site")
        realverl.run(realverl.command("dp", "actor-update", base / "out", updates=rounds + 5),
                     realverl.environ(VERSION, base / "home", site), base)
        _BASELINE.clear()
        _BASELINE.update(realverl.numbers(base / "out"))
    return {rank: dict(numbers, rounds=numbers["rounds"][:rounds]) for rank, numbers in _BASELINE.items()}


class RunningJob:
    """verl's update_policy running round after round under torchrun, started without patchkit."""

    def __init__(self, tmp: Path):
        self.tmp, self.out, self.traces, self.stop = tmp, tmp / "out", tmp / "traces", tmp / "stop"
        self.home, self.user = tmp / "job-home", tmp / "user-home"  # the job's PATCHKIT_HOME, the attaching user's
        self.site = verlenv.install(VERSION, tmp / "site")
        argv = realverl.command("dp", "actor-update", self.out, updates=MOST, pause=PAUSE, stop=self.stop)
        self.log = open(tmp / "job.log", "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, cwd=tmp, start_new_session=True,
                                     env=realverl.environ(VERSION, self.home, self.site))

    def said(self) -> str:
        """The end of what the job (launcher and ranks) wrote on stdout and stderr."""
        return (self.tmp / "job.log").read_text()[-6000:]

    def progress(self) -> dict:
        """rank -> the progress lines of the rounds it finished."""
        found = {}
        for rank in (0, 1):
            path = self.out / ("progress-rank%d.jsonl" % rank)
            text = path.read_text() if path.exists() else ""
            found[rank] = [json.loads(line) for line in text.splitlines() if line.endswith("}")]
        return found

    def pids(self) -> dict:
        """rank -> the pid of the process running it."""
        return {rank: lines[0]["pid"] for rank, lines in self.progress().items()}

    def wait(self, ready, what: str, attaching: Optional[subprocess.Popen] = None) -> None:
        """Until ``ready()``; the job or the attaching command ending first, or a hang (nothing after SECONDS: a
        guard, not a measurement), fails the test with what they said."""
        end = time.time() + SECONDS
        while not ready():
            if attaching is not None and attaching.poll() is not None:
                pytest.fail("%s: the attaching command ended first:\n%s" % (what, attaching.communicate()[1][-4000:]))
            if self.proc.poll() is not None or time.time() > end:
                pytest.fail("%s: not after %d s (the job's exit: %s):\n%s" % (what, SECONDS, self.proc.poll(),
                                                                               self.said()))
            time.sleep(0.1)

    def wait_rounds(self, n: int) -> None:
        """Until every rank has finished ``n`` rounds."""
        self.wait(lambda: min(len(lines) for lines in self.progress().values()) >= n, "%d rounds on each rank" % n)

    def attach_args(self, who: list, settings, steps: int) -> list:
        """``attach WHO RECIPE SETTINGS ... --json`` (``WHO``: a pid, or ``--match TEXT``), into this save path."""
        return ["attach", *who, RECIPE, *settings, "--root", str(self.site), "backend=torch",
                "profiler.save_path=%s" % self.traces, "--steps", str(steps), "--json"]

    def attach(self, who: list, *settings: str):
        """``patchkit attach ... --steps 2`` as the user runs it: what it says of each process, and on stderr."""
        done = realverl.patchkit(self.user, *self.attach_args(who, settings, 2))
        return sorted(json.loads(done.stdout), key=lambda s: s["pid"]), done.stderr

    def recording(self, pid: int) -> bool:
        """Whether the attaching user's ``patchkit attach --status PID`` says that rank is recording."""
        said = realverl.patchkit(self.user, "attach", "--status", str(pid)).stdout
        return ": %s: recording;" % RECIPE in said

    def finish(self) -> int:
        """Let every rank run two more rounds with its own code, stop the job; the rounds it ran."""
        self.wait_rounds(max(len(lines) for lines in self.progress().values()) + 2)
        self.stop.touch()
        assert self.proc.wait(timeout=SECONDS) == 0, self.said()
        assert "verl-drive: %s world=2" % VERSION in self.said()
        rounds = {len(n["rounds"]) for n in realverl.numbers(self.out).values()}
        assert len(rounds) == 1, rounds  # every rank stopped after the same round
        return rounds.pop()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()

    def captures(self) -> list:
        """(rank, role, steps recorded) of every capture."""
        return [(m["rank"], m["role"], m["steps"]) for m in realverl.manifests(self.traces)]

    def work(self) -> dict:
        return {(m["rank"], m["role"]): realverl.work(self.traces, m) for m in realverl.manifests(self.traces)}

    def listed(self) -> list:
        """What the attaching user's ``patchkit traces --all`` (no folder named: every folder of the user's own
        index, wherever the command runs) lists: (recipe, rank, steps)."""
        done = realverl.patchkit(self.user, "traces", "--all", "--json")
        return sorted((c["recipe"], c["rank"], c["steps"]["count"]) for c in json.loads(done.stdout)["captures"])


@pytest.fixture
def job(tmp_path):
    started = RunningJob(tmp_path)
    yield started
    started.kill()


def recorded_and_restored(status: dict) -> None:
    """The agent's last word on one rank: steps 0-1 recorded into one trace, the job's own code back."""
    assert status["state"] == "restored" and status["why"] == "the window closed", status
    assert status["original_code"] is True, status
    (capture,) = status["captures"]
    assert capture["recorded"] == [[0, 1]] and len(capture["traces"]) == 1, capture


def test_match_attaches_both_ranks_and_each_records_its_next_two_micro_batches(job, tmp_path_factory):
    job.wait_rounds(READY)
    pids = job.pids()
    statuses, said = job.attach(["--match", str(job.out)], "granularity=micro")
    by_pid = {s["pid"]: s for s in statuses}
    assert set(by_pid) == {job.proc.pid, pids[0], pids[1]}, statuses  # the launcher's command line holds it too
    launcher = by_pid.pop(job.proc.pid)
    why = "a launcher (torchrun), its Python children are matched on their own"  # told from /proc: gdb never in it
    assert (launcher["state"], launcher["error"]) == ("passed over", why), launcher
    assert "pid %d: passed over: %s" % (job.proc.pid, why) in said, said
    for status in by_pid.values():
        assert status["targets"] == ["verl.workers.actor.dp_actor:DataParallelPPOActor.update_policy"], status
        recorded_and_restored(status)
    rounds = job.finish()
    assert job.captures() == [(0, "", [0, 1]), (1, "", [0, 1])]
    # the window opens at the first update_policy call after the swap: its 1st and 2nd micro-batch, each span one
    # micro-batch's forward and backward; the optimizer runs after the 3rd, outside the window
    assert job.work() == each_span(job.work(), [0, 1], MICRO)
    assert realverl.numbers(job.out) == baseline(rounds, tmp_path_factory)
    assert job.listed() == [(RECIPE, 0, 2), (RECIPE, 1, 2)]


def test_one_rank_attached_by_pid_records_two_whole_mini_batches_and_the_other_rank_nothing(job, tmp_path_factory):
    job.wait_rounds(READY)
    pids = job.pids()
    (status,), _ = job.attach([str(pids[1])], "granularity=mini")
    assert status["pid"] == pids[1]
    recorded_and_restored(status)
    rounds = job.finish()
    assert job.captures() == [(1, "", [0, 1])]  # rank 0 was never attached: it recorded nothing
    assert job.work() == each_span(job.work(), [0, 1], MINI)  # each span: 3 micro-batches and the optimizer step
    assert realverl.numbers(job.out) == baseline(rounds, tmp_path_factory)
    assert job.listed() == [(RECIPE, 1, 2)]


def test_ctrl_c_mid_window_keeps_the_micro_batches_recorded_so_far_and_the_job_trains_on(job, tmp_path_factory):
    job.wait_rounds(READY)
    pids = job.pids()
    who = ["--match", str(job.out)]
    argv = [sys.executable, "-m", "patchkit", *job.attach_args(who, ["granularity=micro"], 1000)]
    attaching = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=dict(os.environ, PATCHKIT_HOME=str(job.user)))
    try:
        job.wait(lambda: all(job.recording(pid) for pid in pids.values()), "both ranks recording", attaching)
        # the round in progress done on every rank: a whole update_policy call (steps 0-8) recorded, and the
        # window closes at a step of a later call
        job.wait_rounds(max(len(lines) for lines in job.progress().values()) + 1)
        attaching.send_signal(signal.SIGINT)
        out, err = attaching.communicate(timeout=SECONDS)
    finally:
        if attaching.poll() is None:
            attaching.kill()
            attaching.communicate()
    assert attaching.returncode == 130 and "interrupted: putting the job's own code back" in err, err
    by_pid = {s["pid"]: s for s in json.loads(out) if s["pid"] in pids.values()}
    for status in by_pid.values():
        assert status["state"] == "restored" and status["why"] == "detached" and status["original_code"], status
    rounds = job.finish()
    assert sorted(by_pid) == sorted(pids.values())
    for (rank, _, steps), held in zip(job.captures(), job.work().values()):
        (first, last), = by_pid[pids[rank]]["captures"][0]["recorded"]
        assert steps == list(range(first, last + 1)) and first == 0 and 9 <= last < 999, steps
        # each span one micro-batch; verl's optimizer step runs after every 3rd one, so in the span of the next
        want = {"ProfilerStep#%d" % s: dict(MICRO, optimizer=int(s > 0 and s % 3 == 0)) for s in steps}
        assert held == dict(want, outside=NOTHING), held
    assert [rank for rank, _, _ in job.captures()] == [0, 1]
    assert realverl.numbers(job.out) == baseline(rounds, tmp_path_factory)


def test_auto_finds_the_mini_batch_loop_on_both_ranks_and_records_one_mini_batch_a_span(job, tmp_path_factory):
    """No recipe: --match --auto watches both ranks (the launcher passed over), finds update_policy's mini-batch
    loop (one optimizer step each turn), writes its recipe and records the next 3 on each rank."""
    job.wait_rounds(READY)
    recipe = job.tmp / "auto-update.yaml"
    done = realverl.patchkit(job.user, "attach", "--match", str(job.out), "--auto", "--steps", "3", "--json",
                             "--save", str(recipe), "profiler.save_path=%s" % job.traces)
    said = done.stderr
    assert said.count("judged by each optimizer step") == 2, said  # each rank watched
    (chosen,) = set(re.findall(r"chosen 1: each turn of the loop at line (\d+) of "
                               r"DataParallelPPOActor\.update_policy holds exactly one optimizer step", said))
    assert "its step is" not in said  # the ranks agree
    statuses = [s for s in json.loads(done.stdout) if s["state"] != "passed over"]
    assert len(statuses) == 2 and all(s["original_code"] is True for s in statuses), statuses
    assert [s["captures"][0]["recorded"] for s in statuses] == [[[0, 2]]] * 2
    rounds = job.finish()
    assert job.work() == each_span(job.work(), [0, 1, 2], MINI)  # one whole mini-batch a span, nothing outside
    assert realverl.numbers(job.out) == baseline(rounds, tmp_path_factory)
    points = yaml.safe_load(recipe.read_text())["points"]
    assert points == [{"class": "DataParallelPPOActor", "method": "update_policy", "at": "loop_start",
                       "loop": points[0]["loop"]}] and int(chosen) > 0


def test_auto_with_the_micro_batch_forward_picked_records_one_micro_batch_a_span(job, tmp_path_factory):
    job.wait_rounds(READY)
    listed = realverl.patchkit(job.user, "attach", "--match", str(job.out), "--auto", "--dry-run").stderr
    # each micro-batch's forward: a span from one to the next holds that micro-batch's forward and backward.  Picked
    # by its name, which holds from one watch to the next; the micro-batch loop is listed only where its turns are
    # far enough apart for the looks to tell them apart, which one watch of a busy machine saw and the next did not
    ranks = re.split(r"^pid \d+: watched ", listed, flags=re.M)[1:]
    assert len(ranks) == 2 and all(re.search(r"^ +\d+ +function +dp_actor\.py:\d+ +def _forward_micro_batch\(", rank,
                                             re.M) for rank in ranks), listed
    done = realverl.patchkit(job.user, "attach", "--match", str(job.out), "--auto", "--pick", "_forward_micro_batch",
                             "--steps", "2", "--json", "--save", str(job.tmp / "auto-micro.yaml"),
                             "profiler.save_path=%s" % job.traces)
    statuses = [s for s in json.loads(done.stdout) if s["state"] != "passed over"]
    assert [s["captures"][0]["recorded"] for s in statuses] == [[[0, 1]]] * 2, done.stderr
    rounds = job.finish()
    for spans in job.work().values():  # one micro-batch's forward and backward a span (the optimizer's step, run
        assert spans["outside"] == NOTHING  # after a mini-batch's last micro-batch, falls in that one's span)
        assert [(spans[k]["forward"], spans[k]["backward"]) for k in ("ProfilerStep#0", "ProfilerStep#1")] == \
            [(1, 1), (1, 1)], spans
    assert realverl.numbers(job.out) == baseline(rounds, tmp_path_factory)
