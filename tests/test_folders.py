"""folders: a folder is walked from / one name at a time, each checked on its open handle; writes leave no half.

The hostile cases with a real second user are in test_hostile_state.py and
test_hostile_job.py; these are the rules one at a time, on root's own files
where root is needed to give a folder away (skipped with the reason otherwise).
"""

from __future__ import annotations

import os
import stat

import pytest

from patchkit.core import folders
from patchkit.core.confined import Refused
from patchkit.core.folders import OWNED, PRIVATE, Untrusted, open_folder

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder or link to another user needs root")


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_missing_folder_is_made_with_the_mode_asked_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        with open_folder(str(tmp_path / "a" / "b"), create=True) as made:
            assert made.path == str(tmp_path / "a" / "b")
    finally:
        os.umask(old)
    assert mode(tmp_path / "a") == 0o700 and mode(tmp_path / "a" / "b") == 0o700
    with pytest.raises(FileNotFoundError):
        open_folder(str(tmp_path / "missing"))


def test_the_folder_asked_for_is_checked_by_its_rule(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir(mode=0o700)
    folder.chmod(0o770)
    for rule in (PRIVATE, OWNED):
        with pytest.raises(Untrusted, match=r"is writable by group or others \(mode 0770\)") as info:
            open_folder(str(folder), rule)
        assert info.value.path == str(folder) and not info.value.above
    (tmp_path / "file").write_text("")
    with pytest.raises(Untrusted, match="is not a folder"):
        open_folder(str(tmp_path / "file"))


def test_a_folder_on_the_way_others_can_write_is_refused_unless_sticky(tmp_path):
    above = tmp_path / "above"
    (above / "f").mkdir(parents=True, mode=0o700)
    above.chmod(0o777)
    with pytest.raises(Untrusted, match=r"is writable by group or others and not sticky \(mode 0777\)") as info:
        open_folder(str(above / "f"))
    assert info.value.path == str(above) and info.value.above
    above.chmod(0o1777)  # as /tmp: nobody else may rename or remove what is yours in it
    open_folder(str(above / "f")).close()


@as_root
def test_owners_root_or_you_on_the_way_you_only_for_a_private_folder(tmp_path):
    above = tmp_path / "above"
    (above / "f").mkdir(parents=True, mode=0o700)
    os.chown(above, NOBODY, NOBODY)
    with pytest.raises(Untrusted, match=f"is owned by uid {NOBODY}, not by you"):
        open_folder(str(above / "f"))
    os.chown(above, 0, 0)
    os.chown(above / "f", NOBODY, NOBODY)
    for rule in (PRIVATE, OWNED):
        with pytest.raises(Untrusted, match=f"is owned by uid {NOBODY}"):
            open_folder(str(above / "f"), rule)


def test_a_link_on_the_way_is_followed_only_when_nobody_else_can_change_it(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    holder = tmp_path / "holder"
    holder.mkdir(mode=0o755)
    (holder / "link").symlink_to("../real")  # relative: walked from the folder holding it
    with open_folder(str(holder / "link")) as opened:
        opened.write("x", b"1")
    assert (real / "x").read_bytes() == b"1"
    holder.chmod(0o1777)  # sticky, but others could add a link of their own there, and this one is not theirs
    with pytest.raises(Untrusted, match="is a symbolic link and others can write the folder holding it"):
        open_folder(str(holder / "link"))
    holder.chmod(0o755)
    if os.geteuid() == 0:
        os.lchown(holder / "link", NOBODY, NOBODY)
        with pytest.raises(Untrusted, match=f"is a symbolic link owned by uid {NOBODY}"):
            open_folder(str(holder / "link"))


def test_a_loop_of_links_is_refused(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(Untrusted, match="more than 40 symbolic links"):  # each is yours: followed, 40 times
        open_folder(str(tmp_path / "a"))


def test_no_link_is_followed_inside_a_folder(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "home").mkdir(mode=0o700)
    (tmp_path / "home" / "sub").symlink_to(elsewhere)
    (tmp_path / "home" / "file").symlink_to(elsewhere / "file")
    with open_folder(str(tmp_path / "home")) as home:
        with pytest.raises(Untrusted, match="is a symbolic link"):
            home.sub("sub")
        with pytest.raises(Untrusted, match="is a symbolic link"):
            home.open("file", os.O_RDONLY)
        with pytest.raises(Refused, match="is a symbolic link"):
            home.write("file", b"new")  # neither written through nor replaced
    assert (tmp_path / "home" / "file").is_symlink() and list(elsewhere.iterdir()) == []
    assert sorted(os.listdir(tmp_path / "home")) == ["file", "sub"]  # no temporary file left


def test_write_is_whole_never_replaces_when_asked_and_leaves_nothing_on_failure(tmp_path, monkeypatch):
    with open_folder(str(tmp_path), OWNED) as folder:
        assert folder.write("m.json", b"1", replace=False) == "m.json"
        assert folder.write("m.json", b"2", replace=False) == "m-2.json"
        assert folder.write("m.json", b"3", mode=0o644) == "m.json"

        def full(fd):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "fsync", full)
        with pytest.raises(OSError, match="No space left"):
            folder.write("m.json", b"4")
    assert sorted(os.listdir(tmp_path)) == ["m-2.json", "m.json"]  # no temporary file left
    assert (tmp_path / "m.json").read_bytes() == b"3" and mode(tmp_path / "m.json") == 0o644


def test_the_rules_read_the_handle_not_the_name(tmp_path):
    st = os.stat(tmp_path)
    assert folders.folder_problem(st, PRIVATE) is None and folders.folder_problem(st, None) is None
    assert folders.owner_problem(st, root_too=False) is None
