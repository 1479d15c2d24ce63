"""reach: a folder reached, and a file written there, without following a link another user made."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from patchkit.core import reach
from patchkit.core.confined import Refused


def opened_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


def test_a_folder_is_reached_through_links_you_own_and_made_where_missing(tmp_path, monkeypatch):
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "mine").symlink_to(tmp_path / "real")  # yours (root's here): followed
    (tmp_path / "real" / "rel").symlink_to("sub")  # a relative target, from the link's own folder
    assert opened_path(reach.folder(str(tmp_path / "mine" / "sub"))) == str(tmp_path / "real" / "sub")
    assert opened_path(reach.folder(str(tmp_path / "mine" / "rel"))) == str(tmp_path / "real" / "sub")
    monkeypatch.chdir(tmp_path)
    assert opened_path(reach.folder("mine/./sub/..")) == str(tmp_path / "real")
    assert opened_path(reach.folder(str(tmp_path / "a" / "b"), create=True)) == str(tmp_path / "a" / "b")
    assert opened_path(reach.folder(str(tmp_path / "c"), create=True, new=True)) == str(tmp_path / "c")
    with pytest.raises(FileExistsError, match="is already there"):
        reach.folder(str(tmp_path / "c"), create=True, new=True)


@pytest.mark.parametrize("setup,error,says", [
    (lambda t: None, FileNotFoundError, "does not exist"),
    (lambda t: (t / "x").write_text("a file"), NotADirectoryError, "Not a directory"),
    (lambda t: (t / "x").symlink_to(t / "nowhere"), reach.Dangling, "is a symbolic link to a missing folder"),
    (lambda t: (t / "x").symlink_to("x"), OSError, "Too many levels of symbolic links"),
])
def test_what_is_not_a_folder_is_an_oserror_naming_where(tmp_path, setup, error, says):
    setup(tmp_path)
    with pytest.raises(error, match=says) as info:
        reach.folder(str(tmp_path / "x" / "y"))
    assert info.value.filename.startswith(str(tmp_path / "x")) and not (tmp_path / "nowhere").exists()
    what, hint = reach.explain(info.value, str(tmp_path / "x" / "y"))
    assert what.startswith(str(tmp_path / "x")) and says in what and hint


def test_another_user_s_link_on_the_way_is_refused(tmp_path, stranger):
    stranger.run("ln", "-s", str(tmp_path), str(stranger.sticky / "up"))
    with pytest.raises(Refused) as info:
        reach.folder(str(stranger.sticky / "up"))
    assert info.value.filename == str(stranger.sticky / "up")
    assert str(info.value) == f"is a symbolic link owned by uid {stranger.uid}, not by you (uid 0) or root: never followed"
    assert "name the folder it points to" in reach.explain(info.value, "x")[1]
    stranger.run("mkdir", str(stranger.sticky / "theirs"))  # their folder, no link: reached (it is where it says)
    assert opened_path(reach.folder(str(stranger.sticky / "theirs"))) == str(stranger.sticky / "theirs")


def test_write_file_writes_whole_and_replaces_only_a_regular_file(tmp_path):
    path = tmp_path / "out.patch"
    reach.write_file(str(path), b"one")
    reach.write_file(str(path), b"two")
    assert path.read_bytes() == b"two" and os.listdir(tmp_path) == ["out.patch"]
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (tmp_path / "link").symlink_to(victim)
    os.mkfifo(tmp_path / "fifo")
    for name, says in (("link", "is a symbolic link .owned by uid"), ("fifo", "is not a regular file")):
        with pytest.raises(Refused, match=says):
            reach.write_file(str(tmp_path / name), b"x")
    with pytest.raises(IsADirectoryError):
        reach.write_file(str(tmp_path) + "/", b"x")
    assert victim.read_bytes() == b"keep" and sorted(os.listdir(tmp_path)) == ["fifo", "link", "out.patch", "victim"]


def test_a_temporary_file_swapped_before_the_rename_is_refused_and_removed(tmp_path, monkeypatch):
    path = tmp_path / "out.patch"
    path.write_bytes(b"before")
    real = os.fsync

    def swap(fd):
        real(fd)
        [tmp] = [n for n in os.listdir(tmp_path) if n.endswith(".patchkit-tmp")]
        os.rename(tmp_path / tmp, tmp_path / "moved")
        (tmp_path / tmp).write_bytes(b"someone else's")

    monkeypatch.setattr(os, "fsync", swap)
    with pytest.raises(Refused, match="another file took its temporary name"):
        reach.write_file(str(path), b"mine")
    assert path.read_bytes() == b"before" and sorted(os.listdir(tmp_path)) == ["moved", "out.patch"]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG])
def test_a_full_disk_or_the_file_size_limit_leaves_nothing_changed(tmp_path, code):
    """EFBIG for real: ``ulimit -f`` set in a process of its own; ENOSPC from the sync that fails."""
    path = tmp_path / "out.patch"
    path.write_bytes(b"before")
    limit = "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))" if code == errno.EFBIG else \
        "os.fsync = lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))"
    script = (f"import errno, os, resource, sys; {limit}\n"
              "from patchkit.core import reach\n"
              "try:\n    reach.write_file(sys.argv[1], b'x' * 100_000)\n"
              "except OSError as exc:\n    print(exc.errno, *reach.explain(exc, sys.argv[1]), sep='|')\n")
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(__file__))))
    number, what, hint = done.stdout.strip().split("|")
    assert int(number) == code and what.startswith(f"{path}: ") and hint == reach.HINTS[code], done.stderr
    assert path.read_bytes() == b"before" and os.listdir(tmp_path) == ["out.patch"]
