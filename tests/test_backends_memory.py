"""memory backend: the allocator history of each window, dumped where memory_viz can open it; CUDA and NPU by the
same calls, and no device is one line while the job goes on.  The device calls are stood in for (no GPU or NPU
here): the stand-ins record what the generated code calls and write the snapshot file as the real calls do."""

from __future__ import annotations

import errno
import json
import os
import pickle
import sys
import types

import pytest

from patchkit.runtime import backends
from patchkit import runtime
from runtime_helpers import lines, no_profiler_left_running, settings  # noqa: F401  (a fixture)


class Allocator:
    """torch.cuda.memory / torch_npu.npu.memory as the backend calls them."""

    def __init__(self, room=None):
        self.calls = []
        self.room = room  # bytes the disk has left for each snapshot (None: enough)

    def _record_memory_history(self, enabled="all", max_entries=None):
        self.calls.append(("record", enabled, max_entries))

    def _dump_snapshot(self, path):
        self.calls.append(("dump", os.path.basename(path)))
        data = pickle.dumps({"segments": [], "device_traces": []})
        room = self.room.pop(0) if self.room else None
        with open(path, "wb") as f:
            f.write(data[:room])
            if room is not None and room < len(data):
                raise OSError(errno.ENOSPC, "No space left on device")


def _drive(key, save_path, steps=7, **kw):
    runtime.configure(key.partition("/")[0], **settings(save_path, backend="memory", wait=1, active=2, repeat=2, **kw))
    for _ in range(steps):
        runtime.step(key)
    return runtime.report()


def test_each_window_records_the_history_and_dumps_one_snapshot_on_cuda(tmp_path, monkeypatch,
                                                                         no_profiler_left_running):
    import torch

    cuda = Allocator()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "memory", cuda)
    (report,) = _drive("mem", tmp_path)
    tag = f"{os.uname().nodename}_{os.getpid()}"
    assert cuda.calls == [("record", "all", 100000), ("dump", f"{tag}_steps1-2.pickle.part"), ("record", None, None),
                          ("record", "all", 100000), ("dump", f"{tag}_steps4-5.pickle.part"), ("record", None, None)]
    assert sorted(os.listdir(tmp_path)) == sorted([f"{tag}_steps1-2.pickle", f"{tag}_steps4-5.pickle",
                                                   "patchkit-manifests"])
    assert [os.path.basename(t) for t in report["traces"]] == [f"{tag}_steps1-2.pickle", f"{tag}_steps4-5.pickle"]


def test_a_snapshot_the_disk_had_no_room_for_is_a_failed_capture_and_the_next_window_records(
        tmp_path, monkeypatch, capsys, no_profiler_left_running):
    import torch

    cuda = Allocator(room=[10, None])  # the first window's snapshot hits a full disk
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "memory", cuda)
    (report,) = _drive("mem", tmp_path)
    tag = f"{os.uname().nodename}_{os.getpid()}"
    assert [c[0] for c in cuda.calls] == ["record", "dump", "record"] * 2  # recording stopped after the failure too
    assert sorted(os.listdir(tmp_path)) == sorted([f"{tag}_steps4-5.pickle", "patchkit-manifests"])  # no .part
    assert report["error"] is None and report["traces"] == [str(tmp_path / f"{tag}_steps4-5.pickle")]
    [(trace, why)] = report["failed"]
    assert trace == str(tmp_path / f"{tag}_steps1-2.pickle") and why == "OSError: [Errno 28] No space left on device"
    failed = json.loads((tmp_path / "patchkit-manifests" / f"{tag}_steps1-2.pickle.json").read_text())
    assert failed["error"] == f"{tag}_steps1-2.pickle: {why}" and failed["traces"][0]["error"] == why
    said = lines(capsys)
    assert any(ln.endswith(f"capture failed: {trace} was not written whole: {why}; its manifest says so, and the "
                           "job runs on") for ln in said)


def test_on_ascend_the_same_calls_go_to_torch_npu_and_the_role_names_the_file(tmp_path, monkeypatch,
                                                                              no_profiler_left_running):
    npu = Allocator()
    fake = types.ModuleType("torch_npu")
    fake.npu = types.SimpleNamespace(is_available=lambda: True, memory=npu)
    monkeypatch.setitem(sys.modules, "torch_npu", fake)
    (report,) = _drive("mem/ref", tmp_path, steps=4)
    assert [c[0] for c in npu.calls] == ["record", "dump", "record"]
    assert npu.calls[1][1].endswith("_ref_steps1-2.pickle.part")  # renamed once written whole
    assert report["traces"][0].endswith("_ref_steps1-2.pickle")


def test_without_a_device_one_line_says_so_and_the_job_goes_on(tmp_path, capsys, no_profiler_left_running):
    (report,) = _drive("mem", tmp_path)
    said = lines(capsys)
    assert len(said) == 1 and "needs a CUDA or NPU device" in said[0]
    assert report["state"] == "finished" and report["traces"] == []


def test_memory_is_a_backend_everywhere_and_show_renders_it():
    from click.testing import CliRunner

    from patchkit.cli.commands import main

    assert "memory" in backends.names()
    out = CliRunner().invoke(main, ["show", "verl-fsdp-update", "backend=memory"]).output
    assert "torch.cuda.memory._record_memory_history(max_entries=100000)" in out and "_dump_snapshot" in out
    with pytest.raises(ValueError):
        backends.render(settings("/tmp/x", backend="memory", wait=-1))
