"""cli.progress: a bar on stderr only when stderr is a terminal; what it draws, stage by stage."""

from __future__ import annotations

import io
from types import SimpleNamespace

import click
from click.testing import CliRunner

from patchkit.cli import progress as cli_progress
from patchkit.cli.progress import EVERY, Bar, bar, is_terminal, size_text
from patchkit.core.progress import BYTES

from progress_helpers import Terminal


@click.command()
@click.option("--json", "as_json", is_flag=True)
def work(as_json):
    """A command that waits for three nodes, then prints its result."""
    with bar(enabled=not as_json) as progress:
        if progress is not None:
            progress.start(3, "waiting for 3 node(s)", "nodes")
            for name in ("a", "b", "c"):
                progress.advance(1, f"node {name}")
    click.echo("result")


def test_no_bar_when_stderr_is_not_a_terminal():
    result = CliRunner().invoke(work, [])
    assert (result.exit_code, result.stdout, result.stderr) == (0, "result\n", "")
    with bar() as progress:  # pytest's own stderr is captured: no terminal either
        assert progress is None


def test_on_a_terminal_the_bar_goes_to_stderr_with_its_label_and_last_count(terminal):
    result = CliRunner().invoke(work, [])
    assert result.exit_code == 0 and result.stdout == "result\n"
    assert "waiting for 3 node(s)" in result.stderr and "3/3" in result.stderr and "100%" in result.stderr
    assert "node c" in result.stderr and result.stderr.endswith("\n")  # the line is finished before the output
    json_run = CliRunner().invoke(work, ["--json"])
    assert (json_run.stdout, json_run.stderr) == ("result\n", "")


def test_is_terminal_asks_the_stream():
    assert is_terminal(Terminal(io.StringIO())) and not is_terminal(io.StringIO())
    closed = io.StringIO()
    closed.close()
    assert not is_terminal(closed) and not is_terminal(object())


def drawn(stages):
    """What a Bar writes for ``stages``: [(total, label, unit, [(n, item), ...]), ...]."""
    out = io.StringIO()
    shown = Bar(Terminal(out))
    for total, label, unit, steps in stages:
        shown.start(total, label, unit)
        for n, item in steps:
            shown.advance(n, item)
    shown.close()
    shown.close()  # twice is once
    return out.getvalue()


def test_bytes_show_as_sizes_and_each_stage_is_its_own_finished_line():
    text = drawn([(3 << 20, "copying 2 file(s)", BYTES, [(1 << 20, "file 1/2 from h"), (2 << 20, "file 2/2 from h")]),
                  (2, "searching 2 node(s)", "nodes", [(1, ""), (1, "")])])
    first, second = text.split("searching", 1)
    assert "copying 2 file(s)" in first and "3.0 MiB/3.0 MiB" in first and "file 2/2 from h" in first
    assert first.count("\n") == 1 and "3145728" not in first  # its line finished; sizes, not raw counts
    assert "2/2" in second and second.endswith("\n")
    assert size_text(512) == "512 B" and size_text(3 << 30) == "3.0 GiB"


def test_items_from_others_files_are_escaped():
    text = drawn([(1, "reading 1 capture(s)", BYTES, [(1, "rank 0 (\x1b]0;x\x07)")])])
    assert "\x1b]0;x" not in text and "\\x1b]0;x\\x07" in text


def test_a_large_trace_is_not_drawn_at_every_chunk(monkeypatch):
    out = io.StringIO()
    now = [0.0]
    monkeypatch.setattr(cli_progress, "time", SimpleNamespace(monotonic=lambda: now[0]))  # its clock, moved by hand
    shown = Bar(Terminal(out))
    shown.start(10_000, "reading", BYTES)
    calls = []
    real = shown._draw
    monkeypatch.setattr(shown, "_draw", lambda: (calls.append(1), real()))
    for n in range(9_999):
        now[0] = (n // 1000) * 2 * EVERY  # a thousand chunks, then twice EVERY seconds later the next thousand
        shown.advance(1)
    assert len(calls) == 9  # one drawing every EVERY seconds, not one per chunk
    shown.advance(1)  # the last one is drawn at once: the bar ends full
    assert calls and "10000 B" not in out.getvalue() and "9.8 KiB/9.8 KiB" in out.getvalue()


def test_an_error_inside_still_finishes_the_line(terminal):
    @click.command()
    def failing():
        with bar() as progress:
            progress.start(2, "applying on 2 node(s)", "nodes")
            progress.advance(1)
            raise click.ClickException("node b failed")

    result = CliRunner().invoke(failing, [])
    assert result.exit_code == 1
    assert "applying on 2 node(s)" in result.stderr and "1/2" in result.stderr
    assert "\nError: node b failed" in result.stderr


def test_advance_before_any_stage_is_ignored():
    shown = Bar(Terminal(io.StringIO()))
    shown.advance(5)
    shown.close()
