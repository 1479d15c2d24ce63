"""A write that fails is a failed capture: a real job under a file-size limit (a full disk, a quota, as the job sees
it), then `patchkit traces` on what it left.  The trace cut short never gets its name, the manifest says why, the
listing says broken, and the job runs on."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchkit.core import manifest

from capturing import cli
from runtime_helpers import on_stand_in

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parent.parent
FOUND = " ends after "  # what torch left, in bytes and where its JSON stops; never a guess at the cause

JOB = textwrap.dedent("""
    import sys
    import torch
    import patchkit.runtime as rt

    rt.configure("full", backend="torch", contents=("cpu",), save_path=sys.argv[1], wait=1, warmup=0, active=2,
                 repeat=1)
    x = torch.ones(16, 16)
    for _ in range(5):
        for _ in range(int(sys.argv[2])):  # operators per step: how long the trace is
            x = (x @ x).tanh()
        rt.step("full")
    print("job finished", float(x.sum()))
""")


def _limited(limit):
    def preexec():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return preexec


def _manifests(folder):
    return [json.loads(p.read_text()) for p in sorted((folder / manifest.FOLDER).glob("*.json"))]


@pytest.mark.parametrize("ops, limit", [(60, 8192), (1, 4096)], ids=["writer-stops", "cut-at-close"])
def test_a_torch_trace_the_disk_had_no_room_for_is_a_failed_capture(tmp_path, patchkit_home, ops, limit):
    """torch says nothing when its trace write fails: it stops half way (leaving its .tmp) or renames what it wrote."""
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", JOB, str(out), str(ops)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, preexec_fn=_limited(limit),
                          env=dict(os.environ, PYTHONPATH=str(REPO), PATCHKIT_HOME=str(patchkit_home)))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "job finished 256.0" in done.stdout  # the job ran on, to its end
    assert sorted(os.listdir(out)) == [manifest.FOLDER]  # no trace under its name, no .part or .tmp left
    said = [ln for ln in done.stderr.splitlines() if ln.startswith("[patchkit]")]
    assert said[1] == "[patchkit] full: window closed after step 2 (steps 1-2 recorded); trace: none", said
    assert said[2].startswith(f"[patchkit] full: capture failed: {out}/") and said[2].endswith(
        "; its manifest says so, and the job runs on") and FOUND in said[2] and "disk is full" not in said[2]

    [m] = _manifests(out)
    [entry] = m["traces"]
    assert entry["name"].endswith(".pt.trace.json") and not (out / entry["name"]).exists()
    assert (entry["size"], entry["files"]) == (0, 0) and entry["error"].startswith("OSError: torch ")
    assert m["error"] == f"{entry['name']}: {entry['error']}" and FOUND in m["error"]
    assert entry["error"].startswith(("OSError: torch did not finish it: its temporary file ends after ",
                                      "OSError: torch wrote only part of it: it ends after "))
    assert m["steps"] == {"first": 1, "last": 2, "count": 2} and m["format"] == 1

    listed = json.loads(cli("traces", out, "--json", "--strict", code=1).stdout)["captures"]
    [cap] = listed
    assert cap["broken"] is True and cap["traces"] == [] and cap["size"] == 0
    assert cap["problem"] == f"{out / manifest.FOLDER / (entry['name'][:-len('.pt.trace.json')] + '.json')}: " \
                             f"the capture failed: {m['error']}"
    text = cli("traces", out, "--strict", code=1)
    [row] = text.stdout.splitlines()[1:]
    assert row.split()[:5] == ["full", "0", "-", "1-2", "-"] and row.endswith("BROKEN (see below)")
    assert text.stderr.startswith(f"error: {cap['problem']}\n  hint: capture it again")


def test_a_reader_that_knows_no_error_field_still_finds_the_failed_capture_broken(tmp_path):
    """Format 1 is kept: a failed trace's entry names a file that is not there, which every reader calls broken."""
    out = tmp_path / "out"
    path = manifest.record_window("r", "torch", 0, {"save_path": str(out)}, 1, 2, None, [],
                                  failed=[(str(out / "h_1.2.pt.trace.json"), "OSError: no room")])
    data = json.loads(Path(path).read_text())
    data.pop("error")
    data["traces"][0].pop("error")  # as patchkit before this field reads it
    Path(path).write_text(json.dumps(data))
    [cap] = json.loads(cli("traces", out, "--json", "--strict", code=1).stdout)["captures"]
    assert cap["broken"] and "h_1.2.pt.trace.json: the trace is missing" in cap["problem"]


NPU_JOB = r'''
import json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
import patchkit.runtime as rt

rt.configure("k", backend="npu", level="level_none", contents=("cpu", "npu"), export_type="text", analysis=False,
             save_path=sys.argv[1] + "/out", ranks="all", wait=1, active=100)
for _ in range(103):
    rt.step("k")
print("PATCHKIT-RESULT " + json.dumps({"report": rt.report()}))
'''


def test_an_npu_capture_folder_torch_npu_could_not_finish_is_a_failed_capture(tmp_path, patchkit_home):
    """The torch_npu stand-in writes its folder under its final name and swallows the error, as torch_npu does."""
    [report] = on_stand_in(NPU_JOB, tmp_path)["report"]
    out = tmp_path / "out"
    [folder] = out.glob("*_ascend_pt")
    assert report["state"] == "finished" and report["error"] is None and report["traces"] == []
    assert report["failed"] == [[str(folder), "its FRAMEWORK/double_events.json ends in the middle of its JSON data: "
                                 "the disk was full, a quota or file size limit was hit, or the writer was killed"]]
    [m] = _manifests(out)
    assert m["error"] == f"{folder.name}: {report['failed'][0][1]}" and m["traces"][0]["name"] == folder.name
    [cap] = json.loads(cli("traces", out, "--json", "--strict", code=1).stdout)["captures"]
    assert cap["broken"] and cap["problem"].endswith(f"the capture failed: {m['error']}")
    assert [t["path"] for t in cap["traces"]] == [str(folder)]  # listed once, as the broken capture
