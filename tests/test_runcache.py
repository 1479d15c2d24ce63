"""The run cache: entries written atomically and privately, read bounded, never blocking, hashed as stored."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest

from patchkit.hook import runcache


def test_an_entry_is_written_whole_private_and_hashed_as_stored(patchkit_home):
    path = os.path.join(runcache.cache_dir(), runcache.cache_name("a" * 64, "k"))
    text = "x = 'ü'\r\n_patchkit_runtime.step('r')  # patchkit:r\n"
    runcache.write(path, text)
    data = runcache.read(path)
    assert data == text.encode("utf-8") and runcache.text_sha256(text) == hashlib.sha256(data).hexdigest()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(runcache.cache_dir()).st_mode) == 0o700
    assert [n for n in os.listdir(runcache.cache_dir()) if n.startswith(".tmp-")] == []


def test_a_fifo_in_place_of_an_entry_is_refused_at_once(patchkit_home):
    os.makedirs(runcache.cache_dir())
    path = os.path.join(runcache.cache_dir(), "fifo.py")
    os.mkfifo(path)
    with pytest.raises(OSError, match="not a plain file"):
        runcache.read(path)  # no writer: a blocking open would hang the job's start here


def test_a_huge_entry_is_read_only_past_its_bound(patchkit_home, monkeypatch):
    monkeypatch.setattr(runcache, "MAX_BYTES", 10)
    path = os.path.join(runcache.cache_dir(), "big.py")
    runcache.write(path, "x" * 100)
    assert runcache.read(path) == b"x" * 11  # enough for its hash to differ from any recorded one
    with pytest.raises(FileNotFoundError):
        runcache.read(os.path.join(runcache.cache_dir(), "missing.py"))


def test_the_rebuilding_process_s_lines_end_at_newline_only(monkeypatch):
    """A note or error is one "\n"-ended line the rebuilding process wrote; U+2028 in a module's text or a path
    it names ends no line (before: `str.splitlines` made a forged note, and cut the error to its tail)."""
    import subprocess

    said = "patchkit-rebuild: cannot store /srv/a\u2028patchkit-rebuild: forged\npatchkit-rebuild: real\n"
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, b"text", said.encode()))
    assert runcache.rebuild({}, "m", b"", "/nowhere") == ("text", ["cannot store /srv/a\u2028patchkit-rebuild: forged",
                                                                   "real"])
    said = "ParserSyntaxError: line 'x = 1\u2028rm -rf /' does not parse\n"
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, b"", said.encode()))
    with pytest.raises(RuntimeError, match="failed: ParserSyntaxError: line 'x = 1\u2028rm -rf /' does not parse$"):
        runcache.rebuild({}, "m", b"", "/nowhere")
