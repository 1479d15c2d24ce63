"""cli_patch: what diff, apply, revert and status say on this machine, one line per file, states as users read them."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from patchkit.cli import patch as cli_patch
import patchkit
from patchkit.cli.commands import main
from patchkit.state.ledger import Ledger
from patchkit.core.outcome import FileOutcome, Outcome

from conftest import FIXTURES
from script_helpers import script_recipe

DP = "verl/workers/actor/dp_actor.py"
R = "verl-fsdp-update"


def run(*args, code=0, input=None):
    result = CliRunner().invoke(main, [str(a) for a in args], input=input)
    assert result.exit_code == code, result.output
    return result


def test_apply_says_each_files_outcome_then_counts_the_written_ones(tree):
    root = tree("verl-0.6")
    path = (root / DP).resolve()
    lines = run("apply", R, "--root", root).stderr.splitlines()
    assert lines[0] == f"patched: {path} (12 lines)"
    assert any(ln.startswith(f"{R}: 1 file(s) patched, 0 already applied (verl 0.6.1") for ln in lines)
    lines = run("apply", R, "--root", root).stderr.splitlines()
    assert lines[0] == f"already applied: {path}"
    assert any(ln.startswith(f"{R}: 0 file(s) patched, 1 already applied") for ln in lines)
    lines = run("apply", R, "schedule.wait=3", "--root", root).stderr.splitlines()
    assert lines[0] == f"updated: {path} (12 lines)" and any("1 file(s) patched" in ln for ln in lines)


def test_declined_in_review_says_not_written_and_exits_1(tree):
    root = tree("verl-0.6")
    result = run("apply", R, "--root", root, "-i", code=1, input="n\n")
    assert f"not written: {(root / DP).resolve()} (declined in review)" in result.stderr
    assert result.stderr.rstrip().endswith(f"{R}: nothing written")


@pytest.mark.parametrize("change,first", [
    (None, "applied   "), ("edit", "edited since apply"), ("reinstall", "replaced (reinstalled?)"),
    ("original", "reverted outside patchkit"), ("delete", "missing   "),
])
def test_status_starts_each_row_with_its_state(tree, change, first):
    root = tree("verl-0.6")
    original = (root / DP).read_bytes()
    patchkit.apply(patchkit.load(R), str(root))
    if change == "edit":
        (root / DP).write_bytes((root / DP).read_bytes() + b"# mine\n")
    elif change == "reinstall":
        (root / DP).write_bytes(original + b"# newer\n")
    elif change == "original":
        (root / DP).write_bytes(original)
    elif change == "delete":
        (root / DP).unlink()
    [line] = run("status").stdout.splitlines()
    assert line == f"{first}  {R}  {(root / DP).resolve()}  (verl 0.6.1)"
    assert json.loads(run("status", "--json").stdout)["files"][0]["state"] == first.rstrip()


def test_status_says_when_the_backup_is_gone_and_when_there_is_no_record(tree, tmp_path, patchkit_home):
    root = tree("verl-0.6")
    patchkit.apply(patchkit.load(R), str(root))
    shutil.rmtree(patchkit_home / "backups")
    [line] = run("status").stdout.splitlines()
    assert line.endswith("(verl 0.6.1)  [backup missing or corrupted: revert takes the marked lines out]")
    other = tmp_path / "other"
    shutil.copytree(FIXTURES / "verl-0.6", other)
    patchkit.revert([R])
    patchkit.apply(patchkit.load(R), str(other), ledger=Ledger(tmp_path / "another-home"))
    [line] = run("status", "--root", other).stdout.splitlines()
    assert line == (f"applied (no record)  {R}  {(other / DP).resolve()}  (verl 0.6.1)  "
                    f"[no record under {patchkit_home}: revert takes the marked lines out, without a backup]")


def test_revert_says_each_files_outcome_with_the_line_force_kept(tree, tmp_path):
    root = tree("verl-0.6")
    patchkit.apply(patchkit.load(R), str(root), ledger=Ledger(tmp_path / "another-home"))
    (root / DP).write_text((root / DP).read_text() + "x = 1  # was patchkit:verl-fsdp-update\n")
    last = len((root / DP).read_text().splitlines())
    result = run("revert", "--all", "--root", root, "--force")
    assert result.stderr.splitlines() == [
        f"reverted without a backup (no record; marked lines taken out); line {last} kept (--force): "
        f"{(root / DP).resolve()} ({R})", "1 file(s) handled"]
    assert run("revert", "--all").stderr == "nothing was applied\n"


def test_each_git_note_is_said_once(capsys, tmp_path):
    outcomes = [FileOutcome(tmp_path / n, n, Outcome.PATCHED, git=note)
                for n, note in (("a.py", "committed 1234 on patchkit/r"), ("b.py", "committed 1234 on patchkit/r"),
                                ("c.py", ""), ("d.py", "tracked in /other"))]
    cli_patch.say_git(outcomes)
    assert capsys.readouterr().err == "git: committed 1234 on patchkit/r\ngit: tracked in /other\n"


def test_diff_says_what_would_change_and_where_to_apply_it(tree):
    root = tree("verl-0.6")
    result = run("diff", R, "--root", root)
    assert result.stdout.startswith(f"--- a/{DP}\n+++ b/{DP}\n")
    assert result.stderr.splitlines() == [
        f"{R}: 1 file(s) would change, 0 already applied (verl 0.6.1, from verl metadata in {root.resolve()})",
        f"apply the patch with `git apply` or `patch -p1` run in {root.resolve()}"]


def test_apply_finds_the_package_once_and_says_a_skipped_version_check_before_writing(tree, monkeypatch):
    from patchkit.state import planning

    root = tree("verl-0.6")
    calls = []
    real = planning.locate
    monkeypatch.setattr(planning, "locate", lambda *a, **k: calls.append(a) or real(*a, **k))
    said_before_review = []

    def review(files):
        said_before_review.append(True)
        return False

    monkeypatch.setattr(cli_patch, "review", review)
    result = run("apply", R, "--root", root, "--skip-version-check", "--interactive", code=1)
    assert len(calls) == 1 and said_before_review
    assert "version check skipped" not in result.stderr  # verl 0.6.1 is in range: nothing was skipped
    result = run("apply", R, "--root", root, code=0)
    assert len(calls) == 2


def test_diff_o_writes_the_patch_whole_and_replaces_a_file_of_yours(tree, tmp_path):
    root = tree("verl-0.6")
    patch = tmp_path / "out.patch"
    patch.write_text("old")
    result = run("diff", R, "--root", root, "-o", patch)
    assert patch.read_text().startswith(f"--- a/{DP}\n") and f"wrote {patch}" in result.stderr
    assert not [p for p in tmp_path.iterdir() if "patchkit-tmp" in p.name]


def test_diff_o_into_a_missing_folder_is_an_error_not_a_traceback(tree, tmp_path):
    root = tree("verl-0.6")
    result = run("diff", R, "--root", root, "-o", tmp_path / "missing" / "out.patch", code=1)
    assert "Traceback" not in result.output and not (tmp_path / "missing").exists()
    assert f"error: {tmp_path / 'missing' / 'out.patch'}: {tmp_path / 'missing'} does not exist" in result.stderr
    assert f"hint: create it first (`mkdir -p {tmp_path / 'missing'}`)" in result.stderr


def test_diff_o_never_writes_through_a_link_another_user_planted_in_a_sticky_folder(tree, tmp_path, stranger):
    """On a node where fs.protected_symlinks is 0, the kernel lets root follow such a link: patchkit does not."""
    root = tree("verl-0.6")
    victim = tmp_path / "victim"
    victim.write_text("root's own file\n")
    planted = stranger.sticky / "out.patch"
    stranger.run("ln", "-s", str(victim), str(planted))
    result = run("diff", R, "--root", root, "-o", planted, code=1)
    assert victim.read_text() == "root's own file\n" and planted.is_symlink()
    assert f"error: {planted}: {planted} is a symbolic link (owned by uid {stranger.uid})" in result.stderr
    assert "hint: " in result.stderr and sorted(p.name for p in stranger.sticky.iterdir()) == ["out.patch"]
    stranger.run("mkdir", str(stranger.sticky / "theirs"))
    stranger.run("ln", "-s", str(tmp_path), str(stranger.sticky / "theirs" / "up"))  # a folder on the way
    result = run("diff", R, "--root", root, "-o", stranger.sticky / "theirs" / "up" / "x.patch", code=1)
    assert f"is a symbolic link owned by uid {stranger.uid}, not by you" in result.stderr
    assert not (tmp_path / "x.patch").exists()


SCRIPT = ("class Tiny:\n    def training_step(self, i):\n        return i * 2\n\n\n"
          "if __name__ == '__main__':\n    print(sum(Tiny().training_step(i) for i in range(3)))\n")


def test_diff_apply_status_and_revert_take_a_script_from_the_recipe_s_folder(tmp_path, monkeypatch):
    import subprocess
    import sys

    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "ts.yaml").write_text(script_recipe())
    monkeypatch.chdir("/")  # the recipe's folder decides, not the current one
    recipe = tmp_path / "ts.yaml"
    result = run("diff", recipe)
    assert result.stdout.startswith("--- a/train.py\n+++ b/train.py\n") and '_patchkit_runtime.step("ts")' in result.stdout
    assert f"ts: 1 file(s) would change, 0 already applied (the script {tmp_path / 'train.py'})" in result.stderr
    lines = run("apply", recipe).stderr.splitlines()
    assert lines[0] == f"patched: {tmp_path / 'train.py'} (11 lines)"
    assert lines[1].startswith(f"ts: 1 file(s) patched, 0 already applied (the script {tmp_path / 'train.py'}); ")
    assert "# patchkit:ts" in (tmp_path / "train.py").read_text()
    status = run("status").stdout
    assert f"applied     ts  {tmp_path / 'train.py'}  (train.py)" in status
    done = subprocess.run([sys.executable, "-I", "-S", "train.py"], cwd=tmp_path, capture_output=True, text=True)
    assert done.stdout == "6\n"  # patched, the script runs (patchkit not importable there: said, and it runs on)
    assert "patchkit: ts is applied to __main__, but" in done.stderr
    run("revert", "ts")
    assert (tmp_path / "train.py").read_text() == SCRIPT
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "train.py").write_text(SCRIPT)
    run("apply", recipe, "--root", other)
    assert "# patchkit:ts" in (other / "train.py").read_text() and (tmp_path / "train.py").read_text() == SCRIPT
    run("revert", "ts")
    assert (other / "train.py").read_text() == SCRIPT


def test_a_script_recipe_whose_script_is_not_there_fails_at_the_recipe_s_line_and_writes_nothing(tmp_path):
    (tmp_path / "ts.yaml").write_text(script_recipe())
    for command in ("diff", "apply"):
        result = run(command, tmp_path / "ts.yaml", code=1)
        assert f"ts.yaml:4:11: no script train.py: {tmp_path / 'train.py'} is not there" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ts.yaml"]
