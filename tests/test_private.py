"""The state folder is private: created 0700 with 0600 files, and refused when another user owns or can write it.

The hostile cases are the ones a tester on a shared node tried: a state folder
or ledger planted by another user, a group-writable folder, a ledger that is a
link, a backup planted beside a genuine ledger.  Each is refused with the path
and the fix, exit 1, and no file outside the state folder changes.
"""

from __future__ import annotations

import json
import os
import stat

import pytest
from click.testing import CliRunner

from patchkit.core import private
from patchkit.cli.commands import main
from patchkit.state.ledger import Ledger, sha256

from conftest import snapshot

DP = "verl/workers/actor/dp_actor.py"
NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def cli(*args):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def applied(tree, patchkit_home):
    """The demo-shaped fixture with verl-fsdp-update applied: (root, its bytes when patched, the original)."""
    root = tree("verl-0.6")
    original = (root / DP).read_bytes()
    result = cli("apply", "verl-fsdp-update", "--root", str(root))
    assert result.exit_code == 0, result.output
    return root, (root / DP).read_bytes(), original


def test_state_is_created_private_whatever_the_umask(tree, tmp_path, monkeypatch):
    home = tmp_path / "state" / "patchkit"
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    root = tree("verl-0.6")
    old = os.umask(0)
    try:
        assert cli("apply", "verl-fsdp-update", "--root", str(root)).exit_code == 0
    finally:
        os.umask(old)
    assert mode(home) == 0o700 and mode(home / "backups") == 0o700
    assert {p.name: mode(p) for p in home.iterdir() if p.is_file()} == {"ledger.json": 0o600, "lock": 0o600}
    assert {mode(p) for p in (home / "backups").iterdir()} == {0o600}


@as_root
def test_a_state_folder_another_user_owns_is_refused_with_the_fix(applied, patchkit_home):
    root, patched, _original = applied
    os.chown(patchkit_home, NOBODY, NOBODY)
    for command in (["status"], ["revert", "--all"], ["apply", "verl-fsdp-update", "--root", str(root)], ["traces"]):
        result = cli(*command)
        assert result.exit_code == 1, (command, result.output)
        assert f"{patchkit_home}: refusing to use the state folder: it is owned by uid {NOBODY}" in result.stderr
        assert "PATCHKIT_HOME" in result.stderr and "Traceback" not in result.output
    assert (root / DP).read_bytes() == patched


def test_a_state_folder_others_can_write_is_refused(applied, patchkit_home):
    root, patched, _original = applied
    patchkit_home.chmod(0o777)
    result = cli("status")
    assert result.exit_code == 1
    assert "is writable by group or others (mode 0777)" in result.stderr and f"chmod go-w {patchkit_home}" in result.stderr
    assert cli("revert", "--all").exit_code == 1
    assert (root / DP).read_bytes() == patched
    patchkit_home.chmod(0o755)  # readable by others is fine: only writing is refused
    assert cli("status").exit_code == 0


@pytest.mark.parametrize("plant", ["other-owner", "world-writable", "symlink"])
def test_a_ledger_that_is_not_private_is_never_read(applied, patchkit_home, tmp_path, plant):
    root, patched, _original = applied
    ledger = patchkit_home / "ledger.json"
    if plant == "other-owner":
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(ledger, NOBODY, NOBODY)
    elif plant == "world-writable":
        ledger.chmod(0o666)
    else:
        elsewhere = tmp_path / "planted.json"
        elsewhere.write_bytes(ledger.read_bytes())
        ledger.unlink()
        ledger.symlink_to(elsewhere)
    for command in (["status"], ["revert", "--all"], ["status", "--json"]):
        result = cli(*command)
        assert result.exit_code == 1 and f"{ledger}: refusing to use the state file" in result.stderr, result.output
    assert (root / DP).read_bytes() == patched


@as_root
def test_a_planted_ledger_and_backup_never_reach_the_package(applied, patchkit_home):
    """The tester's attack: a journal of a 'half-written change' whose backup holds planted code."""
    root, patched, _original = applied
    evil = b"import os; os.system('touch /tmp/patchkit-pwned')\n"
    digest = sha256(evil)
    backup = patchkit_home / "backups" / digest
    backup.write_bytes(evil)
    os.chown(backup, NOBODY, NOBODY)
    data = json.loads((patchkit_home / "ledger.json").read_text())
    data["pending"] = {"files": [{"path": str(root / DP), "old": digest, "new": sha256(patched)}], "records": {}}
    (patchkit_home / "ledger.json").write_text(json.dumps(data))
    before = snapshot(root)
    assert cli("status").exit_code == 0  # a read never puts anything back
    assert snapshot(root) == before
    result = cli("revert", "--all")  # the next change would: the planted backup is refused instead
    assert result.exit_code == 1 and f"{backup}: refusing to use the state file" in result.stderr
    assert snapshot(root) == before


def test_an_unreadable_state_folder_is_an_error_not_a_traceback(patchkit_home, monkeypatch):
    real = os.open

    def denied(path, *args, dir_fd=None, **kwargs):
        if os.fspath(path) == patchkit_home.name and dir_fd is not None:  # opened from the folder above it
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, dir_fd=dir_fd, **kwargs)

    monkeypatch.setattr(os, "open", denied)
    result = cli("status")
    assert result.exit_code == 1
    assert f"{patchkit_home}: refusing to use the state folder: it cannot be read (Permission denied)" in result.stderr
    assert "Traceback" not in result.output


def test_a_state_file_larger_than_patchkit_writes_is_refused(patchkit_home):
    big = patchkit_home / "ledger.json"
    big.write_bytes(b" " * 100)
    big.chmod(0o600)
    from patchkit.core.errors import LedgerError

    with private.open_state() as folder:
        with pytest.raises(LedgerError, match="larger than patchkit ever writes"):
            private.read(folder, "ledger.json", limit=10)
        assert private.read(folder, "missing", limit=10) is None


def test_the_home_may_be_a_link_to_a_folder_of_the_users(tmp_path, monkeypatch):
    real = tmp_path / "real-home"
    real.mkdir(mode=0o700)
    link = tmp_path / "home-link"
    link.symlink_to(real)
    monkeypatch.setenv("PATCHKIT_HOME", str(link))
    with private.open_state(base=str(link)) as opened:  # a link of yours, in a folder only you can write
        assert opened.path == str(link)
    Ledger().save()
    assert (real / "ledger.json").is_file()


def test_the_folders_the_job_and_run_make_in_the_state_folder_are_private(tmp_path, monkeypatch):
    from patchkit.core import manifest
    from patchkit.runtime import requests as ondemand
    from patchkit.hook import runcache

    home = tmp_path / "home"
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    old = os.umask(0)
    try:
        manifest.note_folder(str(tmp_path / "outputs"))
        runcache.write(os.path.join(runcache.cache_dir(), "x.py"), "x = 1  # patchkit\n")
        ondemand.write_json((ondemand.REQUESTS,), "r.json", {"id": "r"})
    finally:
        os.umask(old)
    assert mode(home) == 0o700 and mode(home / manifest.INDEX) == 0o600
    assert mode(home / runcache.CACHE) == 0o700 and mode(home / runcache.CACHE / "x.py") == 0o600
    assert mode(home / ondemand.REQUESTS) == 0o700 and mode(home / ondemand.REQUESTS / "r.json") == 0o600
