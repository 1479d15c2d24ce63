"""cli.auto: how `patchkit attach --auto` lists what it found, and the command lines it refuses before it gets
into any process (exit 2, nothing changed, nothing written)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest
from click.testing import CliRunner

from patchkit.attach import auto
from patchkit.cli.commands import main


def cand(**kw):
    base = dict(kind="loop", file="/job/train.py", qualname="train", line=14, code="for batch in loader:",
                period=0.2, regularity=0.97, share=0.91, repeats=12, holds="one optimizer step")
    return NS(**dict(base, **kw))


def test_candidates_are_listed_like_points_with_the_chosen_marked():
    found = NS(candidates=(cand(), cand(kind="function", line=5, code="def micro_step(model, micro):", period=0.09,
                                        share=0.6, repeats=24, holds="1/2 of an optimizer step (a micro-batch)")))
    lines = auto.candidate_lines(found, 0)
    assert lines[0].split() == ["1*", "loop", "train.py:14", "for", "batch", "in", "loader:", "in", "train"]
    assert lines[1].strip() == ("every 200 ms (97% regular), 91% of the time, 12 turns seen; each holds one "
                                "optimizer step")
    assert lines[2].split()[:3] == ["2", "function", "train.py:5"]
    assert "24 calls seen" in lines[3] and "every 90 ms" in lines[3]


def test_a_long_list_is_cut_and_says_so():
    found = NS(candidates=tuple(cand(line=i) for i in range(auto.SHOWN + 3)))
    lines = auto.candidate_lines(found, None)
    assert len(lines) == 2 * auto.SHOWN + 1 and "3 more" in lines[-1] and not any("*" in ln for ln in lines)


def test_where_the_time_went_is_listed_when_no_step_is_clear():
    found = NS(top=(("/job/serve.py", 40, "Server.wait", 0.93),))
    assert auto.top_lines(found) == ["  93%  serve.py:40  in Server.wait"]


@pytest.mark.parametrize("args,said", [
    (["attach", "123", "r.yaml", "--auto"], "give no RECIPE (r.yaml), only KEY=VALUE settings"),
    (["attach", "--match", "x", "r.yaml", "--auto"], "give no RECIPE"),
    (["attach", "--auto"], "give the PID"),
    (["attach", "123", "--auto", "--save", "out.txt"], "ends in .yaml"),
    (["attach", "123", "r.yaml", "--watch", "5"], "go with --auto"),
    (["attach", "123", "r.yaml", "--pick", "2"], "go with --auto"),
    (["attach", "123", "--auto", "--root", "/x"], "no --status, --skip-empty or --root"),
    (["attach", "123", "--auto", "--pick", "0"], "give a candidate's number (1, 2, ...), its place as listed"),
    (["attach", "123", "--auto", "--pick", "a.py: 3"], "FILE:LINE"),
    (["attach", "123", "--auto", "--pick", ""], "its function's name"),
    (["attach", "123", "--auto", "--watch", "0.1"], "0.1"),
    (["attach", "--ray", "auto", "--auto"], "--ray --auto takes --match TEXT"),
    (["attach", "--ray", "auto", "--match", "x", "r.yaml", "--auto"], "no PID or RECIPE"),
    (["attach", "--ray", "auto", "--match", "x", "--auto", "--root", "/x"], "no --status, --pids or --root"),
    (["attach", "--ray", "auto", "--match", "x", "r.yaml", "--pick", "2"], "go with --auto"),
])
def test_command_lines_refused_before_anything_is_done(tmp_path, monkeypatch, args, said):
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 2 and said in done.output, done.output
    assert list(tmp_path.iterdir()) == []


def test_an_existing_save_file_is_never_replaced(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text("keep")
    done = CliRunner().invoke(main, ["attach", "123", "--auto", "--save", "mine.yaml"])
    assert done.exit_code == 2 and "never replaces" in done.output and (tmp_path / "mine.yaml").read_text() == "keep"
