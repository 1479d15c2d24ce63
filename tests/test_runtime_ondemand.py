"""A manual-trigger key in the patched process: parked (a step costs a set lookup) until a request, then exactly the
steps asked recorded by torch for real, answered, and parked again for the next request."""

from __future__ import annotations

import json
import os
import time

import pytest

from patchkit.runtime import requests as ondemand
from patchkit import runtime
from patchkit.runtime import ondemand as runtime_ondemand
from patchkit.runtime.process import finished
from runtime_helpers import no_profiler_left_running, profiler_steps, settings  # noqa: F401  (a fixture)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(tmp_path / "home"))
    runtime_ondemand._entries.clear()
    runtime_ondemand._taken.clear()
    runtime_ondemand.pending.clear()
    yield tmp_path / "home"
    runtime_ondemand._entries.clear()


def _steps(n, work):
    for _ in range(n):
        work = work @ work
        runtime.step("k")
    return work


def test_each_request_records_exactly_the_steps_asked(tmp_path, home, no_profiler_left_running):
    import torch

    runtime.configure("k", **settings(tmp_path / "out", trigger="manual"))
    work = _steps(5, torch.ones(8, 8))
    assert "k" in finished and runtime.report() == []  # parked: nothing created
    (entry,) = ondemand.registered("k")
    assert entry["pid"] > 0 and entry["rank"] == 0
    for asked in (3, 2):
        request = ondemand.ask("k", asked)
        runtime_ondemand.poll()  # what the watcher thread does every PATCHKIT_POLL seconds
        work = _steps(asked + 2, work)
        (answer,) = ondemand.answers(request["id"]).values()
        assert (answer["first"], answer["last"], answer["error"]) == (0, asked - 1, None)
        (trace,) = answer["traces"]
        assert profiler_steps(trace) == [f"ProfilerStep#{n}" for n in range(asked)]
        assert "k" in finished  # parked again
    assert [tuple(w) for r in runtime.report() for w in r["recorded"]] == [(0, 1)]  # the last capture's window


def test_the_watcher_thread_takes_a_request_by_itself(tmp_path, home, monkeypatch, no_profiler_left_running):
    import torch

    monkeypatch.setenv("PATCHKIT_POLL", "0.02")
    runtime.configure("k", **settings(tmp_path / "out", trigger="manual"))
    work = _steps(1, torch.ones(4, 4))
    request = ondemand.ask("k", 1)
    deadline = time.time() + 10
    while "k" in finished and time.time() < deadline:
        time.sleep(0.02)
    _steps(3, work)
    (answer,) = ondemand.answers(request["id"]).values()
    assert answer["first"] == 0 and answer["last"] == 0


def test_a_request_that_comes_while_a_window_is_recorded_is_answered_busy(tmp_path, home, no_profiler_left_running):
    import torch

    runtime.configure("k", **settings(tmp_path / "out", trigger="manual"))
    work = _steps(1, torch.ones(4, 4))
    first = ondemand.ask("k", 4)
    runtime_ondemand.poll()
    work = _steps(1, work)  # recording now
    second = ondemand.ask("k", 1)
    runtime_ondemand.poll()
    (busy,) = ondemand.answers(second["id"]).values()
    assert busy["error"].startswith("busy")
    _steps(5, work)
    (done,) = ondemand.answers(first["id"]).values()
    assert done["error"] is None and (done["first"], done["last"]) == (0, 3)


def test_manual_does_not_combine_with_a_schedule_of_its_own():
    from patchkit.runtime import backends

    assert backends.validate(settings("/tmp/x", trigger="manual", active=3)) == [
        "schedule.trigger manual records the steps `patchkit capture` asks for; it does not combine with "
        "schedule.active"]


def test_a_manual_key_parks_even_while_another_capture_records(tmp_path, home, capsys, no_profiler_left_running):
    runtime.configure("a", **settings(tmp_path / "a", active=5))
    runtime.configure("m", **settings(tmp_path / "m", trigger="manual"))
    runtime.step("a")  # "a" records now
    runtime.step("m")
    assert "m" in finished and not any("not starting while" in ln for ln in capsys.readouterr().err.splitlines())


def _request(rid, **kw):
    return json.dumps(dict({"id": rid, "recipe": "k", "steps": 3, "ranks": [], "role": "", "time": time.time() + 1},
                           **kw))


