"""journal: collect's record of what DEST holds, read back line by line, refusing a DEST it did not write."""

from __future__ import annotations

import json

import pytest

from patchkit import journal
from patchkit.captures import CaptureError


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
