"""Finding captures and their ranks: the layouts summary, compare and analyse accept, and the errors for bad input."""

from __future__ import annotations

import json

import pytest

from patchkit.core.errors import TraceError
from patchkit.traces.files import MANIFESTS, find

from conftest import snapshot

STEP = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1, "ts": 0, "dur": 10}


def trace(path, distributed=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"schemaVersion": 1, "traceEvents": [STEP]}
    if distributed is not None:
        data = {"schemaVersion": 1, "distributedInfo": {"backend": "gloo", "rank": distributed, "world_size": 2},
                "traceEvents": [STEP]}
    path.write_text(json.dumps(data))
    return path


def ascend(folder, rank=None):
    (folder / "FRAMEWORK").mkdir(parents=True)
    (folder / ("profiler_info.json" if rank is None else f"profiler_info_{rank}.json")).write_text("{}")
    return folder


def manifest(folder, trace_name, **fields):
    record = {"format": 1, "kind": "patchkit-capture", "patchkit": "0.1.0", "recipe": "verl-fsdp-update",
              "key": "verl-fsdp-update", "role": "", "backend": "torch", "rank": 0,
              "steps": {"first": 0, "last": 0, "count": 1}, "traces": [{"name": trace_name, "kind": "file"}]}
    record.update(fields)
    (folder / MANIFESTS).mkdir(exist_ok=True)
    path = folder / MANIFESTS / (trace_name.split(".pt.trace")[0] + ".json")
    path.write_text(json.dumps(record, indent=2))
    return path


def test_a_run_folder_with_rank_named_subfolders_gives_one_capture_per_rank(tmp_path):
    trace(tmp_path / "run" / "rank1" / "host_2.1.pt.trace.json")
    trace(tmp_path / "run" / "rank0" / "host_1.1.pt.trace.json")
    captures = find(str(tmp_path / "run"))
    assert [(c.rank, c.rank_from, c.format) for c in captures] == [(0, "path name", "torch"), (1, "path name", "torch")]
    assert [c.label for c in captures] == ["rank 0", "rank 1"]


def test_rank_comes_from_the_manifest_first_then_the_trace_then_the_name(tmp_path):
    trace(tmp_path / "rank7_a.pt.trace.json", distributed=3)
    manifest(tmp_path, "rank7_a.pt.trace.json", rank=5, role="ref")
    trace(tmp_path / "rank7_b.pt.trace.json", distributed=3)
    trace(tmp_path / "rank7_d.pt.trace.json", distributed=2)
    manifest(tmp_path, "rank7_d.pt.trace.json", rank=None, role="actor")  # no rank in it: the role still counts
    trace(tmp_path / "rank7_c.pt.trace.json.gz").unlink()
    import gzip

    with gzip.open(tmp_path / "rank7_c.pt.trace.json.gz", "wt") as handle:
        json.dump({"traceEvents": [STEP]}, handle)
    got = {c.path.rsplit("/", 1)[1]: (c.rank, c.role, c.rank_from) for c in find(str(tmp_path))}
    assert got == {"rank7_a.pt.trace.json": (5, "ref", "manifest"), "rank7_b.pt.trace.json": (3, "", "trace"),
                   "rank7_c.pt.trace.json.gz": (7, "", "path name"), "rank7_d.pt.trace.json": (2, "actor", "trace")}
    assert [c.label for c in find(str(tmp_path)) if c.role] == ["rank 2 (actor)", "rank 5 (ref)"]


def test_a_rank_of_5000_digits_in_a_trace_is_no_rank_and_no_traceback(tmp_path):
    path = tmp_path / "rank4_a.pt.trace.json"
    path.write_text('{"distributedInfo": {"backend": "nccl", "rank": ' + "9" * 5000 + '}, "traceEvents": []}')
    trace(tmp_path / "rank2_b.pt.trace.json", distributed=123456789012345678)
    got = {c.path.rsplit("/", 1)[1]: (c.rank, c.rank_from) for c in find(str(tmp_path))}
    assert got == {"rank4_a.pt.trace.json": (4, "path name"), "rank2_b.pt.trace.json": (123456789012345678, "trace")}


