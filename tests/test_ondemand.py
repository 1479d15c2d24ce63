"""ondemand: registrations, requests and answers as whole files; who a request asks; dead processes forgotten."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from patchkit import ondemand


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_a_request_asks_the_processes_of_its_recipe_ranks_and_role_registered_before_it():
    actor = ondemand.register("r/actor", rank=0)
    ref = ondemand.register("r/ref", rank=1)
    other = ondemand.register("s", rank=0)
    request = {"recipe": "r", "ranks": [], "role": "", "time": time.time()}
    assert [ondemand.matches(request, e) for e in (actor, ref, other)] == [True, True, False]
    assert [ondemand.matches(dict(request, role="ref"), e) for e in (actor, ref)] == [False, True]
    assert [ondemand.matches(dict(request, ranks=[0, 2]), e) for e in (actor, ref)] == [True, False]
    assert not ondemand.matches(dict(request, time=actor["time"] - 1), actor)  # made before it registered
    assert {e["key"] for e in ondemand.registered("r")} == {"r/actor", "r/ref"}


def test_dead_processes_are_not_asked_and_their_files_go(home):
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    ondemand.register("r", rank=0, pid=int(done.stdout))
    ondemand.register("r", rank=1)
    assert [e["rank"] for e in ondemand.registered("r")] == [1]
    assert len(os.listdir(home / ondemand.PROCESSES)) == 1


def test_an_answer_is_read_back_by_process_and_no_half_file_is_ever_seen(home):
    request = ondemand.ask("r", 3, [0], "actor")
    assert [r["id"] for r in ondemand.requests()] == [request["id"]] and request["steps"] == 3
    ondemand.answer(request["id"], "r/actor", first=0, last=2, traces=["/t/a.json"], error=None)
    (got,) = ondemand.answers(request["id"]).values()
    assert (got["first"], got["last"], got["traces"], got["pid"]) == (0, 2, ["/t/a.json"], os.getpid())
    ondemand.withdraw(request["id"])
    assert ondemand.requests() == []
    assert not [n for _, _, names in os.walk(home) for n in names if n.startswith(".tmp-")]


def test_waiting_ends_at_the_timeout_for_a_process_that_does_not_step_and_at_once_for_none():
    assert ondemand.ask_and_wait("nobody", 1)["asked"] == []
    ondemand.register("r", rank=0)  # this very process: alive, never answers
    start = time.time()
    out = ondemand.ask_and_wait("r", 2, timeout=0.5, poll=0.05)
    assert 0.5 <= time.time() - start < 5 and out["late"] == [ondemand.name(out["asked"][0])] and not out["answers"]
    assert ondemand.requests() == []  # withdrawn