def _plant(folder, name, text, mode=0o600):
    path = folder / name
    path.write_text(text)
    path.chmod(mode)
    return path


POLL = runtime_ondemand.poll  # the tests below poll themselves; a watcher thread left by an earlier test must not


@pytest.fixture
def waiting(home, monkeypatch):
    """Key "k" of this process registered and parked, as after its first step with schedule.trigger manual."""
    monkeypatch.setattr(runtime_ondemand, "poll", lambda: None)
    runtime_ondemand._entries["k"] = ondemand.register("k", rank=0)
    finished.add("k")
    folder = home / ondemand.REQUESTS
    folder.mkdir(parents=True)
    yield folder
    finished.discard("k")
    runtime_ondemand.pending.clear()


def test_hostile_requests_are_ignored_with_one_line_each_and_a_good_one_is_still_taken(tmp_path, home, waiting,
                                                                                       capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    bad = {
        "dotdot.json": _request("../../x"),
        "slash.json": _request("a/b"),
        "nul.json": _request("a\x00b"),
        "other-name.json": _request("not-its-name"),
        "huge.json": _request("huge", steps=10_000_000),
        "minus.json": _request("minus", steps="-1"),
        "zero.json": _request("zero", steps=0),
        "digits.json": _request("digits", steps=1).replace('"steps": 1', '"steps": ' + "9" * 5000),
        "nan.json": _request("nan").replace('"time": ', '"time": NaN, "x": '),
        "ranks.json": _request("ranks", ranks="all"),
        "malformed.json": '{"id": "malformed", ',
        "deep.json": "[" * 100000,
        "list.json": "[]",
        "big.json": _request("big") + " " * (ondemand.MAX_FILE_BYTES + 1),
    }
    for name, text in bad.items():
        _plant(waiting, name, text)
    _plant(waiting, "writable.json", _request("writable"), mode=0o666)
    (outside / "link.json").write_text(_request("link"))
    (waiting / "link.json").symlink_to(outside / "link.json")  # a good request, but reached through a link
    os.mkfifo(waiting / "fifo.json")
    if os.geteuid() == 0:  # root can give a file to another user; others skip only this case
        os.chown(_plant(waiting, "theirs.json", _request("theirs")), 65534, 65534)
    refused = len(list(waiting.iterdir()))
    _plant(waiting, "good.json", _request("good", steps=ondemand.MAX_STEPS))
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    POLL()
    assert runtime_ondemand.pending == {"k": ("good", ondemand.MAX_STEPS)} and "k" not in finished
    err = [ln for ln in capsys.readouterr().err.splitlines()]
    ignored = [ln for ln in err if ln.startswith("[patchkit] ignoring the capture request ")]
    assert len(ignored) == refused and len(err) == refused + 1, err  # and the line saying what "good" asks
    assert {os.path.basename(ln.split("'")[1]) for ln in ignored} == set(os.listdir(waiting)) - {"good.json"}
    said = {os.path.basename(ln.split("'")[1]): ln for ln in ignored}
    assert "symbolic link" in said["link.json"] and "not a plain name" in said["dotdot.json"]
    assert f"from 1 to {ondemand.MAX_STEPS}" in said["huge.json"] and "others can write" in said["writable.json"]
    assert f"larger than {ondemand.MAX_FILE_BYTES}" in said["big.json"] and "not valid JSON" in said["malformed.json"]
    if os.geteuid() == 0:
        assert "owned by uid 65534" in said["theirs.json"]
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # nothing written, inside answers/ or out
    POLL()
    assert capsys.readouterr().err == ""  # each file is said once, not at every poll


def test_an_answer_to_an_unsafe_id_is_one_line_and_never_raises(tmp_path, home, capsys):
    runtime_ondemand.answerer("k-unsafe", "../../x")(first=0, last=0, traces=[])
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("[patchkit] k-unsafe: could not write the answer") and "not a plain request id" in line
    assert not (tmp_path / "x").exists() and not (home / ondemand.ANSWERS).exists()


def test_a_requests_folder_that_is_not_one_is_nothing_to_act_on(home, waiting):
    waiting.rmdir()
    waiting.write_text("not a folder")
    POLL()
    assert runtime_ondemand.pending == {}
