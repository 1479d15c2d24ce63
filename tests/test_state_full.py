"""A state folder that cannot take a write (full, over a file size limit, not writable): a located error, exit 1.

No traceback, no temporary file left behind, the target files as they were,
and a ledger that says what is on disk: apply never writes a file whose
backup could not be saved, and a revert that cannot be recorded is not made.
ENOSPC is made for real on a tiny tmpfs where mounting is permitted (root),
and, everywhere, by making the file system calls themselves fail in-process.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchkit.cli.commands import main

from conftest import snapshot

RECIPE = "verl-fsdp-update"
DP = "verl/workers/actor/dp_actor.py"


def cli(*args):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def full_fs():
    """``full_fs()``: the path of a new tmpfs of 256 KiB (mode 0700), unmounted afterwards; skipped where mounting
    is not permitted (it needs root and mount(8)): the in-process cases below still run there."""
    mounted = []

    def mount() -> Path:
        if os.geteuid() != 0 or shutil.which("mount") is None:
            pytest.skip("mounting a tmpfs needs root and mount(8): a full disk cannot be made for real here")
        path = tempfile.mkdtemp(prefix="patchkit-full-", dir="/tmp")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", path],
                              capture_output=True, text=True)
        if done.returncode != 0:
            os.rmdir(path)
            pytest.skip(f"mounting a tmpfs is not permitted here ({done.stderr.strip()}): a full disk cannot be made "
                        "for real")
        mounted.append(path)
        return Path(path)

    yield mount
    for path in mounted:
        subprocess.run(["umount", path], capture_output=True)
        shutil.rmtree(path, ignore_errors=True)


def fill(folder: str) -> None:
    """Fill the file system holding ``folder`` to the last byte."""
    fd = os.open(os.path.join(folder, "filler"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 16, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


def state_files(home):
    return {p.relative_to(home).as_posix(): p.read_bytes() for p in sorted(home.rglob("*"))
            if p.is_file() and p.name not in ("filler", "lock")}


def located(result, home, what):
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output, result.output
    assert f"error: {home}" in result.stderr and what in result.stderr, result.stderr
    assert "hint: free space" in result.stderr, result.stderr


def test_apply_on_a_full_state_folder_writes_no_target_and_leaves_no_half_file(full_fs, tree, monkeypatch):
    home = full_fs()
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    root = tree("verl-0.6")
    before = snapshot(root)
    fill(str(home))
    result = cli("apply", RECIPE, "--root", str(root))
    located(result, home, "No space left on device")
    assert snapshot(root) == before
    assert state_files(home) == {}  # no ledger, no backup, no temporary file


def test_revert_on_a_full_state_folder_changes_nothing_and_works_once_there_is_room(full_fs, tree, monkeypatch):
    home = full_fs()
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    root = tree("verl-0.6")
    original = snapshot(root)
    assert cli("apply", RECIPE, "--root", str(root)).exit_code == 0
    patched, state = snapshot(root), state_files(home)
    fill(str(home))
    result = cli("revert", "--all")
    located(result, home, "No space left on device")
    assert snapshot(root) == patched and state_files(home) == state  # the ledger still says: patched
    (home / "filler").unlink()
    status = cli("status", "--json")
    assert status.exit_code == 0 and '"interrupted"' not in status.stdout
    assert cli("revert", "--all").exit_code == 0 and snapshot(root) == original


def _where(fd) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


@pytest.fixture
def failing_writes(monkeypatch, patchkit_home):
    """``failing_writes(errno)``: a file patchkit makes in the state folder fails as a full disk, a file size
    limit or a refused folder makes it fail: EACCES when it is created, ENOSPC and EFBIG when it is flushed to
    disk.  In-process, whatever way the file is written (a path or a folder's descriptor)."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd to tell which file a descriptor is")
    real_open, real_fsync = os.open, os.fsync
    home = str(patchkit_home)

    def inside(path: str) -> bool:
        return path == home or path.startswith(home + os.sep)

    def start(code):
        def opening(path, flags, mode=0o777, *, dir_fd=None):
            full = os.path.join(_where(dir_fd), path) if dir_fd is not None else os.path.abspath(path)
            if code == errno.EACCES and flags & os.O_EXCL and inside(full):
                raise OSError(code, os.strerror(code), full)
            return real_open(path, flags, mode, dir_fd=dir_fd)

        def syncing(fd):
            if code != errno.EACCES and inside(_where(fd)) and os.path.isfile(_where(fd)):
                raise OSError(code, os.strerror(code))
            return real_fsync(fd)

        monkeypatch.setattr(os, "open", opening)
        monkeypatch.setattr(os, "fsync", syncing)

    return start


@pytest.mark.parametrize("code, hint", [(errno.ENOSPC, "free space"), (errno.EFBIG, "free space"),
                                        (errno.EACCES, "writable")])
def test_a_state_write_that_fails_is_a_located_error_and_apply_writes_nothing(tree, patchkit_home, failing_writes,
                                                                              code, hint):
    root = tree("verl-0.6")
    before = snapshot(root)
    failing_writes(code)
    result = cli("apply", RECIPE, "--root", str(root))
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"error: {patchkit_home}" in result.stderr and os.strerror(code) in result.stderr
    assert f"hint: {hint}" in result.stderr or hint in result.stderr.split("hint:")[1]
    assert snapshot(root) == before and state_files(patchkit_home) == {}


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_ledger_that_cannot_record_the_change_puts_the_files_back(tree, patchkit_home, monkeypatch, command):
    """The files are written and the ledger that says so cannot be saved: they are put back, and the ledger
    on disk agrees with them."""
    root = tree("verl-0.6")
    if command == "revert":
        assert cli("apply", RECIPE, "--root", str(root)).exit_code == 0
    before = snapshot(root)
    saves = []

    def renaming(real):
        def rename(src, dst, *args, **kwargs):
            if os.path.basename(os.fspath(dst)) == "ledger.json":
                saves.append(dst)
                if len(saves) == 2:  # the save that says the files are written
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(src, dst, *args, **kwargs)
        return rename

    with monkeypatch.context() as patched:  # whichever of the two renames the ledger's writer calls
        patched.setattr(os, "replace", renaming(os.replace))
        patched.setattr(os, "rename", renaming(os.rename))
        args = ["apply", RECIPE, "--root", str(root)] if command == "apply" else ["revert", "--all"]
        result = cli(*args)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "No space left on device" in result.stderr and "put back" in result.stderr
    assert snapshot(root) == before
    status = cli("status", "--json")
    assert status.exit_code == 0 and '"interrupted"' not in status.stdout, status.stdout
    assert ('"applied"' in status.stdout) == (command == "revert")
