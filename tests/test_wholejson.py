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


# ---------------------------------------------------------------- in the job, as each mode runs it

# torch's export, as it behaves on a node where CUPTI reports an error (the "ERROR" list after the events), or cut
# short inside a string: put in the job before anything else runs
EXPORT = '''
import sys
import torch.profiler
_export = torch.profiler.profile.export_chrome_trace
def _export_as_torch_did(self, path, *args, **kwargs):
    _export(self, path, *args, **kwargs)
    with open(path, "rb") as f:
        data = f.read()
    close = data.rindex(b"\\n  ],") + len(b"\\n  ],")
    cut = {"cut": data.rindex(b'"name": "') + 12, "cut-list": data.rindex(b"},") + 2,
           "cut-brace": len(data.rstrip()) - 1}.get(HOW)
    data = data[:close] + ERROR + data[close:] if HOW == "error" else data[:cut]
    with open(path, "wb") as f:
        f.write(data)
torch.profiler.profile.export_chrome_trace = _export_as_torch_did
'''

APPLIED = '''
import patchkit.runtime as rt
rt.configure("k", backend="torch", contents=("cpu",), save_path=sys.argv[1], wait=1, warmup=0, active=2, repeat=1)
x = torch.ones(8, 8)
for _ in range(4):
    x = (x @ x).tanh()
    rt.step("k")
print("job finished")
'''

RUN = '''
from patchkit.demo import train
train.main(["--updates", "4"])
print("job finished")
'''


def _job(how: str, body: str) -> str:
    return EXPORT.replace("ERROR", repr(ERROR)).replace("HOW", repr(how)) + body


# what the reason says of each cut: in a string, between two events of the list, before the brace of the whole
FOUND = {"cut": r"inside a string opened at byte \d+",
         "cut-list": r"inside a list (opened at byte \d+|or an object opened before the last 64 KiB)",
         "cut-brace": r"(before the brace that closes its top-level object \(opened at byte 1\)|inside an object "
                      r"opened before the last 64 KiB)"}


