"""`traces`, `summary`, `collect` and `compare` on an outputs folder another user can write: never hung, never exhausted.

Each test plants, in a folder of one good capture, what a second user who can
write there could: a FIFO or a link to ``/dev/zero`` named as a trace, a
manifest, torch_npu's ``trace_view.json`` or ``step_trace_time.csv``; a gzip
bomb; a trace of thousands of distinct long operator names; a manifest of a
newer format naming folders outside.  Every command runs in a process of its
own under a hard timeout and a bound on its address space, so a command that
blocks or grows fails the test (no time is measured): it must end with exit
status 0 or 1, an error naming the planted file, and no traceback.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import subprocess
import sys

import pytest

from patchkit.core import manifest
from patchkit.traces import selftime

from fake_tools import torch_trace

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 120  # seconds: far above what any of these takes; only a command that blocks reaches it
MEMORY = 2 << 30  # bytes of address space: a read that grows with /dev/zero or a bomb stops well before
GOOD = "h_1.1.pt.trace.json"
STEP_HEADER = "Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage," \
              "Bubble,Communication(Not Overlapped and Exclude Receive),Preparing"


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def patchkit(*args, home) -> subprocess.CompletedProcess:
    """``python -m patchkit ARGS`` in a process of its own; blocking past TIMEOUT fails the test."""
    env = dict(os.environ, PYTHONPATH=REPO, PATCHKIT_HOME=str(home), COLUMNS="200")
    try:
        done = subprocess.run([sys.executable, "-m", "patchkit", *map(str, args)], env=env, capture_output=True,
                              text=True, timeout=TIMEOUT, preexec_fn=_bounded, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"patchkit {' '.join(map(str, args))} still ran after {TIMEOUT} s: it blocked")
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr, done.stderr[-3000:]
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return done


@pytest.fixture
def outputs(tmp_path):
    """A save folder holding one good torch capture with its manifest, and a second folder to compare with."""
    out = tmp_path / "outputs"
    torch_trace(out / GOOD, 0, 1000, 600)
    (out / manifest.FOLDER).mkdir()
    (out / manifest.FOLDER / "h_1.1.json").write_text(json.dumps({
        "format": 1, "kind": manifest.KIND, "recipe": "r", "key": "r", "role": "", "backend": "torch", "rank": 0,
        "host": "h", "pid": 1, "steps": {"first": 1, "last": 3, "count": 3},
        "traces": [{"name": GOOD, "kind": "file", "size": (out / GOOD).stat().st_size, "files": 1}]}))
    other = tmp_path / "other"
    torch_trace(other / GOOD, 0, 1000, 600)
    return out, other


def ascend(out, only: str):
    """A torch_npu capture in ``out`` whose parsed output holds ``only`` (its path, not yet made)."""
    capture = out / "host_11_20260101000000000_ascend_pt"
    (capture / "FRAMEWORK").mkdir(parents=True)
    (capture / "profiler_info_1.json").write_text("{}")
    (capture / "ASCEND_PROFILER_OUTPUT").mkdir()
    return capture / "ASCEND_PROFILER_OUTPUT" / only


def plant(out, where: str, kind: str):
    """The planted file's path: a FIFO, or a link to /dev/zero, named as ``where`` says."""
    path = {"trace": lambda: out / "h_9.1.pt.trace.json",
            "manifest": lambda: out / manifest.FOLDER / "planted.json",
            "trace_view": lambda: ascend(out, "trace_view.json"),
            "step_trace_time": lambda: ascend(out, "step_trace_time.csv")}[where]()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    return path


# (where, kind, command): what the command must end with; the planted file is named in the error whenever it is 1.
# A link found while summary walks a folder is not a capture (never followed), so the good capture is summarised.
EXPECTED = {
    ("trace", "fifo"): {"traces": 1, "summary": 1, "collect": 1, "compare": 1},
    ("trace", "zero"): {"traces": 1, "summary": 0, "collect": 1, "compare": 0},
    ("manifest", "fifo"): {"traces": 1, "summary": 1, "collect": 1, "compare": 1},
    ("manifest", "zero"): {"traces": 1, "summary": 1, "collect": 1, "compare": 1},
    ("trace_view", "fifo"): {"traces": 0, "summary": 1, "collect": 1, "compare": 1},
    ("trace_view", "zero"): {"traces": 0, "summary": 1, "collect": 1, "compare": 1},
    ("step_trace_time", "fifo"): {"traces": 0, "summary": 1, "collect": 1, "compare": 1},
    ("step_trace_time", "zero"): {"traces": 0, "summary": 1, "collect": 1, "compare": 1},
}


