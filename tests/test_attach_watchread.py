"""attach.watchread: a job's watch.json read as a stranger's file: typed, bounded, every index checked, nothing
followed; a hostile or broken one is Unreadable (with why) or loses only its bad rows."""

from __future__ import annotations

import json
import os

import pytest

from patchkit.attach import watchread
from patchkit.attach.watchread import Unreadable


def good():
    return {"format": 1, "pid": 42, "interval": 0.005, "first": 0.001, "last": 3.0, "samples": 600,
            "stopped": "repeated", "cost": 0.004, "cutoff": "/site/torch/", "threads": ["MainThread"],
            "codes": [["/job/train.py", 10, "train"], ["/job/train.py", 3, "step"]],
            "calls": [[0, 0, -1, 0, 0.001, 3.0], [1, 0, 0, 12, 0.2, 0.3], [1, 0, 0, 12, 0.4, 0.5]],
            "wraps": [[0, 0.3, 0.31, 14, 11]], "lines": [[0, 12, 500]], "leaves": [[1, 4, 300]],
            "markers": [["optimizer", 1, 0.29]], "npu": False}


def channel_with(tmp_path, data) -> str:
    base = tmp_path / "req"
    out = base / "out"
    out.mkdir(parents=True)
    os.chmod(base, 0o700)
    (out / watchread.NAME).write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    return str(base)


def test_a_watch_is_read_typed(tmp_path):
    w = watchread.read(channel_with(tmp_path, good()))
    assert w.pid == 42 and w.codes[1] == ("/job/train.py", 3, "step") and len(w.calls) == 3
    assert w.calls[1] == (1, 0, 0, 12, 0.2, 0.3) and w.wraps == [(0, 0.3, 0.31, 14, 11)]
    assert w.markers == [("optimizer", 1, 0.29)] and w.threads == ["MainThread"] and not w.npu


def test_no_watch_yet_is_none(tmp_path):
    base = tmp_path / "req"
    (base / "out").mkdir(parents=True)
    os.chmod(base, 0o700)
    assert watchread.read(str(base)) is None


@pytest.mark.parametrize("broken,why", [
    (b"\xff\xfe{}", "not UTF-8"), (b"[" * 10 + b"]" * 10, "nests more than"), (b"{", "not JSON"),
    (b'{"format": 1, "first": NaN}', "not JSON"), (b"[]", "not a watch"), (b'{"format": 2}', "not a watch"),
])
def test_a_file_that_is_no_watch_is_unreadable_with_why(tmp_path, broken, why):
    with pytest.raises(Unreadable, match=why):
        watchread.read(channel_with(tmp_path, broken))


def test_times_out_of_order_or_missing_are_refused(tmp_path):
    for change in ({"first": 5.0}, {"last": -1}, {"interval": "fast"}, {"calls": "many"}):
        with pytest.raises(Unreadable):
            watchread.typed(dict(good(), **change))


def test_a_link_in_place_of_the_watch_is_not_followed(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(good()))
    base = channel_with(tmp_path, good())
    path = os.path.join(base, "out", watchread.NAME)
    os.unlink(path)
    os.symlink(secret, path)
    with pytest.raises(Unreadable, match="link"):
        watchread.read(base)


def test_a_fifo_in_place_of_the_watch_is_not_waited_on(tmp_path):
    base = channel_with(tmp_path, good())
    path = os.path.join(base, "out", watchread.NAME)
    os.unlink(path)
    os.mkfifo(path)
    with pytest.raises(Unreadable):
        watchread.read(base)


def test_a_watch_past_the_bound_is_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(watchread, "LIMIT", 1000)
    data = dict(good(), threads=["x" * 2000])
    with pytest.raises(Unreadable, match="larger than"):
        watchread.read(channel_with(tmp_path, data))


@pytest.mark.parametrize("key,row", [
    ("codes", ["/job/x.py", "ten", "f"]), ("calls", [9, 0, 0, 1, 0.1, 0.2]), ("calls", [1, 5, 0, 1, 0.1, 0.2]),
    ("calls", [1, 0, 3, 1, 0.1, 0.2]), ("calls", [1, 0, 0, 1, 0.5, 0.4]), ("calls", [True, 0, 0, 1, 0.1, 0.2]),
    ("calls", [1, 0, 0, 1, 0.1]), ("threads", 7)])
def test_a_row_others_name_by_index_that_is_not_one_makes_the_watch_unreadable(key, row):
    """Left out, it would shift every index after it; a caller after its call (or itself) could make a cycle."""
    data = good()
    data[key].append(row)
    with pytest.raises(Unreadable, match=key):
        watchread.typed(data)


def test_other_rows_out_of_range_or_of_the_wrong_type_are_left_out():
    data = good()
    data["wraps"] = [[0, 0.2, 0.1, 3, 1], [99, 0.1, 0.2, 3, 1], [0, 0.3, 0.31, 14, 11]]  # backwards; no such call
    data["markers"] = [["optimizer", 99, 0.1], ["exec", 0, 0.1], ["optimizer", 0, 1e12], ["optimizer", 1, 0.2]]
    data["lines"] = [[5, 1, 1], [0, 12, "many"], [0, 12, 3]]
    w = watchread.typed(data)
    assert w.wraps == [(0, 0.3, 0.31, 14, 11)] and w.markers == [("optimizer", 1, 0.2)] and w.lines == [(0, 12, 3)]


def test_text_from_the_job_is_one_bounded_line():
    data = good()
    data["codes"][0] = ["/job/evil\x1b[2J\nname.py", 10, "train\u2028x" + "y" * 9000]
    w = watchread.typed(data)
    f, _, q = w.codes[0]
    assert "\n" not in f and "\x1b" not in f and "\u2028" not in q and len(q) <= watchread.TEXT
