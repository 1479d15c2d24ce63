"""inside: a capture's files read where they are, never through a link, a FIFO or a path out of its folder."""

from __future__ import annotations

import os

import pytest

from patchkit.traces import inside
from patchkit.traces.captures import CaptureError
from patchkit.traces.collect import Source

SECRET = b'{"secret": "only root may read this 7f3a9c"}'
TRACE = b'{"traceEvents": [], "distributedInfo": {"rank": 0}}'


def test_open_inside_refuses_links_special_files_and_paths_that_lead_out(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "secret").write_bytes(SECRET)
    (root / "sub" / "ok").write_bytes(TRACE)
    (root / "link").symlink_to(tmp_path / "secret")
    (root / "up").symlink_to(tmp_path)  # an intermediate folder that is a link out
    os.mkfifo(root / "fifo")
    with inside.open_inside(str(root / "sub" / "ok"), str(root)) as handle:
        assert handle.read() == TRACE
    for path, within, why in [(root / "link", root, "is a symbolic link: never followed"),
                              (root / "up" / "secret", root, "leads outside"),
                              (root / "fifo", root, "is not a regular file"),
                              (root / "sub" / "ok", tmp_path / "elsewhere", "leads outside")]:
        with pytest.raises(CaptureError, match=why) as info:
            inside.open_inside(str(path), str(within))
        assert info.value.hint and info.value.where.path == str(path)
    with pytest.raises(CaptureError, match="is a symbolic link"):
        list(Source().chunks(str(root / "link"), len(SECRET), 4, str(root)))


def test_a_listing_marks_links_and_special_files_and_never_follows_them(tmp_path):
    folder = tmp_path / "x_ascend_pt"
    (folder / "FRAMEWORK").mkdir(parents=True)
    (folder / "FRAMEWORK" / "data").write_bytes(b"12345")
    (folder / "FRAMEWORK" / "up").symlink_to(tmp_path)
    os.mkfifo(folder / "fifo")
    assert inside.walk_local(None, str(folder)) == [("FRAMEWORK/", -1), ("fifo", inside.LINK), ("FRAMEWORK/data", 5),
                                                    ("FRAMEWORK/up", inside.LINK)]


def test_shown_escapes_and_shortens_text_from_others():
    assert inside.shown("a\x1b[31mb\n") == "a\\x1b[31mb\\x0a" and len(inside.shown("x" * 5000, 100)) == 103
