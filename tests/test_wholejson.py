"""A JSON file whole or cut short, by its structure (patchkit.core.wholejson): on real torch traces, with the keys
torch adds when CUPTI reports an error (and keys no torch writes yet), cut at each kind of point, small (walked
whole) and big (judged on its last bytes), and on files another user planted."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading

import pytest

from patchkit.core import manifest, wholejson
from patchkit.traces.captures import find

from capturing import cli

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROFILE = """
import sys
import torch

x = torch.ones(8, 8)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
    for _ in range(int(sys.argv[2])):
        x = (x @ x).tanh()
prof.export_chrome_trace(sys.argv[1])
"""
# how kineto writes the lists its logger collected (ERROR, WARNING) after the events: `"{}": {},` then traceName
ERROR = b'\n      "ERROR": ["CUPTI call cuptiGetDeviceCount failed with code 35 (gpuGetDeviceCount failed)"],'
LATER = b'\n      "WARNING": ["a", "b]"],\n      "someKeyOfALaterTorch": {"x": [1, {"y": "}"}], "z": null},'


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """A trace torch.profiler wrote on this CPU (kineto's writer), as bytes."""
    pytest.importorskip("torch")
    path = tmp_path_factory.mktemp("real") / "t.json"
    subprocess.run([sys.executable, "-c", PROFILE, str(path), "3"], check=True, capture_output=True, timeout=300)
    data = path.read_bytes()
    assert json.loads(data)["traceEvents"] and data.rstrip().endswith(b"}")
    return data


def judge(data: bytes, objects: bool = True) -> str:
    return wholejson.cut(io.BytesIO(data), len(data), objects)


def with_keys(data: bytes, keys: bytes) -> bytes:
    """``keys`` where kineto puts what it adds: after the events list's close, before "traceName"."""
    close = data.rindex(b"\n  ],") + len(b"\n  ],")
    return data[:close] + keys + data[close:]


def big(data: bytes, size: int = 3 * wholejson.WINDOW) -> bytes:
    """The real trace with its events repeated until it is ``size`` bytes or more: judged on its last bytes."""
    start = data.index(b'"traceEvents": [') + len(b'"traceEvents": [')
    close = data.rindex(b"\n  ],")
    events = data[start:close]
    return data[:start] + b",".join([events] * (size // len(events) + 1)) + data[close:]


def test_a_real_trace_with_torch_s_error_key_is_whole(real):
    for data in (with_keys(real, ERROR), with_keys(big(real), ERROR)):
        assert json.loads(data)["ERROR"] == ["CUPTI call cuptiGetDeviceCount failed with code 35 (gpuGetDeviceCount "
                                             "failed)"]  # valid JSON, as torch writes it
        assert judge(data) == "" and judge(real) == ""


def test_keys_no_torch_writes_yet_are_whole_wherever_they_are(real):
    early = real.replace(b'"traceEvents": [', b'"early": {"l": [[]]}, "traceEvents": [', 1)
    for data in (with_keys(real, LATER), with_keys(big(real), LATER), early, with_keys(early, ERROR + LATER)):
        assert json.loads(data) and judge(data) == ""


def _points(data: bytes):
    """(name, length, what the message says) for each kind of cut: inside a string, inside an event, between two
    events of the list, after the list's close, and before the final brace."""
    close = data.rindex(b"\n  ],")
    last_event = data.rindex(b"{", 0, close)
    name = data.index(b'"name": "', last_event) + len(b'"name": "') + 3
    between = data.rindex(b"},", 0, last_event) + 2
    return [("mid-string", name, "inside a string opened at byte"),
            ("mid-event", data.index(b'",', name) + 2, "inside an object opened at byte"),
            ("between-events", between, "inside a list"),
            ("after-the-list", close + len(b"\n  ]"), "before the brace that closes its top-level object"),
            ("after-the-list-s-comma", close + len(b"\n  ],"), ""),
            ("before-the-brace", len(data.rstrip()) - 1, "")]


@pytest.mark.parametrize("size", ["small", "big"])
def test_a_real_trace_cut_short_is_refused_saying_where_it_stops(real, size):
    data = with_keys(real if size == "small" else big(real), ERROR)
    for point, at, said in _points(data):
        why = judge(data[:at])
        assert why.startswith(f"ends after {at} bytes") and said in why, (point, why)
        assert "disk" not in why
    if size == "small":
        assert judge(data[:len(data.rstrip()) - 1]).endswith("before the brace that closes its top-level object "
                                                               "(opened at byte 1)")
        between, events = _points(data)[2][1], data.index(b'"traceEvents": [') + 15
        assert judge(data[:between]) == f"ends after {between} bytes inside a list opened at byte {events}"


def test_every_cut_is_a_broken_capture_in_the_listing_and_the_whole_one_is_listed_ok(real, tmp_path):
    whole = tmp_path / "whole"
    whole.mkdir()
    (whole / "h_1.1.pt.trace.json").write_bytes(with_keys(big(real), ERROR))
    (whole / "h_1.2.pt.trace.json").write_bytes(with_keys(real, ERROR + LATER))
    listed = json.loads(cli("traces", whole, "--json").stdout)["captures"]
    assert [c["broken"] for c in listed] == [False, False]
    data = with_keys(real, ERROR)
    for point, at, said in _points(data) + _points(with_keys(big(real), ERROR)):
        folder = tmp_path / f"cut-{len(os.listdir(tmp_path))}"
        folder.mkdir()
        trace = folder / "h_1.1.pt.trace.json"
        trace.write_bytes((data if at < len(data) else with_keys(big(real), ERROR))[:at])
        [cap] = find([str(folder)])
        assert cap.problem.startswith(f"{trace}: ends after {at} bytes") and said in cap.problem, (point, cap.problem)


def test_a_manifest_s_trace_with_an_error_key_is_listed_ok(real, tmp_path, patchkit_home):
    trace = tmp_path / "h_1.1.pt.trace.json"
    trace.write_bytes(with_keys(real, ERROR))
    manifest.record_window("r", "torch", 0, {"save_path": str(tmp_path)}, 1, 2, None, [str(trace)])
    [cap] = json.loads(cli("traces", tmp_path, "--json").stdout)["captures"]
    assert cap["broken"] is False and cap["manifest"] and [t["path"] for t in cap["traces"]] == [str(trace)]


class Counting(io.BytesIO):
    def __init__(self, data):
        super().__init__(data)
        self.read_bytes = 0

    def read(self, n=-1):
        out = super().read(n)
        self.read_bytes += len(out)
        return out


def test_a_big_trace_is_judged_on_its_last_bytes_only(real):
    """The check runs at the end of every window: on a trace of any size it reads one window's worth."""
    data = with_keys(big(real, 40 * wholejson.WINDOW), ERROR)
    for sample in (data, data[:-3], data[: len(data) // 2]):
        handle = Counting(sample)
        wholejson.cut(handle, len(sample), True)
        assert handle.read_bytes <= wholejson.WINDOW + 1


def test_json_on_one_line_is_read_whole(real):
    one = json.dumps(json.loads(with_keys(big(real), ERROR)), separators=(",", ":")).encode()
    assert b"\n" not in one and len(one) > wholejson.WINDOW and judge(one) == ""
    assert judge(one[:-1]) == f"ends after {len(one) - 1} bytes with 1 of its brackets still open"
    assert judge(one[:-5]) == f"ends after {len(one) - 5} bytes inside a string"
    assert judge(one[:-1] + b"]") == f"is not one JSON list or object on its one line of {len(one)} bytes"
    assert judge(b"[" + one[1:-1] + b"]") == "is a list, not the object a torch trace is"


def test_a_list_is_whole_unless_a_torch_trace_is_asked_for():
    data = b'[\n{"ph": "X"},\n{"ph": "X"}\n]\n'
    assert judge(data, objects=False) == ""
    assert judge(data + b" " * wholejson.WINDOW, objects=False) == ""  # big: judged on its last bytes
    assert judge(data) == "is a list, not the object a torch trace is"
    numbers = b'{"a": [\n' + b"1,\n" * wholejson.WINDOW + b"1]\n"
    assert judge(numbers + b"}") == "" and judge(numbers, objects=False) == ""
    assert judge(numbers).startswith(f"ends after {len(numbers)} bytes where a list closes (byte ")
    assert judge(b'{"a": [1]\n' + b" " * wholejson.WINDOW) == f"ends after {10 + wholejson.WINDOW} bytes with 1 of " \
        "its brackets still open"  # no line break in its last bytes: read whole


@pytest.mark.parametrize("data, said", [
    (b"", "is empty"),
    (b" \n ", "holds no JSON data (3 bytes)"),
    (b"\0" * 64, "ends after 64 bytes with no bracket: not a list or an object"),
    (b'{"traceEvents": [{"ph": "X"}' + b"\0" * 64, "ends after 92 bytes inside a list opened at byte 16"),
    (b'{"a": 1}\0\0', "ends after 10 bytes: 2 bytes that are not JSON follow its close at byte 7"),
    (b'{"a": [1}', "closes a list opened at byte 6 with } at byte 8: not JSON"),
    (b'{"a": 1}{"b": 2}', "closes its top-level object at byte 7, then goes on: not one JSON value"),
    (b'{"a": "x\ny"}', "holds a line break inside the string at byte 6: not JSON"),
    (b'x{"a": 1}', "does not begin with a list or an object (byte 1 is the first bracket): not JSON"),
])
def test_what_is_not_one_whole_json_value_says_what_was_found(data, said):
    assert judge(data) == said


def test_a_planted_link_or_fifo_is_never_read(tmp_path):
    target = tmp_path / "t.json"
    target.write_text("{}")
    assert wholejson.cut_at(str(target)) == ""
    (tmp_path / "link.json").symlink_to(target)
    assert wholejson.cut_at(str(tmp_path / "link.json")) == "is a symbolic link: never followed"
    os.mkfifo(tmp_path / "fifo.json")
    said = []
    reader = threading.Thread(target=lambda: said.append(wholejson.cut_at(str(tmp_path / "fifo.json"))))
    reader.start()
    reader.join(30)
    assert said and re.fullmatch(r"is not a regular file \(.*\): never read", said[0])
    assert wholejson.cut_at(str(tmp_path / "gone.json")) == "is missing"
