"""traces.layout: where each capture's files go in a collect's DEST, and the plan of files to copy.

tests/test_collect.py copies real captures with it; tests/test_collect_untrusted.py gives it hostile names.
"""

from __future__ import annotations

import pytest

from patchkit.core import manifest
from patchkit.traces.captures import Capture, CaptureError, Trace
from patchkit.traces.layout import LINK, PART, dest_name, dest_path, group_of, plan, screen


def cap(folder="/run/traces", recipe="verl-fsdp-update", role="", rank=0, traces=(), node="h1"):
    return Capture(folder, folder + "/patchkit-manifests/x.json" if recipe else None, recipe, recipe, role, rank,
                   "torch", 1, 2, None, None, 0.0, node, 1, tuple(traces), "", node)


def trace(name, size=10, kind="file", folder="/run/traces"):
    return Trace(f"{folder}/{name}", name, kind, size)


def test_a_capture_s_folder_is_its_recipe_and_role_or_the_folder_its_trace_was_in():
    assert group_of(cap()) == "verl-fsdp-update"
    assert group_of(cap(role="ref")) == "verl-fsdp-update.ref"
    assert group_of(cap(recipe="", folder="/x/my traces/")) == "my_traces"


def test_torch_traces_are_named_by_rank_once_and_npu_folders_keep_their_names():
    assert dest_name(cap(rank=3), "h_1.pt.trace.json") == "rank3_h_1.pt.trace.json"
    assert dest_name(cap(rank=3), "rank3_h_1.pt.trace.json") == "rank3_h_1.pt.trace.json"
    assert dest_name(cap(rank=3), "h_1_ascend_pt") == "h_1_ascend_pt"
    assert dest_name(cap(rank=None), "h_1.pt.trace.json") == "h_1.pt.trace.json"
    assert dest_name(cap(rank=None), "a/b/x" + PART) == "x" + PART + "_"
    assert dest_name(cap(rank=None), manifest.FOLDER) == manifest.FOLDER + "_"
    assert dest_path("/d", cap(), "t.pt.trace.json") == "/d/verl-fsdp-update/rank0_t.pt.trace.json"


def test_the_plan_lists_each_file_once_with_its_size_and_notes_two_captures_of_one_rank():
    a = cap(traces=[trace("a.pt.trace.json", 7)])
    b = cap(traces=[trace("b.pt.trace.json", 5)])
    items, notes = plan([a, b, a], lambda c, path: [])
    assert [(i.dest, i.size, i.capture) for i in items] == [
        ("verl-fsdp-update/rank0_a.pt.trace.json", 7, 0), ("verl-fsdp-update/rank0_b.pt.trace.json", 5, 1)]
    assert len(notes) == 1 and "rank 0 has 3 captures" in notes[0]


def test_a_folder_trace_is_planned_file_by_file_and_two_different_files_for_one_name_stop_it():
    npu = cap(traces=[trace("h_ascend_pt", -1, "folder")])
    items, _ = plan([npu], lambda c, path: [("FRAMEWORK/", -1), ("FRAMEWORK/a.bin", 4)])
    assert [(i.dest, i.size, i.root) for i in items] == [  # -1: a folder, made in DEST
        ("verl-fsdp-update/h_ascend_pt/FRAMEWORK", -1, "/run/traces/h_ascend_pt"),
        ("verl-fsdp-update/h_ascend_pt/FRAMEWORK/a.bin", 4, "/run/traces/h_ascend_pt")]
    other = cap(folder="/other", traces=[trace("h_ascend_pt", -1, "folder", folder="/other")], node="h2")
    with pytest.raises(CaptureError, match="two different files would both be"):
        plan([npu, other], lambda c, path: [("a.bin", 4 if c.node == "h1" else 5)])


def test_a_folder_trace_holding_a_link_or_a_path_out_is_refused_before_planning():
    npu = cap(traces=[trace("h_ascend_pt", -1, "folder")])
    listings = {}
    assert screen(npu, lambda c, path: [("a.bin", 4)], listings) == "" and listings
    assert "symbolic link" in screen(npu, lambda c, path: [("a.bin", LINK)], {})
    assert "not a file inside it" in screen(npu, lambda c, path: [("../a.bin", 4)], {})
    outside = cap(traces=[Trace("/etc/passwd", "passwd", "file", 4)])
    assert "outside the capture's folder" in screen(outside, lambda c, path: [], {})