@pytest.mark.parametrize("where,kind", sorted(EXPECTED))
@pytest.mark.parametrize("command", ["traces", "summary", "collect", "compare"])
def test_a_fifo_or_a_link_to_dev_zero_planted_as_a_file_never_blocks_or_exhausts(outputs, tmp_path, where, kind,
                                                                                   command):
    out, other = outputs
    planted = plant(out, where, kind)
    args = {"traces": [out, "--strict"], "summary": [out], "collect": [tmp_path / "dest", out],
            "compare": [out, other]}[command]  # traces exits 1 for a broken capture with --strict only
    done = patchkit(command, *args, home=tmp_path / "home")
    assert done.returncode == EXPECTED[(where, kind)][command], done.stderr[-3000:]
    if done.returncode:
        assert str(planted) in done.stderr and "hint: " in done.stderr, done.stderr[-3000:]
        listed = command == "collect" and where in ("trace_view", "step_trace_time")  # in a folder collect lists
        said = "a symbolic link or a special file" if listed else "symbolic link" if kind == "zero" else \
            "not a regular file"
        assert said in done.stderr, done.stderr[-3000:]
    if command == "collect":
        assert not (tmp_path / "dest").exists()  # a broken capture stops the collect before anything is written


def bomb(path, size: int = 64 << 20):
    """A gzip trace that is valid JSON: ``size`` bytes of white space between its brackets, some 1000 times smaller."""
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9) as packer:
        packer.write(b'{"traceEvents": [')
        for _ in range(size >> 20):
            packer.write(b" " * (1 << 20))
        packer.write(b"]}")
    return path


@pytest.mark.parametrize("command", ["traces", "summary"])
def test_a_gzip_bomb_is_refused_once_it_expands_past_what_a_profiler_writes(outputs, tmp_path, command):
    out, _other = outputs
    planted = bomb(out / "h_8.1.pt.trace.json.gz")
    assert planted.stat().st_size * 500 < 64 << 20
    done = patchkit(command, out, *(["--strict"] if command == "traces" else []), home=tmp_path / "home")
    assert done.returncode == 1 and str(planted) in done.stderr
    assert "decompresses to more than 100 times its size" in done.stderr, done.stderr[-3000:]


def test_distinct_operator_names_are_bounded_in_number_and_length_and_the_cut_is_said(tmp_path):
    names, length = 3000, 10_000  # 30 million characters of distinct names
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0,
               "dur": 10 * names}]
    events += [{"ph": "X", "cat": "cpu_op", "name": f"{n:06d}" + "x" * length, "pid": 1, "tid": 1, "ts": n * 10,
                "dur": 5} for n in range(names)]
    trace = tmp_path / "out" / GOOD
    trace.parent.mkdir()
    trace.write_text(json.dumps({"traceEvents": events}))
    done = patchkit("summary", trace.parent, "--json", "--top", str(names + 10), home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    [rank] = json.loads(done.stdout)["ranks"]
    kept = [op for op in rank["top_ops"] if op["name"] != selftime.OTHER[0]]
    assert sum(len(op["name"]) + len(op["kind"]) for op in kept) <= selftime.MAX_NAME_CHARS
    [other] = [op for op in rank["top_ops"] if op["name"] == selftime.OTHER[0]]
    assert other["calls"] == names - len(kept) and rank["steps"] == [{"step": 1, "duration_us": 10.0 * names}]
    assert rank["notes"] and f"{names - len(kept)} event(s)" in rank["notes"][0], rank["notes"]
    text = patchkit("summary", trace.parent, home=tmp_path / "home")
    assert "  note: " in text.stdout and "names past patchkit's bound" in text.stdout
    compared = patchkit("compare", trace.parent, trace, home=tmp_path / "home")
    assert compared.returncode == 0 and "note: A " in compared.stderr and "note: B " in compared.stderr


def test_a_newer_manifest_naming_folders_outside_lists_none_of_them(outputs, tmp_path):
    out, _other = outputs
    (out / manifest.FOLDER / "h_1.1.json").unlink()  # the newer manifest is the one that names the good trace
    secret = tmp_path / "root-only"
    (secret / "inner").mkdir(parents=True)
    (secret / "inner" / "key").write_bytes(b"k" * 12345)
    climb = os.path.relpath(secret, out)
    (out / manifest.FOLDER / "newer.json").write_text(json.dumps({
        "format": manifest.FORMAT + 1, "kind": manifest.KIND, "patchkit": "99.0",
        "traces": [{"name": "../../../../root"}, {"name": climb}, {"name": str(secret)}, {"name": f"{climb}/inner"},
                   {"name": GOOD}]}))
    done = patchkit("traces", out, "--json", "--strict", home=tmp_path / "home")
    assert done.returncode == 1 and "manifest format 2" in done.stderr
    listed = [t for c in json.loads(done.stdout)["captures"] for t in c["traces"]]
    assert [t["path"] for t in listed] == [str(out / GOOD)]  # claimed by the newer manifest, so listed once
    assert str(secret) not in done.stdout and "/root" not in done.stdout.replace(str(tmp_path), "")
