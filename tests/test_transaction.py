"""transaction: apply and revert report a named Outcome per file, write every file or none, and keep the records."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from patchkit.state import transaction
import patchkit
from patchkit.core.errors import LedgerError, PatchkitError, TargetError
from patchkit.state.ledger import Ledger
from patchkit.core.outcome import Outcome
from patchkit.recipe.load import load

from conftest import snapshot

DP = "verl/workers/actor/dp_actor.py"
R = "verl-fsdp-update"


def recorded(home):
    path = home / "ledger.json"
    return json.loads(path.read_text())["files"] if path.exists() else {}


def test_apply_says_patched_then_already_applied_then_updated(tree):
    root = tree("verl-0.6")
    [first] = transaction.apply(load(R), str(root))
    assert (first.state, first.detail, first.relpath, first.git) == (Outcome.PATCHED, "12 lines", DP, "")
    assert first.path == (root / DP).resolve()
    [again] = transaction.apply(load(R), str(root))
    assert (again.state, again.detail) == (Outcome.ALREADY_APPLIED, "")
    [other] = transaction.apply(load(R, ["schedule.wait=3"]), str(root))
    assert other.state is Outcome.UPDATED and "wait=3" in (root / DP).read_text()
    [second] = transaction.apply(load("verl-fsdp-logprob"), str(root))  # another recipe in the same file
    assert second.state is Outcome.PATCHED


def test_review_sees_the_files_about_to_change_and_a_no_writes_nothing(tree, patchkit_home):
    root = tree("verl-0.6")
    transaction.apply(load(R), str(root))
    applied, records = snapshot(root), recorded(patchkit_home)
    shown = []

    def decline(files):
        shown.extend(files)
        return False

    [o] = transaction.apply(load(R, ["schedule.wait=3"]), str(root), review=decline)
    assert (o.state, o.detail) == (Outcome.NOT_WRITTEN, "declined in review")
    assert [f.relpath for f in shown] == [DP] and "wait=3" in shown[0].diff()
    assert snapshot(root) == applied and recorded(patchkit_home) == records  # the earlier settings stay, on disk too
    [o] = transaction.apply(load(R, ["schedule.wait=3"]), str(root), review=lambda files: True)
    assert o.state is Outcome.UPDATED


def test_review_is_not_asked_when_nothing_would_change(tree):
    root = tree("verl-0.6")
    transaction.apply(load(R), str(root))

    def never(files):
        raise AssertionError("asked")

    assert [o.state for o in transaction.apply(load(R), str(root), review=never)] == [Outcome.ALREADY_APPLIED]


def test_a_file_that_cannot_be_written_is_refused_before_anything_is(tree, monkeypatch, patchkit_home):
    root = tree("verl-0.6")
    before = snapshot(root)
    target = str((root / DP).resolve())
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == target else real(p, mode))
    with pytest.raises(TargetError) as exc:
        transaction.apply(load(R), str(root))
    assert exc.value.message == "the file (or its folder) is not writable" and exc.value.where.path == target
    assert snapshot(root) == before and recorded(patchkit_home) == {}


def test_revert_gives_the_original_bytes_back(tree, patchkit_home):
    root = tree("verl-0.6")
    before = snapshot(root)
    transaction.apply(load(R), str(root))
    [o] = transaction.revert([R])
    assert (o.state, o.detail, o.relpath) == (Outcome.REVERTED, R, DP)
    assert snapshot(root) == before and recorded(patchkit_home) == {}


@pytest.mark.parametrize("change,force,state", [
    ("delete", False, Outcome.MISSING),
    ("original", False, Outcome.ALREADY_ORIGINAL),
    ("reinstall", False, Outcome.REPLACED),
    ("edit", False, Outcome.REVERTED_EDITS_KEPT),
    ("edit", True, Outcome.REVERTED_EDITS_DISCARDED),
])
def test_revert_names_what_it_found(tree, change, force, state):
    root = tree("verl-0.6")
    original = (root / DP).read_bytes()
    transaction.apply(load(R), str(root))
    patched = (root / DP).read_bytes()
    if change == "delete":
        (root / DP).unlink()
    elif change == "original":
        (root / DP).write_bytes(original)
    elif change == "reinstall":
        (root / DP).write_bytes(original + b"# a newer release\n")
    else:
        (root / DP).write_bytes(patched + b"# my note\n")
    [o] = transaction.revert([], everything=True, force=force)
    assert o.state is state
    if change == "edit":
        assert (root / DP).read_bytes() == (original if force else original + b"# my note\n")


@pytest.mark.parametrize("edited,state", [(False, Outcome.REVERTED_BACKUP_MISSING),
                                          (True, Outcome.REVERTED_EDITS_KEPT_BACKUP_MISSING)])
def test_revert_without_its_backup_takes_the_marked_lines_out(tree, patchkit_home, edited, state):
    root = tree("verl-0.6")
    original = (root / DP).read_bytes()
    transaction.apply(load(R), str(root))
    for backup in (patchkit_home / "backups").iterdir():
        backup.unlink()
    if edited:
        (root / DP).write_bytes((root / DP).read_bytes() + b"# my note\n")
    [o] = transaction.revert([R])
    assert o.state is state
    assert (root / DP).read_bytes() == original + (b"# my note\n" if edited else b"")


def test_lines_no_record_explains_come_out_and_force_says_the_line_it_kept(tree, tmp_path):
    root = tree("verl-0.6")
    original = (root / DP).read_text()
    transaction.apply(load(R), str(root), ledger=Ledger(tmp_path / "other-home"))
    (root / DP).write_text((root / DP).read_text() + "x = 1  # see patchkit:verl-fsdp-update\n")
    last = len((root / DP).read_text().splitlines())  # the hand-edited line, numbered as on disk
    with pytest.raises(LedgerError, match="still refers to patchkit"):
        transaction.revert([R], root=str(root))
    [o] = transaction.revert([R], root=str(root), force=True)
    assert o.state is Outcome.REVERTED_NO_RECORD and o.detail == R
    assert o.kept_line == last
    assert o.label.endswith(f"; line {o.kept_line} kept (--force)")
    assert (root / DP).read_text() == original + "x = 1  # see patchkit:verl-fsdp-update\n"


def test_revert_needs_recipes_or_everything_and_says_when_nothing_is_applied(tree):
    with pytest.raises(PatchkitError, match="say which recipes to revert"):
        transaction.revert()
    with pytest.raises(LedgerError, match=f"nothing to revert: {R} is not applied"):
        transaction.revert([R])
    assert transaction.revert([], everything=True) == []


def test_revert_under_root_leaves_other_roots_alone(tree, tmp_path):
    one = tree("verl-0.6")
    two = tmp_path / "two"
    shutil.copytree(one, two / "site")
    transaction.apply(load(R), str(one))
    transaction.apply(load(R), str(two / "site"))
    [o] = transaction.revert([R], root=str(two / "site"))
    assert o.path == (two / "site" / DP).resolve()
    assert "# patchkit:" in (one / DP).read_text() and "# patchkit:" not in (two / "site" / DP).read_text()


def test_a_revert_that_would_leave_a_file_that_does_not_compile_writes_nothing(tree):
    """A formatter split a header line so its block opener lost the marker: taking the marked lines out breaks it."""
    root = tree("verl-0.6")
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root))
    path = root / DP
    text = path.read_text()
    edited = text.replace("try:  # patchkit:verl-fsdp-update\n", "try:\n", 1)  # the opener, unmarked, stays
    path.write_text(edited)
    with pytest.raises(LedgerError) as info:
        patchkit.revert(["verl-fsdp-update"])
    assert "does not compile" in info.value.message and info.value.where.path == str(path)
    assert "--force" in info.value.hint
    assert path.read_text() == edited
    [outcome] = patchkit.revert(["verl-fsdp-update"], force=True)  # the backup, edits discarded
    assert outcome.state is Outcome.REVERTED_EDITS_DISCARDED


@pytest.mark.parametrize("link", ["folder", "file"])
def test_a_link_out_of_the_root_is_refused_and_the_folder_it_leads_to_is_the_root_to_pass(tree, tmp_path, link):
    """A link out of --root is never written through; the folder it leads to, given as --root, is patched,
    and status and revert under that root meet what apply did."""
    from click.testing import CliRunner

    from patchkit.cli.commands import main

    real = tree("verl-0.6")
    original = (real / DP).read_bytes()
    root = tmp_path / "root"
    if link == "folder":  # root/verl -> the real package
        root.mkdir()
        (root / "verl").symlink_to(real / "verl")
    else:  # a copy of the package whose dp_actor.py is a link to the real file
        shutil.copytree(real, root, symlinks=True)
        (root / DP).unlink()
        (root / DP).symlink_to(real / DP)
    linked = root / ("verl" if link == "folder" else DP)
    cli = CliRunner()
    refused = cli.invoke(main, ["apply", R, "--root", str(root)])
    assert refused.exit_code == 1 and "is reached through a symbolic link to" in refused.stderr
    assert f"--root {real.resolve()}" in refused.stderr and (real / DP).read_bytes() == original
    assert cli.invoke(main, ["apply", R, "--root", str(real)]).exit_code == 0
    assert linked.is_symlink() and (real / DP).read_bytes() != original
    status = cli.invoke(main, ["status", "--root", str(real)])
    assert status.exit_code == 0 and f"applied     {R}  {(real / DP).resolve()}" in status.stdout
    reverted = cli.invoke(main, ["revert", "--all", "--root", str(real)])
    assert reverted.exit_code == 0 and "1 file(s) handled" in reverted.stderr
    assert (real / DP).read_bytes() == original and linked.is_symlink()
    assert "nothing applied" in cli.invoke(main, ["status", "--root", str(real)]).stdout


# ---------------------------------------------------------------- a marked line patchkit did not write


MINE = "import math as mymath  # patchkit:verl-fsdp-update\nTAU = 2 * mymath.pi\n"


@pytest.mark.parametrize("everything", [False, True])
def test_revert_keeps_a_marked_line_patchkit_did_not_write_and_names_its_line(tree, everything):
    """Added after apply, the user's line ends in the recipe's marker: revert takes out patchkit's lines only."""
    root = tree("verl-0.6")
    original = (root / DP).read_text()
    transaction.apply(load(R), str(root))
    (root / DP).write_text((root / DP).read_text() + MINE)
    [o] = transaction.revert([] if everything else [R], everything=everything)
    assert (root / DP).read_text() == original + MINE  # the job that reads TAU still imports
    assert o.state is Outcome.REVERTED_EDITS_KEPT
    line = len(original.splitlines()) + 1  # numbered in the file as revert leaves it
    assert o.foreign == ((line, R),)
    assert f"line {line} kept: it ends in `# patchkit:{R}`, but patchkit did not write it" in o.label
    compile((root / DP).read_text(), str(root / DP), "exec")


def test_force_still_gives_back_the_original_bytes(tree):
    root = tree("verl-0.6")
    original = (root / DP).read_bytes()
    transaction.apply(load(R), str(root))
    (root / DP).write_text((root / DP).read_text() + MINE)
    [o] = transaction.revert([R], force=True)
    assert o.state is Outcome.REVERTED_EDITS_DISCARDED and (root / DP).read_bytes() == original
