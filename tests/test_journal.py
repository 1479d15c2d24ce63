"""journal: collect's record of what DEST holds, read back line by line, refusing a DEST it did not write."""

from __future__ import annotations

import json

import pytest

from patchkit.traces import journal
from patchkit.traces.captures import CaptureError


def test_entries_are_read_back_by_file_and_a_cut_off_last_line_is_ignored(tmp_path):
    journal.start(str(tmp_path))
    journal.append(str(tmp_path), {"file": "a/x.json", "size": 3, "sha256": "ab"})
    journal.append(str(tmp_path), {"file": "a/x.json", "size": 4, "sha256": "cd"})  # the later entry wins
    with open(tmp_path / journal.JOURNAL, "a") as handle:
        handle.write('{"file": "b/y.js')  # killed while writing
    assert journal.read(str(tmp_path)) == {"a/x.json": {"file": "a/x.json", "size": 4, "sha256": "cd"}}
    with pytest.raises(FileExistsError):
        journal.start(str(tmp_path))  # a journal is never replaced


def test_a_missing_or_empty_dest_has_no_entries(tmp_path):
    assert journal.read(str(tmp_path / "new")) == {}
    assert journal.read(str(tmp_path)) == {}


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
    with pytest.raises(CaptureError) as info:
        journal.read(str(tmp_path))
    assert fragment in info.value.message and info.value.where.line == line and info.value.hint


def test_a_file_in_place_of_dest_is_refused(tmp_path):
    (tmp_path / "dest").write_text("x")
    with pytest.raises(CaptureError, match="is not a folder"):
        journal.read(str(tmp_path / "dest"))


# ---------------------------------------------------------------- bounds, links, paths in DEST


def test_a_journal_line_over_the_bound_is_refused_read_or_written(tmp_path):
    journal.start(str(tmp_path))
    with open(tmp_path / journal.JOURNAL, "ab") as handle:
        handle.write(b'{"file": "' + b"x" * journal.LINE_MAX + b'"}\n{}\n')
    with pytest.raises(CaptureError, match="line 2 of the journal is longer than") as info:
        journal.read(str(tmp_path))
    assert info.value.where.line == 2
    size = (tmp_path / journal.JOURNAL).stat().st_size
    with pytest.raises(CaptureError, match="is longer than"):
        journal.append(str(tmp_path), {"file": "a", "from": "y" * journal.LINE_MAX})
    assert (tmp_path / journal.JOURNAL).stat().st_size == size


def test_a_journal_that_is_a_link_is_neither_read_nor_written_through(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text('{"kind": "patchkit-collect", "format": 1}\n')
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / journal.JOURNAL).symlink_to(elsewhere)
    with pytest.raises(CaptureError, match="cannot read the journal: it is a symbolic link"):
        journal.read(str(dest))
    with pytest.raises(CaptureError, match="cannot write the journal: it is a symbolic link"):
        journal.append(str(dest), {"file": "a"})
    with pytest.raises(FileExistsError):
        journal.start(str(dest))
    assert elsewhere.read_text() == '{"kind": "patchkit-collect", "format": 1}\n'


@pytest.mark.parametrize("rel", ["../x", "a/../../x", "/etc/passwd", "a//b", "a/.hidden", "a/b\x1b", "a/"])
def test_only_paths_of_safe_names_are_written(tmp_path, rel):
    with pytest.raises(CaptureError, match="is not a safe path inside DEST"):
        journal.folder(str(tmp_path), rel, create=True)
    with pytest.raises(CaptureError, match="is not a safe path inside DEST"):
        journal.parts_of(rel)
    assert list(tmp_path.iterdir()) == []


def test_folders_and_files_in_dest_are_reached_without_following_a_link(tmp_path):
    dest, out = tmp_path / "dest", tmp_path / "out"
    dest.mkdir()
    out.mkdir()
    (dest / "g").symlink_to(out)
    for call in (lambda: journal.folder(str(dest), "g/sub"), lambda: journal.what_is(str(dest), "g/x"),
                 lambda: journal.write_new(str(dest), "g", "m", b"{}")):
        with pytest.raises(CaptureError, match="it is a symbolic link, which patchkit collect never follows"):
            call()
    assert list(out.iterdir()) == []

    (dest / "h").mkdir()
    (dest / "h" / "f").write_bytes(b"abc")
    (dest / "h" / "l").symlink_to(tmp_path / "out")
    assert journal.what_is(str(dest), "h/f")[:2] == ("file", 3)
    assert journal.what_is(str(dest), "h/l") == ("other", -1, "")
    assert journal.what_is(str(dest), "h") == ("folder", -1, "")
    assert journal.what_is(str(dest), "h/none") == journal.what_is(str(dest), "none/x") == ("missing", -1, "")
    assert journal.write_new(str(dest), "h/m", "rec", b"{}") == str(dest / "h" / "m" / "rec.json")
    assert journal.write_new(str(dest), "h/m", "rec", b"[]") is None  # never replaced
    assert (dest / "h" / "m" / "rec.json").read_bytes() == b"{}" and len(list((dest / "h" / "m").iterdir())) == 1
