"""The captures index ($PATCHKIT_HOME/captures, patchkit.core.manifest): one absolute save path a line, "\n" ending
each.  A path that another reader (``str.splitlines``, a terminal) would cut in two never goes in, and the reader
splits on "\n" only: U+2028 in a path a job named cannot make a line of ``/etc``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchkit.core import manifest
from patchkit.core.errors import LedgerError

# every character str.splitlines ends a line at, and a control character that ends none
SPLITTERS = ["\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\x1b", "\x7f", "\x9b"]


def test_the_splitters_are_every_line_break_str_splitlines_knows():
    breaks = {chr(c) for c in range(0x110000) if len(f"a{chr(c)}b".splitlines()) == 2}
    assert breaks == set(manifest.BREAKS) and breaks <= set(SPLITTERS)


@pytest.mark.parametrize("sep", SPLITTERS, ids=[f"U+{ord(c):04X}" for c in SPLITTERS])
def test_note_folder_refuses_a_path_that_would_make_two_lines(tmp_path, monkeypatch, sep):
    monkeypatch.setattr(manifest, "_noted", set())
    with pytest.raises(LedgerError) as exc:
        manifest.note_folder(f"{tmp_path}/traces/{sep}/etc")  # before: the index listed /etc
    assert "\\" in str(exc.value) and sep not in str(exc.value)  # the path shown escaped
    manifest.note_folder(str(tmp_path / "good"))
    assert manifest.indexed_folders() == [str(tmp_path / "good")]


@pytest.mark.parametrize("sep", SPLITTERS[1:], ids=[f"U+{ord(c):04X}" for c in SPLITTERS[1:]])
def test_the_index_is_read_a_line_per_newline_and_a_line_with_a_break_in_it_is_left_out(patchkit_home, sep):
    index = Path(patchkit_home) / manifest.INDEX
    fd = os.open(index, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, f"/srv/a\n/srv/b{sep}/etc\n/srv/c\n".encode("utf-8"))
    os.close(fd)
    assert manifest.indexed_folders() == ["/srv/a", "/srv/c"]  # before: /srv/b and /etc besides


def test_an_undecodable_byte_in_a_path_is_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(manifest, "_noted", set())
    odd = os.fsdecode(os.fsencode(str(tmp_path)) + b"/caf\xe9")
    manifest.note_folder(odd)
    assert manifest.indexed_folders() == [odd]  # a guard: only what ends a line is left out


def test_a_folder_already_in_the_index_is_not_written_again(patchkit_home, monkeypatch):
    """Each job process used to append its save path: the index held the same folder once per run."""
    index = Path(patchkit_home) / manifest.INDEX
    for _ in range(3):  # three processes
        monkeypatch.setattr(manifest, "_noted", set())
        manifest.note_folder("/srv/run/traces")
    assert index.read_bytes() == b"/srv/run/traces\n"  # before: three lines
    monkeypatch.setattr(manifest, "_noted", set())
    manifest.note_folder("/srv/run/traces/")
    assert index.read_bytes() == b"/srv/run/traces\n"


def test_the_index_is_read_with_each_folder_once_however_it_was_spelt(patchkit_home):
    index = Path(patchkit_home) / manifest.INDEX
    fd = os.open(index, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"/srv/a\n/srv/b\n/srv/a/\n/srv//a\n/srv/./a\n/srv/b\n")
    os.close(fd)
    assert manifest.indexed_folders() == ["/srv/a", "/srv/b"]


def test_the_index_stays_within_its_bound_keeping_the_newest_folders(patchkit_home, monkeypatch):
    monkeypatch.setattr(manifest, "INDEX_LIMIT", 100)
    index = Path(patchkit_home) / manifest.INDEX
    for n in range(40):
        monkeypatch.setattr(manifest, "_noted", set())
        manifest.note_folder(f"/srv/run{n:02d}")
        assert index.stat().st_size <= 100
    held = manifest.indexed_folders()
    assert held[-1] == "/srv/run39" and len(held) == len(set(held)) > 3
    assert held == [f"/srv/run{n:02d}" for n in range(40 - len(held), 40)]  # the newest, in order


def test_an_index_past_the_bound_is_written_again_from_its_last_lines(patchkit_home, monkeypatch):
    """Not patchkit's writing (an older patchkit, or by hand): the next note keeps its last whole lines."""
    index = Path(patchkit_home) / manifest.INDEX
    fd = os.open(index, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"".join(f"/srv/old{n:03d}\n".encode() for n in range(100)))
    os.close(fd)
    monkeypatch.setattr(manifest, "INDEX_LIMIT", 200)
    manifest.note_folder("/srv/new")
    data = index.read_bytes()
    assert len(data) <= 200 and data.endswith(b"/srv/old099\n/srv/new\n")
    assert all(line.startswith("/srv/") and len(line) in (8, 11) for line in data.decode().splitlines())
