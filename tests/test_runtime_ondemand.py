"""A manual-trigger key in the patched process: parked (a step costs a set lookup) until a request, then exactly the
steps asked recorded by torch for real, answered, and parked again for the next request."""

from __future__ import annotations

import time

import pytest

from patchkit import ondemand, runtime, runtime_ondemand
from patchkit.runtime_registry import finished
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
    from patchkit import backends

    assert backends.validate(settings("/tmp/x", trigger="manual", active=3)) == [
        "schedule.trigger manual records the steps `patchkit capture` asks for; it does not combine with "
        "schedule.active"]


def test_a_manual_key_parks_even_while_another_capture_records(tmp_path, home, capsys, no_profiler_left_running):
    runtime.configure("a", **settings(tmp_path / "a", active=5))
    runtime.configure("m", **settings(tmp_path / "m", trigger="manual"))
    runtime.step("a")  # "a" records now
    runtime.step("m")
    assert "m" in finished and not any("not starting while" in ln for ln in capsys.readouterr().err.splitlines())
