"""attach.sweep: a request folder taken back and removed in bounded walks, relative to descriptors, never recursing;
past the bounds, what is left is said in one line and only this user reaches it.
tests/test_hostile_attach_channel.py does it while a real second user fills the channel."""

from __future__ import annotations

import os
import stat

import pytest

from attach_helpers import fake_process as proc
from patchkit.attach import payload, sweep


@pytest.fixture
def folder():
    f = payload.folder(proc(os.geteuid()), {"recipe": "r"}, "")
    yield f
    sweep.remove(f.base)


def nest(top: str, depth: int) -> None:
    """``depth`` folders, one in the other, each with a file and a link (deeper than a path may name)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
            os.symlink("/etc", "l", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)


def test_a_nest_deeper_than_any_path_goes_and_nothing_a_link_names_is_touched(folder, tmp_path):
    nest(folder.out, 5000)  # before: shutil.rmtree recursed into it and gave up (RecursionError / ENAMETOOLONG)
    os.mkfifo(os.path.join(folder.out, "fifo"))
    assert sweep.remove(folder.base) == "" and not os.path.lexists(folder.base)
    assert os.path.isdir("/etc")


def test_past_the_bounds_what_is_left_is_said_once_and_only_this_user_reaches_it(folder, monkeypatch):
    nest(folder.out, 30)
    monkeypatch.setattr(sweep, "DEPTH", 10)
    line = sweep.remove(folder.base)
    assert line.startswith(f"{folder.base}: left behind (more than 10 folders deep); only ") and "\n" not in line
    assert f"`rm -rf {folder.base}`" in line and stat.S_IMODE(os.stat(folder.base).st_mode) == 0o700
    monkeypatch.setattr(sweep, "DEPTH", 10000)
    assert sweep.remove(folder.base) == "" and not os.path.lexists(folder.base)


def test_past_the_entries_bound_the_walk_stops(folder, monkeypatch):
    for i in range(50):
        open(os.path.join(folder.out, f"f{i}"), "w").close()
    monkeypatch.setattr(sweep, "ENTRIES", 20)
    assert "left behind (more than 20 entries)" in sweep.remove(folder.base)
    monkeypatch.setattr(sweep, "ENTRIES", 1_000_000)
    assert sweep.remove(folder.base) == ""


def test_withdraw_takes_the_request_and_leaves_the_channel(folder):
    open(os.path.join(folder.out, "status.json"), "w").close()
    sweep.withdraw(folder.base)
    assert os.listdir(folder.base) == ["out"] and os.listdir(folder.out) == ["status.json"]


def test_a_folder_gone_already_is_nothing_to_say(folder):
    assert sweep.remove(folder.base) == "" and sweep.remove(folder.base) == ""
    sweep.withdraw(folder.base)  # never raises


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a folder to another user")
def test_a_folder_that_is_not_this_user_s_is_left_as_it_is(folder):
    os.chown(folder.base, 65534, 65534)
    assert sweep.remove(folder.base) == f"{folder.base}: not removed: it is not this user's folder"
    assert os.path.isdir(folder.out)
    os.chown(folder.base, 0, 0)
