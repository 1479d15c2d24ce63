"""journal: collect's record of what DEST holds, read back line by line, refusing a DEST it did not write."""

from __future__ import annotations

import contextlib
import json
import os

import pytest

from patchkit.traces import journal
from patchkit.traces.captures import CaptureError


@contextlib.contextmanager
def opened(path):
    """DEST opened as collect opens it (None when missing), closed after."""
    dest = journal.open_dest(str(path))
    try:
        yield dest
    finally:
        if dest:
            os.close(dest.fd)


def test_entries_are_read_back_by_file_and_a_cut_off_last_line_is_ignored(tmp_path):
    with opened(tmp_path) as dest:
        journal.start(dest)
        journal.append(dest, {"file": "a/x.json", "size": 3, "sha256": "ab"})
        journal.append(dest, {"file": "a/x.json", "size": 4, "sha256": "cd"})  # the later entry wins
        with open(tmp_path / journal.JOURNAL, "a") as handle:
            handle.write('{"file": "b/y.js')  # killed while writing
        assert journal.read(dest) == {"a/x.json": {"file": "a/x.json", "size": 4, "sha256": "cd"}}
        before = (tmp_path / journal.JOURNAL).read_bytes()
        journal.start(dest)  # a journal is never replaced
        assert (tmp_path / journal.JOURNAL).read_bytes() == before


def test_a_missing_or_empty_dest_has_no_entries(tmp_path):
    assert journal.open_dest(str(tmp_path / "new")) is None and not (tmp_path / "new").exists()
    with opened(tmp_path) as dest:
        assert journal.read(dest) == {}
    made = journal.open_dest(str(tmp_path / "new" / "er"), new=True)
    os.close(made.fd)
    assert (tmp_path / "new" / "er").is_dir()
    with pytest.raises(CaptureError, match="appeared after patchkit looked"):
        journal.open_dest(str(tmp_path / "new" / "er"), new=True)


@pytest.mark.parametrize("setup,line,fragment", [
    (lambda d: (d / "other.txt").write_text("x"), None, "already holds files that patchkit collect did not write"),
    (lambda d: (d / journal.JOURNAL).write_text('{"kind": "other"}\n'), 1, "not a patchkit collect journal"),
    (lambda d: (d / journal.JOURNAL).write_text(json.dumps({"kind": "patchkit-collect", "format": 99}) + "\n"), 1,
     "written by a newer patchkit"),
    (lambda d: (d / journal.JOURNAL).write_text('{"kind": "patchkit-collect", "format": 1}\nnope\n{}\n'), 2,
     "line 2 of the journal is not JSON"),
])
def test_a_dest_patchkit_cannot_vouch_for_is_refused_with_its_line(tmp_path, setup, line, fragment):
    setup(tmp_path)
    with opened(tmp_path) as dest, pytest.raises(CaptureError) as info:
        journal.read(dest)
    assert fragment in info.value.message and info.value.where.line == line and info.value.hint


def test_a_file_or_a_dangling_link_in_place_of_dest_is_refused(tmp_path):
    (tmp_path / "dest").write_text("x")
    with pytest.raises(CaptureError, match="Not a directory") as info:
        journal.open_dest(str(tmp_path / "dest"))
    assert "not a folder" in info.value.hint
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(CaptureError, match="is a symbolic link to a missing folder") as info:
        journal.open_dest(str(tmp_path / "dangling"))
    assert info.value.where.path == str(tmp_path / "dangling") and "create the folder the link" in info.value.hint
    with pytest.raises(CaptureError, match="it appeared after patchkit looked"):  # to be made new: anything there
        journal.open_dest(str(tmp_path / "dangling"), new=True)
    assert not (tmp_path / "nowhere").exists()


# ---------------------------------------------------------------- bounds, links, paths in DEST


def test_a_journal_line_over_the_bound_is_refused_read_or_written(tmp_path):
    with opened(tmp_path) as dest:
        journal.start(dest)
        with open(tmp_path / journal.JOURNAL, "ab") as handle:
            handle.write(b'{"file": "' + b"x" * journal.LINE_MAX + b'"}\n{}\n')
        with pytest.raises(CaptureError, match="line 2 of the journal is longer than") as info:
            journal.read(dest)
        assert info.value.where.line == 2
        size = (tmp_path / journal.JOURNAL).stat().st_size
        with pytest.raises(CaptureError, match="is longer than"):
            journal.append(dest, {"file": "a", "from": "y" * journal.LINE_MAX})
        assert (tmp_path / journal.JOURNAL).stat().st_size == size


def test_a_journal_that_is_a_link_is_neither_read_nor_written_through(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text('{"kind": "patchkit-collect", "format": 1}\n')
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / journal.JOURNAL).symlink_to(elsewhere)
    with opened(dest) as there:
        with pytest.raises(CaptureError, match="cannot read the journal: it is a symbolic link"):
            journal.read(there)
        with pytest.raises(CaptureError, match="cannot write the journal: it is a symbolic link"):
            journal.append(there, {"file": "a"})
        journal.start(there)  # one is there: left as it is
    os.unlink(dest / journal.JOURNAL)
    os.mkfifo(dest / journal.JOURNAL)  # nobody reads it: an open for writing that waited would wait for ever
    with opened(dest) as there:
        with pytest.raises(CaptureError, match="cannot read the journal: is not a regular file"):
            journal.read(there)
        with pytest.raises(CaptureError, match="cannot write the journal"):
            journal.append(there, {"file": "a"})
    assert elsewhere.read_text() == '{"kind": "patchkit-collect", "format": 1}\n'


@pytest.mark.parametrize("rel", ["../x", "a/../../x", "/etc/passwd", "a//b", "a/.hidden", "a/b\x1b", "a/"])
def test_only_paths_of_safe_names_are_written(tmp_path, rel):
    with opened(tmp_path) as dest, pytest.raises(CaptureError, match="is not a safe path inside DEST"):
        journal.folder(dest, rel, create=True)
    with pytest.raises(CaptureError, match="is not a safe path inside DEST"):
        journal.parts_of(rel)
    assert list(tmp_path.iterdir()) == []


def test_folders_and_files_in_dest_are_reached_without_following_a_link(tmp_path):
    dest, out = tmp_path / "dest", tmp_path / "out"
    dest.mkdir()
    out.mkdir()
    (dest / "g").symlink_to(out)
    (dest / "h").mkdir()
    (dest / "h" / "f").write_bytes(b"abc")
    (dest / "h" / "l").symlink_to(tmp_path / "out")
    with opened(dest) as there:
        for call in (lambda: journal.folder(there, "g/sub"), lambda: journal.what_is(there, "g/x"),
                     lambda: journal.write_new(there, "g", "m", b"{}")):
            with pytest.raises(CaptureError, match="it is a symbolic link, which patchkit collect never follows"):
                call()
        assert list(out.iterdir()) == []
        assert journal.what_is(there, "h/f")[:2] == ("file", 3)
        assert journal.what_is(there, "h/l") == ("other", -1, "")
        assert journal.what_is(there, "h") == ("folder", -1, "")
        assert journal.what_is(there, "h/none") == journal.what_is(there, "none/x") == ("missing", -1, "")
        assert journal.write_new(there, "h/m", "rec", b"{}") == str(dest / "h" / "m" / "rec.json")
        assert journal.write_new(there, "h/m", "rec", b"[]") is None  # never replaced
    assert (dest / "h" / "m" / "rec.json").read_bytes() == b"{}" and len(list((dest / "h" / "m").iterdir())) == 1
