"""ledger: backups, atomic writes, the lock, drift, and recovery of a change left half written."""

from __future__ import annotations

import json
import os
import threading

import pytest

import patchkit
from patchkit.core.errors import LockedError
from patchkit.state.ledger import Ledger, sha256

from conftest import RECIPES, snapshot

DP = "verl/workers/actor/dp_actor.py"


def test_backups_are_content_addressed_and_checked(tmp_path):
    ledger = Ledger(tmp_path)
    digest = ledger.backup(b"original bytes")
    assert digest == sha256(b"original bytes")
    assert ledger.read_backup(digest) == b"original bytes"
    (tmp_path / "backups" / digest).write_bytes(b"corrupted")
    assert ledger.read_backup(digest) is None


def test_the_lock_is_exclusive_and_times_out_with_a_clear_error(tmp_path):
    holder = Ledger(tmp_path)
    entered = threading.Event()
    release = threading.Event()

    def hold():
        with holder.locked():
            entered.set()
            release.wait(5)

    thread = threading.Thread(target=hold)
    thread.start()
    entered.wait(5)
    try:
        with pytest.raises(LockedError) as info:
            with Ledger(tmp_path).locked(timeout=0.2):
                pass
        assert "another patchkit process holds" in info.value.render()
    finally:
        release.set()
        thread.join()
    with Ledger(tmp_path).locked(timeout=0.2):
        pass


def test_a_hand_edit_after_apply_is_kept_by_revert(tree):
    root = tree("verl-0.6")
    original = (root / DP).read_text()
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root))
    patched = (root / DP).read_text()
    edited = patched.replace("class DataParallelPPOActor", "# my note\nclass DataParallelPPOActor", 1)
    (root / DP).write_text(edited)
    assert [s.state for s in patchkit.status()] == ["edited since apply"]
    [outcome] = patchkit.revert(["verl-fsdp-update"])
    assert outcome.state == "reverted, edits kept"
    assert (root / DP).read_text() == original.replace("class DataParallelPPOActor", "# my note\nclass DataParallelPPOActor", 1)


def test_a_reinstalled_file_is_left_alone_and_the_record_cleaned(tree):
    root = tree("verl-0.6")
    original = (root / DP).read_bytes()
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root))
    upstream = original + b"\n# a newer release\n"
    (root / DP).write_bytes(upstream)
    assert [s.state for s in patchkit.status()] == ["replaced (reinstalled?)"]
    [outcome] = patchkit.revert([], everything=True)
    assert outcome.state == "replaced"
    assert (root / DP).read_bytes() == upstream
    assert patchkit.status() == []


def test_revert_with_a_corrupted_backup_still_restores_by_taking_the_lines_out(tree, patchkit_home):
    root = tree("verl-0.6")
    before = snapshot(root)
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root))
    for backup in (patchkit_home / "backups").iterdir():
        backup.write_bytes(b"garbage")
    patchkit.revert([], everything=True)
    assert snapshot(root) == before


def test_ledger_that_is_not_json_is_reported_with_its_path(patchkit_home):
    (patchkit_home / "ledger.json").write_text("{not json")
    from patchkit.core.errors import LedgerError

    with pytest.raises(LedgerError) as info:
        patchkit.status()
    assert str(patchkit_home / "ledger.json") in info.value.render()
    assert os.path.exists(patchkit_home / "ledger.json")


def test_a_change_left_half_written_is_reported_by_status_and_put_back_by_the_next_revert(tree, patchkit_home):
    from click.testing import CliRunner

    from patchkit.cli.commands import main

    root = tree("verl-0.6")
    before = snapshot(root)
    settings = patchkit.load("verl-fsdp-update")
    plan = patchkit.plan(settings, str(root))
    [f] = plan.files
    ledger = Ledger()
    # what a process killed right after writing the file leaves behind: the journal entry and the new bytes
    with ledger.locked() as led:
        led.pending = {"files": [{"path": str(f.path), "old": led.backup(f.data), "new": sha256(f.new_bytes())}],
                       "records": {str(f.path): None}}
        led.files[str(f.path)] = __import__("patchkit.state.ledger", fromlist=["FileRecord"]).FileRecord(
            path=str(f.path), relpath=f.relpath, root=str(root), distribution="verl", version="0.6.1",
            original_sha256=sha256(f.data), patched_sha256=sha256(f.new_bytes()))
        led.save()
    f.path.write_bytes(f.new_bytes())
    half_done = snapshot(root)
    result = CliRunner().invoke(main, ["status"])  # a read: it says so, and changes no file outside the state folder
    assert result.exit_code == 0
    assert f"interrupted  {f.path}" in result.stdout and "the next `patchkit apply` or `patchkit revert`" in result.stdout
    assert snapshot(root) == half_done
    status = json.loads(CliRunner().invoke(main, ["status", "--json"]).stdout)
    assert [(row["path"], row["state"]) for row in status["files"]] == [(str(f.path), "interrupted"),
                                                                         (str(f.path), "applied")]
    result = CliRunner().invoke(main, ["revert", "--all"])
    assert "put back" in result.stderr and "stopped half-way" in result.stderr
    assert snapshot(root) == before
    assert "nothing applied" in CliRunner().invoke(main, ["status"]).stdout