@pytest.mark.parametrize("mode", ["apply", "run"])
@pytest.mark.parametrize("how", ["error", "cut", "cut-list", "cut-brace"])
def test_in_the_job_a_trace_with_an_error_key_is_kept_and_one_cut_short_refused(tmp_path, patchkit_home, mode, how):
    """``apply``'s inserted code and ``patchkit run``'s hook reach the same runtime (so do ``capture`` and
    ``attach``): the torch backend's on_trace_ready judges the trace there, then the runtime, then the listing."""
    pytest.importorskip("torch")
    import shutil

    from patchkit.demo import SAMPLE

    out = tmp_path / "traces"
    env = dict(os.environ, PYTHONPATH=REPO, PATCHKIT_HOME=str(patchkit_home))
    env.pop("PATCHKIT_RUN", None)
    if mode == "apply":
        command = [sys.executable, "-c", _job(how, APPLIED), str(out)]
    else:
        site = tmp_path / "site"
        shutil.copytree(SAMPLE, site, ignore=shutil.ignore_patterns("__pycache__"))
        env["PYTHONPATH"] = os.pathsep.join([str(site), REPO])
        command = [sys.executable, "-m", "patchkit", "run", "verl-fsdp-update", "--root", str(site), "backend=torch",
                   "schedule.wait=1", "schedule.warmup=0", "schedule.active=2", f"profiler.save_path={out}", "--",
                   sys.executable, "-c", _job(how, RUN)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert done.returncode == 0 and "job finished" in done.stdout, done.stderr[-3000:]
    said = [ln for ln in done.stderr.splitlines() if ln.startswith("[patchkit]")]
    traces = sorted(out.glob("*.pt.trace.json"))
    if how == "error":
        [trace] = traces
        assert json.loads(trace.read_bytes())["ERROR"] and not any("capture failed" in ln for ln in said), said
        [cap] = json.loads(cli("traces", out, "--json").stdout)["captures"]
        assert cap["broken"] is False and [t["path"] for t in cap["traces"]] == [str(trace)]
    else:
        assert traces == [] and not list(out.glob("*.part*")), said
        [failed] = [ln for ln in said if "capture failed" in ln]
        assert re.search(r"was not written whole: OSError: torch wrote only part of it: it ends after \d+ bytes "
                         + FOUND[how] + "; its manifest says so", failed), failed
        [cap] = json.loads(cli("traces", out, "--json", "--strict", code=1).stdout)["captures"]
        assert cap["broken"] is True and re.search(FOUND[how], cap["problem"]), cap["problem"]


LONG = '''
from patchkit.demo import train
train.main(["--updates", "20000"])
'''


@pytest.mark.parametrize("how", ["error", "cut"])
def test_a_capture_asked_of_a_running_job_keeps_a_trace_with_an_error_key_and_refuses_one_cut_short(
        tmp_path, patchkit_home, how):
    pytest.importorskip("torch")
    import shutil
    import signal
    import time

    from patchkit.demo import SAMPLE
    from patchkit.runtime import requests

    site, out = tmp_path / "site", tmp_path / "traces"
    shutil.copytree(SAMPLE, site, ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), REPO]), PATCHKIT_HOME=str(patchkit_home),
               PATCHKIT_POLL="0.1")
    env.pop("PATCHKIT_RUN", None)
    job = subprocess.Popen(
        [sys.executable, "-m", "patchkit", "run", "verl-fsdp-update", "--root", str(site), "backend=torch",
         "schedule.trigger=manual", f"profiler.save_path={out}", "--", sys.executable, "-c", _job(how, LONG)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        deadline = time.time() + 120
        while not requests.registered("verl-fsdp-update") and time.time() < deadline and job.poll() is None:
            time.sleep(0.2)
        asked = subprocess.run([sys.executable, "-m", "patchkit", "capture", "verl-fsdp-update", "--steps", "2"],
                               capture_output=True, text=True, env=env, timeout=120)
        assert job.poll() is None  # the job runs on
    finally:
        job.send_signal(signal.SIGTERM)
        job.communicate(timeout=60)
    if how == "error":
        assert asked.returncode == 0, asked.stderr
        [trace] = sorted(out.glob("*.pt.trace.json"))
        assert json.loads(trace.read_bytes())["ERROR"] and asked.stdout.strip().endswith(f" -> {trace}")
        [cap] = json.loads(cli("traces", out, "--json").stdout)["captures"]
        assert cap["broken"] is False
    else:
        assert asked.returncode == 1 and list(out.glob("*.pt.trace.json")) == [], asked.stderr
        assert re.search(r"torch wrote only part of it: it ends after \d+ bytes inside a string", asked.stderr +
                         asked.stdout), asked.stderr
        [cap] = json.loads(cli("traces", out, "--json", "--strict", code=1).stdout)["captures"]
        assert cap["broken"] is True and "inside a string opened at byte" in cap["problem"]


@pytest.mark.parametrize("how", ["error", "cut"])
def test_attach_keeps_a_trace_with_an_error_key_and_refuses_one_cut_short(tmp_path, patchkit_home, how):
    """The job (tests/attach_job.py, started without patchkit) gets torch's export as EXPORT has it through its own
    sitecustomize; attach records two steps."""
    pytest.importorskip("torch")
    import attach_helpers as helpers

    refused = helpers.gdb_missing() or helpers.ptrace_denied()
    if refused:
        pytest.skip(refused)
    site = helpers.site(tmp_path)
    (site / "sitecustomize.py").write_text(_job(how, ""))
    job = helpers.Job(tmp_path, site, steps=400)
    try:
        job.wait_steps(10)
        done = helpers.attach(tmp_path, [job.pid, helpers.recipe(tmp_path, "logged"), "--root", site, "--steps", 2,
                                         "--json"], env={"PATCHKIT_HOME": str(patchkit_home)})
    finally:
        job.kill()
    out = tmp_path / "traces"
    [status] = json.loads(done.stdout)
    traces = sorted(out.glob("*.pt.trace.json"))
    if how == "error":
        assert done.returncode == 0, done.stderr
        [trace] = traces
        assert json.loads(trace.read_bytes())["ERROR"] and status["captures"][0]["traces"] == [str(trace)]
        [cap] = json.loads(cli("traces", out, "--json").stdout)["captures"]
        assert cap["broken"] is False
    else:
        assert traces == [] and "torch wrote only part of it: it ends after " in json.dumps(status), status
        [cap] = json.loads(cli("traces", out, "--json", "--strict", code=1).stdout)["captures"]
        assert cap["broken"] is True and "inside a string opened at byte" in cap["problem"]
