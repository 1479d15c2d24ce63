"""Reading what others wrote: no link followed, no path out of its folder, no file past its bound."""

from __future__ import annotations

import os

import pytest

from patchkit.core.confined import RATIO, SLACK, Refused, leads_out, open_bounded, open_regular, read_bounded, within


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
    with pytest.raises(Refused, match="is a symbolic link: never followed"):
        read_bounded(str(link), 100)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(Refused, match=r"is not a regular file \(a FIFO\)"):  # and it does not wait for a writer
        read_bounded(str(fifo), 100)


@pytest.mark.parametrize("kind,why", [("fifo", "is not a regular file (a FIFO)"),
                                      ("dev-zero", "is not a regular file (a device)"),
                                      ("link-to-dev-zero", "is a symbolic link: never followed"),
                                      ("link-to-file", "is a symbolic link: never followed"),
                                      ("folder", "is not a regular file (a folder)")])
def test_open_regular_refuses_all_but_a_regular_file_without_blocking(tmp_path, kind, why):
    path = tmp_path / "planted"
    (tmp_path / "file").write_bytes(b"{}")
    {"fifo": lambda: os.mkfifo(path), "dev-zero": lambda: None, "folder": path.mkdir,
     "link-to-dev-zero": lambda: path.symlink_to("/dev/zero"),
     "link-to-file": lambda: path.symlink_to(tmp_path / "file")}[kind]()
    with pytest.raises(Refused) as refused:
        open_regular("/dev/zero" if kind == "dev-zero" else str(path))
    assert str(refused.value).startswith(why) and str(refused.value).endswith("never read" if "(" in why else why)
    folder = os.open(tmp_path, os.O_RDONLY)
    try:
        if kind != "dev-zero":
            with pytest.raises(Refused):
                open_regular("planted", dir_fd=folder)
        os.close(open_regular("file", dir_fd=folder))
    finally:
        os.close(folder)


def test_open_bounded_counts_the_bytes_read_not_the_size_stat_gave(tmp_path):
    path = tmp_path / "growing"
    path.write_bytes(b"x" * 10)
    with open_bounded(str(path), 100) as handle:
        with open(path, "ab") as more:  # it grows after the open: the bound is on what is read
            more.write(b"y" * 200)
        with pytest.raises(Refused, match="holds more than 100 bytes"):
            handle.read()
    with open_bounded(str(path), 210) as handle:
        assert handle.read() == b"x" * 10 + b"y" * 200 and handle.raw.consumed == 210


def test_decompressed_bytes_count_against_the_bound_and_a_gzip_bomb_is_refused_by_its_ratio(tmp_path):
    import gzip

    small = tmp_path / "small.gz"
    small.write_bytes(gzip.compress(b"z" * 5000))
    with open_bounded(str(small), 5000, gz=True) as handle:
        assert handle.read() == b"z" * 5000 and handle.raw.consumed == small.stat().st_size
    with open_bounded(str(small), 4999, gz=True) as handle, pytest.raises(Refused, match="once decompressed"):
        handle.read()
    bomb = tmp_path / "bomb.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as packer:
        for _ in range(4 * SLACK >> 20):
            packer.write(b" " * (1 << 20))
    assert bomb.stat().st_size * RATIO * 4 < 4 * SLACK
    with open_bounded(str(bomb), 1 << 40, gz=True) as handle:
        with pytest.raises(Refused, match=f"decompresses to more than {RATIO} times its size"):
            while handle.read(1 << 20):
                pass
        assert handle.raw.count < 2 * SLACK  # refused soon after the slack, long before its end
