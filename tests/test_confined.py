"""Reading what others wrote: no link followed, no path out of its folder, no file past its bound."""

from __future__ import annotations

import os

import pytest

from patchkit.core.confined import Refused, leads_out, read_bounded, within


def test_within_is_strictly_inside():
    assert within("/a/b/c", "/a/b") and not within("/a/b", "/a/b") and not within("/a/bc", "/a/b")
    assert not within("a/b", "/a") and not within("/etc/passwd", "/a")


def test_a_link_or_a_climb_leads_out(tmp_path):
    folder = tmp_path / "capture"
    folder.mkdir()
    secret = tmp_path / "secret"
    secret.write_text("secret")
    (folder / "ok.json").write_text("{}")
    (folder / "link.json").symlink_to(secret)
    (folder / "inner").symlink_to(tmp_path)
    assert leads_out(str(folder / "ok.json"), str(folder)) == ""
    assert leads_out(str(folder / "link.json"), str(folder)) == "is a symbolic link: never followed"
    assert "leads outside the capture's folder" in leads_out(str(folder / "inner" / "secret"), str(folder))
    assert "leads outside the capture's folder" in leads_out(os.path.normpath(str(folder / ".." / "secret")), str(folder))


def test_read_bounded_refuses_links_special_files_and_size(tmp_path):
    plain = tmp_path / "m.json"
    plain.write_bytes(b"x" * 10)
    assert read_bounded(str(plain), 10) == b"x" * 10
    with pytest.raises(Refused, match="more than"):
        read_bounded(str(plain), 9)
    with pytest.raises(Refused, match="more than 1 MiB"):
        plain.write_bytes(b"x" * ((1 << 20) + 1))
        read_bounded(str(plain), 1 << 20)
    link = tmp_path / "link.json"
    link.symlink_to(plain)
    with pytest.raises(OSError):
        read_bounded(str(link), 100)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(Refused, match="not a plain file"):  # and it does not hang waiting for a writer
        read_bounded(str(fifo), 100)
