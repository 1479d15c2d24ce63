"""ondemand: registrations, requests and answers as whole files; who a request asks; dead processes forgotten."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from patchkit.core.private import NotPrivate
from patchkit.runtime import requests as ondemand
from patchkit.runtime import ondemand as runtime_ondemand


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
    assert [r["id"] for r in runtime_ondemand.requests()] == [request["id"]] and request["steps"] == 3
    ondemand.answer(request["id"], "r/actor", first=0, last=2, traces=["/t/a.json"], error=None)
    (got,) = ondemand.answers(request["id"]).values()
    assert (got["first"], got["last"], got["traces"], got["pid"]) == (0, 2, ["/t/a.json"], os.getpid())
    ondemand.withdraw(request["id"])
    assert runtime_ondemand.requests() == []
    assert not [n for _, _, names in os.walk(home) for n in names if n.startswith(".tmp-")]


class Clock:
    """``time`` as the module waiting sees it: ``sleep`` moves the clock on at once, and counts."""

    def __init__(self):
        self.now, self.slept = time.time(), 0.0

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        self.slept += seconds

    def strftime(self, fmt):
        return time.strftime(fmt, time.localtime(self.now))


def test_waiting_ends_at_the_timeout_for_a_process_that_does_not_step_and_at_once_for_none(monkeypatch):
    assert ondemand.ask_and_wait("nobody", 1)["asked"] == []
    ondemand.register("r", rank=0)  # this very process: alive, never answers
    clock = Clock()
    monkeypatch.setattr(ondemand, "time", clock)  # the wait's own clock: no measured time in an assertion
    out = ondemand.ask_and_wait("r", 2, timeout=0.5, poll=0.05)
    assert out["late"] == [ondemand.name(out["asked"][0])] and not out["answers"]
    assert clock.slept == pytest.approx(0.5, abs=0.05)  # polled until its deadline, and no longer
    assert runtime_ondemand.requests() == []  # withdrawn


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("rid,plain", [
    ("20260101-120000-abcdef12", True), ("a", True), ("run_1.v-2", True), ("x" * 64, True),
    ("../../x", False), ("..", False), ("a..b", False), ("a/b", False), ("a\x00b", False), ("a\n", False),
    ("", False), (".hidden", False), ("-x", False), ("x" * 65, False), ("a b", False), (None, False), (7, False),
])
def test_a_request_id_is_a_plain_name(rid, plain):
    assert ondemand.valid_id(rid) is plain


def test_an_answer_is_never_written_outside_answers(tmp_path, home):
    before = _files(tmp_path)
    for rid in ("../../x", "../x", "a/../../x", "/tmp/x", "a\x00b", ".."):
        with pytest.raises(ValueError, match="not a plain request id"):
            ondemand.answer(rid, "r", first=0, last=0, traces=[], error=None)
        with pytest.raises(ValueError):
            ondemand.answers(rid)
        with pytest.raises(ValueError):
            ondemand.withdraw(rid)
    assert _files(tmp_path) == before  # not even answers/ was made
    outside = tmp_path / "outside"
    outside.mkdir()
    (home / ondemand.ANSWERS).mkdir(parents=True)
    (home / ondemand.ANSWERS / "planted").symlink_to(outside)  # a link in place of an answer folder
    with pytest.raises(NotPrivate, match="symbolic link"):
        ondemand.answer("planted", "r", first=0, last=0, traces=[], error=None)
    assert list(outside.iterdir()) == []
    (home / ondemand.ANSWERS / "planted").unlink()
    (home / ondemand.ANSWERS).rmdir()
    (home / ondemand.ANSWERS).symlink_to(outside)  # or in place of answers/ itself
    with pytest.raises(NotPrivate, match="symbolic link"):
        ondemand.answer("fine", "r", first=0, last=0, traces=[], error=None)
    assert list(outside.iterdir()) == []  # not even the answer's folder is made through the link


def test_an_answer_for_a_plain_id_lands_in_its_folder(home):
    ondemand.answer("a.b_c-1", "r/actor", first=0, last=1, traces=[], error=None)
    (written,) = (home / ondemand.ANSWERS / "a.b_c-1").iterdir()
    assert written.name.endswith("_r.actor.json")


@pytest.mark.parametrize("steps", [0, -1, 1001, 10_000_000, 10 ** 5000, True, "3", 2.0, None],
                         ids=["0", "-1", "1001", "10M", "5001-digits", "True", "str", "float", "None"])
def test_asking_for_steps_out_of_bounds_is_refused_and_nothing_is_asked(home, steps):
    with pytest.raises(ValueError, match=f"from 1 to {ondemand.MAX_STEPS}"):
        ondemand.ask("r", steps)
    assert not (home / ondemand.REQUESTS).exists()


def test_the_bound_is_1000_steps():
    assert ondemand.MAX_STEPS == 1000 and ondemand.ask("r", 1000)["steps"] == 1000


def test_read_file_refuses_links_fifos_big_files_and_in_private_mode_others_files(tmp_path):
    good = tmp_path / "good.json"
    good.write_text('{"a": 1}')
    good.chmod(0o600)
    assert ondemand.read_file(str(good), private=True) == ({"a": 1}, "")
    link = tmp_path / "link.json"
    link.symlink_to(good)
    assert ondemand.read_file(str(link)) == (None, "it is a symbolic link (not followed)")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert ondemand.read_file(str(fifo)) == (None, "it is not a plain file")  # and it did not block
    big = tmp_path / "big.json"
    big.write_text('{"a": "' + "x" * ondemand.MAX_FILE_BYTES + '"}')
    assert ondemand.read_file(str(big))[1] == f"it is larger than {ondemand.MAX_FILE_BYTES} bytes"
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 30000 + "]" * 30000)
    assert ondemand.read_file(str(deep))[1].startswith("it is not valid JSON")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b'{"a": "\xff"}')
    assert ondemand.read_file(str(binary))[1].startswith("it is not valid JSON")
    good.chmod(0o620)
    assert ondemand.read_file(str(good))[0] == {"a": 1}  # only private reads care about the mode
    assert "others can write it" in ondemand.read_file(str(good), private=True)[1]
    with pytest.raises(FileNotFoundError):
        ondemand.read_file(str(tmp_path / "gone.json"))
    if os.geteuid() != 0:
        return  # the ownership case needs root to give a file away
    good.chmod(0o600)
    os.chown(good, 65534, 65534)
    assert ondemand.read_file(str(good), private=True)[1] == (
        f"it is owned by uid 65534, not by this job's user (uid {os.geteuid()})")


def test_malformed_registrations_are_passed_over_without_an_error(home):
    ondemand.register("r", rank=0)
    folder = home / ondemand.PROCESSES
    good = {"host": "h", "recipe": "r", "key": "r", "role": "", "rank": 0, "time": 1.0}
    for n, bad in enumerate([{"pid": 10 ** 30}, {"pid": 0}, {"pid": -1}, {"pid": "1"}, {"pid": True},
                             {"pid": 1, "rank": "0"}, {"pid": 1, "time": float("nan")}, {"pid": 1, "key": None}]):
        ondemand.write_json((ondemand.PROCESSES,), f"bad{n}.json", dict(good, **bad))
    (folder / "list.json").write_text("[1, 2]")
    assert [e["pid"] for e in ondemand.registered("r")] == [os.getpid()]


def test_waiting_tells_its_progress_each_process_that_answered_or_ended():
    import threading

    from progress_helpers import Recorder

    ondemand.register("r/actor", rank=0)  # this process: answers from a thread below
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    ondemand.register("r/ref", rank=1, pid=sleeper.pid)  # ends without answering
    ondemand.register("r/critic", rank=2)  # this process again: never answers

    def answer_when_asked():
        while not runtime_ondemand.requests():
            time.sleep(0.02)
        ondemand.answer(runtime_ondemand.requests()[0]["id"], "r/actor", first=0, last=1, traces=[], error=None)

    helpers = [threading.Thread(target=answer_when_asked), threading.Thread(target=sleeper.wait)]
    for t in helpers:
        t.start()
    recorder = Recorder()
    out = ondemand.ask_and_wait("r", 2, timeout=3, poll=0.05, progress=recorder)
    for t in helpers:
        t.join()
    assert len(out["answers"]) == len(out["dead"]) == len(out["late"]) == 1
    assert recorder.summary() == [("waiting for 3 process(es) to record 2 step(s)", "answers", 3, 2)]
    assert ondemand.ask_and_wait("nobody", 1, progress=recorder) and len(recorder.stages) == 1  # nobody: no stage