def test_stale_compiled_copies_are_dropped_and_owner_and_mode_kept(tree):
    root = tree("verl-0.6")
    target = root / DP
    cache = target.parent / "__pycache__"
    cache.mkdir()
    stale = cache / "dp_actor.cpython-311.pyc"
    stale.write_bytes(b"stale")
    target.chmod(0o640)
    if os.getuid() == 0:
        os.chown(target, 1234, 2345)
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root))
    assert not stale.exists()
    st = target.stat()
    assert st.st_mode & 0o777 == 0o640
    if os.getuid() == 0:
        assert (st.st_uid, st.st_gid) == (1234, 2345)


def test_a_patchkit_line_edited_by_hand_makes_revert_refuse_unless_forced(tree):
    root = tree("verl-0.6")
    before = snapshot(root)
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root))
    text = (root / DP).read_text()
    edited = text.replace('_patchkit_runtime.step("verl-fsdp-update")  # patchkit:verl-fsdp-update',
                          '_patchkit_runtime.step("verl-fsdp-update")  # patchkit:verl-fsdp-update, mine')
    assert edited != text
    (root / DP).write_text(edited)
    from patchkit.core.errors import LedgerError

    with pytest.raises(LedgerError) as info:
        patchkit.revert(["verl-fsdp-update"])
    assert "still refers to patchkit" in info.value.message and "--force" in info.value.hint
    assert (root / DP).read_text() == edited  # nothing changed
    [outcome] = patchkit.revert(["verl-fsdp-update"], force=True)
    assert outcome.state == "reverted, edits discarded (--force)"
    assert snapshot(root) == before


def test_revert_names_the_edited_line_by_its_number_in_the_file_on_disk(tree):
    """The line a refused revert points at is counted in the file as it is, patchkit's header lines included."""
    from patchkit.core.errors import LedgerError

    root = tree("verl-0.6")
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root))
    lines = (root / DP).read_text().splitlines(keepends=True)
    number = next(n for n, ln in enumerate(lines, 1) if '_patchkit_runtime.step("verl-fsdp-update")' in ln)
    lines[number - 1] = lines[number - 1].replace("  # patchkit:verl-fsdp-update", "  # patchkit:verl-fsdp-update (moved)")
    (root / DP).write_text("".join(lines))
    assert sum("# patchkit:" in ln for ln in lines[: number - 1]) >= 2  # the header lines come before it
    with pytest.raises(LedgerError) as info:
        patchkit.revert(["verl-fsdp-update"])
    assert info.value.where.line == number, info.value.render()
    assert f"line {number} still refers to patchkit" in info.value.message
    assert info.value.render().startswith(f"{root / DP}:{number}: ")


def _backups(home) -> set:
    folder = home / "backups"
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


