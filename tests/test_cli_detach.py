"""cli.detach: what `patchkit detach PID` and `patchkit attach --status PID` say for each state an agent (or a
watcher of attach --auto) can be in, and the exit status (1 when a process did not put its code back)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from patchkit.attach import records
from patchkit.cli import detach as cli_detach


def run(monkeypatch, said, *args, command=cli_detach.detach_cmd):
    monkeypatch.setattr(records, "detach", lambda pid, timeout: said)
    monkeypatch.setattr(records, "status", lambda pid: said)
    return CliRunner().invoke(command, list(args))


@pytest.mark.parametrize("said,shown,code", [
    ({"recipe": "r", "state": "restored", "captures": [{"recorded": [[0, 2]], "traces": ["/t/a.json"]}]},
     "pid 7: r: steps 0-2 recorded -> /t/a.json; the job's own code is back", 0),
    ({"recipe": "patchkit-watch", "state": "watched"}, "its watch stopped; nothing of the job's was changed", 0),
    ({"recipe": "r", "state": "handed over", "attacher": 99}, "the attaching command (pid 99)", 0),
    ({"recipe": "r", "state": "failed", "error": "boom\x1b[2J"}, "pid 7: r: failed: boom\\x1b[2J", 1),
    ({"recipe": "r", "state": "recording"}, "detach asked; the job puts its own code back at its next step", 1),
])
def test_detach_says_each_state_and_fails_when_the_code_is_not_back(monkeypatch, said, shown, code):
    done = run(monkeypatch, [said], "7")
    assert shown in done.output and done.exit_code == code


def test_status_says_a_watch_and_a_waiting_window(monkeypatch, capsys):
    monkeypatch.setattr(records, "status", lambda pid: [{"recipe": "patchkit-watch", "state": "watching"},
                                                        {"recipe": "r", "state": "attached", "targets": ["m:f"]}])
    cli_detach.status(7)
    out = capsys.readouterr().out
    assert "pid 7: patchkit-watch: watching; ; its stacks watched by attach --auto, nothing changed" in out
    assert "pid 7: r: attached; m:f; waiting for its first step" in out


def test_status_of_nothing_attached(monkeypatch, capsys):
    monkeypatch.setattr(records, "status", lambda pid: [])
    cli_detach.status(7)
    assert "nothing attached" in capsys.readouterr().err
