"""A package tree another user owns never steers root: no write through their links, no read that never ends.

The neighbour is a second, unprivileged user made with ``useradd`` (root only; skipped with the reason
elsewhere).  The system copy is a root-owned file with the same bytes as the neighbour's, the thing a link
would make root write.
"""

from __future__ import annotations

import os
import pwd
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

import patchkit
from patchkit.cli.commands import main
from patchkit.core.errors import TargetError

from conftest import FIXTURES, snapshot

DP = "verl/workers/actor/dp_actor.py"
NEIGHBOUR = "pkneighbour"


@pytest.fixture(scope="session")
def neighbour():
    """The uid and gid of a second user, made once."""
    if os.geteuid() != 0:
        pytest.skip("a second user can only be made as root")
    if shutil.which("useradd") is None:
        pytest.skip("useradd is not installed")
    try:
        pwd.getpwnam(NEIGHBOUR)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", NEIGHBOUR], check=True)
    entry = pwd.getpwnam(NEIGHBOUR)
    return entry.pw_uid, entry.pw_gid


def as_neighbour(ids, action) -> None:
    """Run ``action()`` in a child process that is the neighbour, and wait for it."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.setgid(ids[1])
            os.setuid(ids[0])
            action()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.fixture
def trees(neighbour):
    """(the neighbour's verl tree, a root-owned system copy of it with the same bytes), in a folder the neighbour
    can reach (pytest's own temporary folders are root's alone)."""
    top = Path(tempfile.mkdtemp(prefix="patchkit-neighbour-"))
    os.chmod(top, 0o755)
    mine = top / "neighbour" / "site"
    shutil.copytree(FIXTURES / "verl-0.6", mine)
    system = top / "system" / "site"
    shutil.copytree(FIXTURES / "verl-0.6", system)
    for folder, _, files in os.walk(mine.parent):
        os.chown(folder, *neighbour)
        for name in files:
            os.chown(os.path.join(folder, name), *neighbour)
    yield mine, system
    shutil.rmtree(top, ignore_errors=True)


def run(*args, code=0):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result


@pytest.mark.parametrize("linked", [DP, "verl/workers/actor"])
def test_a_file_or_folder_linked_to_a_root_owned_copy_is_refused(trees, neighbour, linked):
    mine, system = trees
    before = snapshot(system)

    def plant():
        target = mine / linked
        shutil.rmtree(target) if target.is_dir() else target.unlink()
        target.symlink_to(system / linked)

    as_neighbour(neighbour, plant)
    result = run("apply", "verl-fsdp-update", "--root", mine, code=1)
    assert "is reached through a symbolic link to" in result.stderr and f"outside {mine.resolve()}" in result.stderr
    assert f"--root {system.resolve()}" in result.stderr  # the way to patch that copy, if it is the one meant
    assert snapshot(system) == before and patchkit.status() == []


@pytest.mark.parametrize("swapped", [DP, "verl/workers/actor"])
def test_a_file_or_folder_swapped_for_a_link_while_apply_plans_is_never_written_through(trees, neighbour, swapped):
    """The swap lands after the plan, before the write (the review hook runs there): the write refuses."""
    mine, system = trees
    before, planned = snapshot(system), snapshot(mine)

    def swap(plan) -> bool:
        def link():
            target = mine / swapped
            target.rename(target.with_name(target.name + ".orig"))
            target.symlink_to(system / swapped)

        as_neighbour(neighbour, link)
        return True

    with pytest.raises(TargetError) as info:
        patchkit.apply_recipe("verl-fsdp-update", root=str(mine), review=swap)
    assert "is now a symbolic link" in info.value.message
    assert snapshot(system) == before and patchkit.status() == []
    moved = mine / (swapped + ".orig")
    assert (moved if moved.is_file() else moved / "dp_actor.py").read_bytes() == planned[DP]


def _sparse(path: Path, size: int) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(size)


def _limited(args, env=None, address_space=None, file_size=None):
    def limits():
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        if file_size:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))

    return subprocess.run([sys.executable, "-m", "patchkit", *map(str, args)], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), preexec_fn=limits, timeout=120)


def test_a_sparse_target_of_3_gb_under_a_2_gb_address_space_is_refused_as_it_is_read(tree):
    root = tree("verl-0.6")
    applied = run("apply", "verl-fsdp-update", "--root", root)
    assert "patched" in applied.stderr
    _sparse(root / DP, 3 << 30)
    two_gb = 2 << 30
    diff = _limited(["diff", "verl-fsdp-update", "--root", root], address_space=two_gb)
    assert diff.returncode == 1 and "is larger than any source file patchkit patches (64 MiB)" in diff.stderr
    assert "Traceback" not in diff.stderr and "MemoryError" not in diff.stderr
    status = _limited(["status", "--json"], address_space=two_gb)
    assert status.returncode == 0, status.stderr
    assert '"state": "not read (a link on the way, not a plain file, or too large)"' in status.stdout


def test_a_file_size_limit_on_apply_is_an_error_and_leaves_no_partial_file(tree, patchkit_home):
    root = tree("verl-0.6")
    before = snapshot(root)
    size = len(before[DP]) + 64  # the backup and the ledger fit; the patched file does not
    done = _limited(["apply", "verl-fsdp-update", "--root", root], env={"PATCHKIT_HOME": str(patchkit_home)},
                    file_size=size)
    assert done.returncode == 1 and "File too large" in done.stderr and "Traceback" not in done.stderr
    assert snapshot(root) == before  # no .patchkit-tmp left beside the file, the file as it was


def test_a_file_put_in_place_of_patchkit_s_new_file_never_takes_the_target_s_name(tree, monkeypatch):
    """Between the write of the new text and its rename, another file takes the temporary name: nothing is
    renamed over the target, and that file is left where it was."""
    from patchkit.state import targetfile

    root = tree("verl-0.6")
    path = (root / DP).resolve()
    before = path.read_bytes()
    real_stat = os.stat

    def planted(name, *args, dir_fd=None, follow_symlinks=True):
        if isinstance(name, str) and name.endswith(".patchkit-tmp") and dir_fd is not None:
            os.rename(name, name + ".mine", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            with open(os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=dir_fd), "w") as handle:
                handle.write("planted")
        return real_stat(name, *args, dir_fd=dir_fd, follow_symlinks=follow_symlinks)

    monkeypatch.setattr(targetfile.os, "stat", planted)
    with pytest.raises(targetfile.Changed, match="was replaced before it could take the file's name"):
        targetfile.write_source(path, b"x = 1  # patchkit\n", expected=before)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.read_text() for p in path.parent.glob("*.patchkit-tmp")] == ["planted"]