def test_ascend_folders_take_their_rank_from_profiler_info_and_are_not_searched_inside(tmp_path):
    ascend(tmp_path / "node1" / "host_12_20260101000000000_ascend_pt", rank=1)
    ascend(tmp_path / "node0" / "host_11_20260101000000000_ascend_pt", rank=0)
    trace(tmp_path / "node0" / "host_11_20260101000000000_ascend_pt" / "x.pt.trace.json")  # inside: not a capture
    captures = find(str(tmp_path))
    assert [(c.rank, c.format, c.rank_from) for c in captures] == [(0, "ascend", "profiler_info"),
                                                                    (1, "ascend", "profiler_info")]


@pytest.mark.parametrize("inner", ["", "ASCEND_PROFILER_OUTPUT"])
def test_one_ascend_folder_or_its_output_folder_is_one_capture(tmp_path, inner):
    folder = ascend(tmp_path / "h_1_20260101000000000_ascend_pt", rank=2)
    (folder / "ASCEND_PROFILER_OUTPUT").mkdir()
    (capture,) = find(str(folder / inner) if inner else str(folder))
    assert capture.path == str(folder) and capture.rank == 2


def test_one_trace_file_is_one_capture_whatever_its_name(tmp_path):
    (capture,) = find(str(trace(tmp_path / "mine.json")))
    assert capture.format == "torch" and capture.rank is None and capture.label == "mine.json"


def test_an_empty_folder_is_an_error_that_says_what_to_give(tmp_path):
    with pytest.raises(TraceError) as caught:
        find(str(tmp_path))
    assert str(caught.value.where) == str(tmp_path)
    assert "no *.pt.trace.json[.gz] file and no *_ascend_pt folder" in caught.value.message
    assert "save_path" in caught.value.hint


def test_a_missing_path_is_an_error(tmp_path):
    with pytest.raises(TraceError, match="no such file or folder"):
        find(str(tmp_path / "nowhere"))


def test_a_manifest_from_a_newer_patchkit_is_refused_and_nothing_changes(tmp_path):
    trace(tmp_path / "h_1.1.pt.trace.json")
    path = manifest(tmp_path, "h_1.1.pt.trace.json", format=2, patchkit="9.0.0")
    before = snapshot(tmp_path)
    with pytest.raises(TraceError) as caught:
        find(str(tmp_path))
    rendered = caught.value.render()
    assert rendered.startswith(f"{path}:1: written by patchkit 9.0.0 in manifest format 2; this patchkit")
    assert "hint: upgrade patchkit" in rendered
    assert snapshot(tmp_path) == before


def test_a_cut_off_manifest_names_its_line_and_column(tmp_path):
    trace(tmp_path / "h_1.1.pt.trace.json")
    path = manifest(tmp_path, "h_1.1.pt.trace.json")
    path.write_text(path.read_text()[:40])
    with pytest.raises(TraceError) as caught:
        find(str(tmp_path))
    assert caught.value.where.path == str(path) and caught.value.where.line is not None
    assert "not a readable manifest (cut off" in caught.value.message


def test_other_json_in_the_manifest_folder_is_not_a_manifest(tmp_path):
    trace(tmp_path / "rank4.pt.trace.json")
    (tmp_path / MANIFESTS).mkdir()
    (tmp_path / MANIFESTS / "notes.json").write_text('{"hello": 1}')
    (capture,) = find(str(tmp_path))
    assert (capture.rank, capture.rank_from) == (4, "path name")


def test_links_found_in_a_shared_folder_are_not_followed(tmp_path):
    """A link planted in a shared outputs folder (to a root-only file, to another folder) is not a capture."""
    elsewhere = tmp_path / "elsewhere"
    trace(elsewhere / "secret.pt.trace.json")
    ascend(elsewhere / "x_ascend_pt")
    run = tmp_path / "run"
    trace(run / "host_1.1.pt.trace.json")
    (run / "planted.pt.trace.json").symlink_to(elsewhere / "secret.pt.trace.json")
    (run / "planted_ascend_pt").symlink_to(elsewhere / "x_ascend_pt")
    assert [c.path for c in find(str(run))] == [str(run / "host_1.1.pt.trace.json")]
    assert [c.path for c in find(str(run / "planted.pt.trace.json"))] == [str(run / "planted.pt.trace.json")]  # named