def test_backups_no_record_needs_are_deleted(tree, tmp_path, patchkit_home):
    import shutil

    one, two = tree("verl-0.6"), tmp_path / "two"
    shutil.copytree(one, two)  # the same original bytes: one backup, named by two records
    original = (one / DP).read_bytes()
    megatron = (one / "verl/workers/actor/megatron_actor.py").read_bytes()
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(one))
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(two))
    patchkit.apply(patchkit.load("verl-megatron-update"), str(one))
    assert _backups(patchkit_home) == {sha256(original), sha256(megatron)}
    patchkit.apply(patchkit.load("verl-fsdp-update", ["schedule.wait=3"]), str(one))  # the journal's copy of the old bytes goes
    assert _backups(patchkit_home) == {sha256(original), sha256(megatron)}

    patchkit.revert(["verl-megatron-update"], root=str(one))
    assert _backups(patchkit_home) == {sha256(original)}
    patchkit.revert(["verl-fsdp-update"], root=str(one))
    assert _backups(patchkit_home) == {sha256(original)}  # still named by the record of the second copy

    (two / DP).write_bytes(original + b"\n# reinstalled\n")  # replaced: the record is cleaned, its backup goes too
    [outcome] = patchkit.revert([], everything=True)
    assert outcome.state == "replaced"
    assert _backups(patchkit_home) == set()


def test_backups_of_a_ledger_moved_aside_are_kept(tree, tmp_path, patchkit_home):
    """The hint for an unreadable ledger says its backups are still there: a new ledger must not delete them."""
    one, two = tree("verl-0.6"), tmp_path / "two"
    import shutil

    shutil.copytree(one, two)
    (two / DP).write_bytes((two / DP).read_bytes() + b"\n# another copy\n")
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(one))
    kept = _backups(patchkit_home)
    (patchkit_home / "ledger.json").rename(patchkit_home / "ledger.json.aside")
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(two))  # a fresh ledger writes and cleans up after itself
    patchkit.revert([], everything=True, root=str(two))
    assert kept <= _backups(patchkit_home)  # the aside ledger's backup is still there


def test_a_backup_outlives_a_revert_killed_before_its_ledger_is_saved(tree, patchkit_home, monkeypatch):
    """Killed after writing the files but before the ledger says so: the next command puts the patch back,
    so the backup it needs for the next revert must still be there."""
    root = tree("verl-0.6")
    original = snapshot(root)
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root))
    patched = snapshot(root)
    kept = _backups(patchkit_home)
    real_save = Ledger.save
    saves = []

    def killed_on_the_last_save(self):
        saves.append(self.pending)
        if len(saves) == 2:  # the save that clears the journal: the process dies instead
            raise KeyboardInterrupt
        real_save(self)

    monkeypatch.setattr(Ledger, "save", killed_on_the_last_save)
    with pytest.raises(KeyboardInterrupt):
        patchkit.revert([], everything=True)
    monkeypatch.setattr(Ledger, "save", real_save)
    assert snapshot(root) == original and saves[0] is not None
    assert kept <= _backups(patchkit_home)  # nothing deleted: the ledger on disk still records the patch

    assert [s.state for s in patchkit.status()] == ["interrupted"]  # reported, not put back, by a read
    assert snapshot(root) == original
    led = Ledger()
    with led.locked():  # what apply and revert do first: the patched file is put back
        assert led.recovered
    assert snapshot(root) == patched
    patchkit.revert([], everything=True)
    assert snapshot(root) == original
    assert _backups(patchkit_home) == set()


def test_reverting_a_recipe_whose_id_begins_another_leaves_the_other_alone(tree, tmp_path):
    """verl-fsdp is a prefix of verl-fsdp-update: its revert must not take the other's lines for its own."""
    root = tree("verl-0.6")
    original = (root / DP).read_bytes()
    mine = tmp_path / "verl-fsdp.yaml"
    mine.write_text((RECIPES / "verl-fsdp-update.yaml").read_text().replace("id: verl-fsdp-update", "id: verl-fsdp"))
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root))
    with_update = (root / DP).read_bytes()
    patchkit.apply(patchkit.load(str(mine)), str(root))
    patchkit.revert(["verl-fsdp"], root=str(root))
    assert (root / DP).read_bytes() == with_update
    patchkit.revert(["verl-fsdp-update"], root=str(root))
    assert (root / DP).read_bytes() == original


def test_restore_records_puts_each_record_back_or_drops_a_new_one(tree, tmp_path):
    root = tree("verl-0.6")
    led = Ledger(tmp_path / "home")
    patchkit.apply(patchkit.load("verl-fsdp-update"), str(root), ledger=led)
    with led.locked():
        [key] = led.files
        before = {key: led.files[key].to_json(), "/site/new.py": None}
        led.files[key].recipes.clear()
        led.files["/site/new.py"] = led.files[key]
        led.restore_records(before)
        assert list(led.files) == [key] and list(led.files[key].recipes) == ["verl-fsdp-update"]
