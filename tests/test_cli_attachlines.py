"""cli.attachlines: the line each state of a process says, for attach, attach --auto and detach alike."""

from __future__ import annotations

import click
import pytest

from patchkit.cli import attachlines


def test_a_pid_is_digits_only():
    assert attachlines._pid("123") == 123
    for bad in ("12a", "-1", "", "1.5"):
        with pytest.raises(click.UsageError, match="is not a process id"):
            attachlines._pid(bad)


@pytest.mark.parametrize("state,status,said", [
    ("attached", {"targets": ["m:f"], "functions": 2, "steps": 3},
     "pid 5: attached (m:f: 2 function(s)); recording the next 3 step(s) from the next call"),
    ("recording", {}, "pid 5: recording"),
    ("refused", {"error": "no"}, "pid 5: refused: no; nothing changed"),
    ("gone", {}, "pid 5: the process ended"),
    ("restored", {"original_code": True, "why": "the window closed",
                  "captures": [{"recorded": [[0, 1]], "traces": ["/t/x.json"]}]},
     "pid 5: steps 0-1 recorded -> /t/x.json; the job's own code is back (the window closed)"),
])
def test_each_state_has_its_line(state, status, said):
    assert attachlines.process_line(5, state, status) == said


def test_steps_text_says_spans_and_errors():
    assert attachlines._steps_text([{"recorded": [[2, 2], [4, 6]], "traces": ["a"]}]) == "steps 2, 4-6 recorded -> a"
    assert attachlines._steps_text([]) == "nothing recorded: its capture never started in this process"
    assert attachlines._steps_text([{"recorded": [], "error": "boom"}]) == "nothing recorded (error: boom)"
