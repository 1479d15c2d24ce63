"""attach.auto: a watch gets into a real job as attach does (gdb, 3.10-3.13), changes none of its code, and comes
back with what the job's threads did; an interrupt asks the watcher out; --pick and the ranks' agreement."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace as NS

import pytest

from attach_helpers import gdb_missing, ptrace_denied
from patchkit.attach import auto

JOB = textwrap.dedent('''\
    import sys, time
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(64, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def one_step(x):
        time.sleep(0.02)
        loss = model(x).pow(2).mean()
        loss.backward()
        return loss.item()

    def train():
        data = torch.randn(8, 64)
        while True:
            for i in range(4):
                one_step(data[2 * (i % 4): 2 * (i % 4) + 2])
            opt.step()
            opt.zero_grad()
            print("step", flush=True)

    train()
    ''')


@pytest.fixture
def job(tmp_path):
    reason = gdb_missing() or ptrace_denied()
    if reason:
        pytest.skip(reason)
    script = tmp_path / "train_job.py"
    script.write_text(JOB)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "step\n"
    yield NS(proc=proc, script=script)
    proc.kill()
    proc.communicate()


def test_a_watch_comes_back_with_the_job_s_calls_and_steps_and_changes_nothing(job):
    s = auto.Watching([job.proc.pid], 20)
    s.prepare()
    seen = []
    assert auto.watch(s, lambda a: seen.append(str(a.state)))
    assert seen[-1] == "watched" and "watching" in seen
    w = s.watches[job.proc.pid]
    assert w.stopped == "repeated" and len(w.markers) > 6
    names = {q for f, n, q in w.codes if f == str(job.script)}
    assert {"train", "one_step"} <= names
    assert all(a.closed for a in s.attached) and not os.path.exists(s.attached[0].folder.base)
    assert job.proc.poll() is None and job.proc.stdout.readline() == "step\n"  # the job runs on


def test_an_interrupt_asks_the_watcher_out(job, monkeypatch):
    s = auto.Watching([job.proc.pid], 60)
    s.prepare()

    def interrupted(a):
        if a.state == "watching":
            raise KeyboardInterrupt

    assert not auto.watch(s, interrupted)
    assert s.watches == {}
    assert not os.path.exists(s.attached[0].folder.base)
    assert job.proc.poll() is None and job.proc.stdout.readline() == "step\n"


def proposal(pid, *candidates, chosen=0):
    found = NS(candidates=tuple(NS(file=c[0], qualname=c[1], line=c[2], kind=(c[3:] or ("function",))[0])
                                for c in candidates), chosen=chosen, why="w")
    return auto.Proposal(pid, found, None, 0)


def test_pick_takes_another_candidate_and_says_when_there_is_none():
    p = proposal(1, ("a.py", "train", 3), ("a.py", "step", 9))
    assert auto.chosen(p, None) == (0, "w") and auto.chosen(p, "2") == (1, "--pick 2")
    assert auto.chosen(p, "3") == (None, "--pick 3: there are 2 candidate(s)")


def test_pick_names_a_candidate_by_its_place_or_its_function_which_hold_across_watches():
    p = proposal(1, ("/job/a.py", "train", 3, "loop"), ("/job/a.py", "Trainer.micro_step", 9),
                 ("/job/sub/a.py", "Trainer.micro_step", 9), ("/job/b.py", "train", 7))
    assert auto.chosen(p, "a.py:9") == (1, "--pick a.py:9")  # the first listed of those at that place
    assert auto.chosen(p, "sub/a.py:9")[0] == 2 and auto.chosen(p, "/job/sub/a.py:9")[0] == 2
    assert auto.chosen(p, "a.py:3")[0] == 0 and auto.chosen(p, "b.py:7")[0] == 3
    assert auto.chosen(p, "micro_step")[0] == 1 and auto.chosen(p, "Trainer.micro_step")[0] == 1
    assert auto.chosen(p, "train")[0] == 3  # a name is a function's: the loop in train is named by its place
    for nothing in ("a.py:4", "c.py:3", "ub/a.py:9", "Trainer", "rainer.micro_step", "a.py:", ":9"):
        i, why = auto.chosen(p, nothing)
        assert i is None and why.startswith(f"--pick {nothing}: no candidate of this watch"), nothing


def test_ranks_that_disagree_are_said():
    same = [proposal(1, ("a.py", "train", 3)), proposal(2, ("a.py", "train", 3))]
    assert auto.agree(same, [0, 0]) == []
    other = [proposal(1, ("a.py", "train", 3)), proposal(2, ("a.py", "step", 9))]
    (line,) = auto.agree(other, [0, 0])
    assert line.startswith("pid 2: its step is step line 9, not train line 3")
    assert "not clear" in auto.agree(other, [0, None])[0]


def test_the_recipe_is_the_first_clear_process_s():
    props = [proposal(1, ("a.py", "train", 3), chosen=None), proposal(2, ("a.py", "train", 3))]
    ordered, index = auto.clear_first(props, [None, 0])
    assert [p.pid for p in ordered] == [2, 1] and index == [0, None]
    assert auto.clear_first(props, [None, None]) == (props, [None, None])
