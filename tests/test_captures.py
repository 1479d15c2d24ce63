"""captures: what `traces` and `collect` find under a folder, with and without manifests, and what they refuse."""

from __future__ import annotations

import json
import os

import pytest

from patchkit.traces.captures import CaptureError, find, unique

TRACE = {"schemaVersion": 1, "distributedInfo": {"backend": "gloo", "rank": 3, "world_size": 4}, "traceEvents": []}


def _trace(path, body=TRACE, mtime=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_a_trace_without_a_manifest_is_read_from_its_name_and_first_bytes(tmp_path):
    _trace(tmp_path / "run" / "node7_4242.1700000000.pt.trace.json", mtime=1_700_000_000)
    _trace(tmp_path / "run" / "node7_4243.1700000001.pt.trace.json", dict(TRACE, distributedInfo={}), 1_700_000_100)
    newest, older = find([str(tmp_path)], node="here")
    assert (older.rank, older.host, older.pid, older.backend, older.manifest, older.node) == (3, "node7", 4242, "torch",
                                                                                           None, "here")
    assert newest.rank is None and newest.ended > older.ended  # newest first
    assert older.steps == "-" and older.size == len(json.dumps(TRACE)) and not older.problem
    assert older.to_json()["traces"][0]["name"] == "node7_4242.1700000000.pt.trace.json"


def test_an_npu_capture_folder_still_being_written_says_so(tmp_path):
    folder = tmp_path / "host_1_20260101_ascend_pt"
    (folder / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (cap,) = find([str(tmp_path)])
    assert cap.backend == "npu" and "no profiler_info*.json" in cap.problem
    (folder / "profiler_info_5.json").write_text("{}")
    (cap,) = find([str(tmp_path)])
    assert cap.rank == 5 and cap.problem == ""


def test_a_cut_off_trace_is_found_with_its_problem(tmp_path):
    path = tmp_path / "h_1.1.pt.trace.json"
    path.write_text('{"traceEvents": [')
    (cap,) = find([str(tmp_path)])
    assert cap.problem == f"{path}: ends after 17 bytes inside a list opened at byte 16"


def test_what_a_killed_or_stopped_writer_left_is_never_a_capture(tmp_path):
    """torch's .tmp and the torch backend's .part hold a trace not yet (or never) written whole."""
    _trace(tmp_path / "h_1.1.pt.trace.json.tmp")
    _trace(tmp_path / "h_1.2.pt.trace.json.part")
    _trace(tmp_path / "h_1.2.pt.trace.json.part.tmp")
    assert find([str(tmp_path)], require=False) == []


def test_a_manifest_with_an_error_is_a_broken_capture_with_its_reason(tmp_path):
    from patchkit.core import manifest

    whole = _trace(tmp_path / "h_1.3.pt.trace.json")
    manifest.record_window("r/ref", "torch", 2, {"save_path": str(tmp_path)}, 4, 5, None, [str(whole)],
                           failed=[(str(tmp_path / "h_1.4.pt.trace.json"), "OSError: [Errno 28] No space left")])
    (cap,) = find([str(tmp_path)])
    assert (cap.recipe, cap.role, cap.rank, cap.steps) == ("r", "ref", 2, "4-5")
    assert [t.path for t in cap.traces] == [str(whole)]  # the whole one; the other was never written
    assert cap.problem == f"{cap.manifest}: the capture failed: h_1.4.pt.trace.json: OSError: [Errno 28] No space left"
    assert cap.to_json()["broken"] is True


@pytest.mark.parametrize("make,fragment", [
    (lambda p: p / "nowhere", "does not exist"),
    (lambda p: (p / "file.txt").write_text("x") and p / "file.txt", "is not a folder"),
    (lambda p: p, "no capture here"),
])
def test_nothing_to_find_is_an_error_that_names_the_folder(tmp_path, make, fragment):
    folder = make(tmp_path)
    with pytest.raises(CaptureError) as info:
        find([str(folder)])
    assert fragment in info.value.message and info.value.hint
    assert find([str(folder)], require=False) == []


def test_a_capture_seen_through_two_folders_counts_once(tmp_path):
    _trace(tmp_path / "a" / "h_9.1.pt.trace.json")
    os.symlink(tmp_path / "a", tmp_path / "b")
    caps = find([str(tmp_path / "a")], node="n1") + find([str(tmp_path / "b")], node="n2")
    assert len(caps) == 2 and len(unique(caps)) == 1
