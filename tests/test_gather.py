"""`collect --ray` against hostile captures and a node that answers more than it was asked.

Starting a Ray cluster costs tens of seconds (tests/test_collect.py runs the
real two-node one); here Ray's transport is replaced by calls in this
process, and everything else of the --ray path runs as it is: the scan on the
"node" (``_scan_here``), the reads and digests pinned to it (``_read_here``,
``_digest_here``), the driver's checks and DEST's writes.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from patchkit.traces import collect
from patchkit.cluster import gather
from patchkit.traces.captures import CaptureError
from patchkit.cluster.ray import ClusterError

from capturing import cli
from test_collect_untrusted import GOOD, SECRET, TRACE, assert_contained, good_copy, outside, shared, write_manifest

NODE_ID = "b" * 56
LABEL = f"{NODE_ID[:12]} (10.0.0.2)"

__all__ = ["shared"]  # the fixture, used by name


class Tasks:
    """Stands in for ``ray``: a task pinned to the node runs here when its result is asked for."""

    def __init__(self):
        self.calls = []

    def get(self, ref, timeout=None):
        return ref()


class Pinned:
    def __init__(self, fn, tasks):
        self.fn, self.tasks = fn, tasks

    def remote(self, *args):
        self.tasks.calls.append((self.fn.__name__, args))
        return lambda: self.fn(*args)


@pytest.fixture
def ray_here(monkeypatch):
    ray = pytest.importorskip("ray", reason="Ray is not installed")
    tasks = Tasks()
    monkeypatch.setattr(gather, "connect", lambda address: contextlib.nullcontext(tasks))
    monkeypatch.setattr(gather, "alive_nodes", lambda r: [{"node_id": NODE_ID, "ip": "10.0.0.2"}])
    monkeypatch.setattr(gather, "_pinned", lambda r, fn, node_id: Pinned(fn, tasks))
    monkeypatch.setattr(ray, "get_runtime_context", lambda: SimpleNamespace(get_node_id=lambda: NODE_ID))
    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: "10.0.0.2")

    def refuse(*args, **kwargs):
        raise AssertionError("the driver read a capture from its own disk")

    monkeypatch.setattr(collect.Source, "chunks", refuse)  # every byte comes through the node's tasks
    monkeypatch.setattr(collect.Source, "digest", refuse)
    return tasks


def test_collect_ray_refuses_what_leads_out_on_the_node_and_copies_the_rest(shared, tmp_path, ray_here):
    out, secret, dest = shared
    npu = out / "host_2_1700000000_ascend_pt"
    (npu / "FRAMEWORK").mkdir(parents=True)
    (npu / "profiler_info_0.json").write_text("{}")
    (npu / "FRAMEWORK" / "leak.txt").symlink_to(secret)
    bad = write_manifest(out, "bad", [(str(secret), "file", len(SECRET))], recipe="../../../x", rank=1)
    (out / "host_9.9.pt.trace.json").symlink_to(secret)
    before = outside(tmp_path, dest)
    result = cli("collect", dest, out, "--ray", "auto", code=1)
    assert "nothing was copied" in result.stderr and not dest.exists()

    result = cli("collect", dest, out, "--ray", "auto", "--skip-broken")
    assert f"skipped (--skip-broken): {bad}: the trace {secret} leads outside the capture's folder" in result.stderr
    assert f"skipped (--skip-broken): {npu / 'FRAMEWORK' / 'leak.txt'} is a symbolic link" in result.stderr
    assert f"skipped (--skip-broken): {out / 'host_9.9.pt.trace.json'} is a symbolic link" in result.stderr
    assert good_copy(dest).read_bytes() == TRACE and f"{LABEL}:{out / GOOD} ->" in result.stdout
    assert_contained(tmp_path, dest, before)
    read = [args for name, args in ray_here.calls if name == "_read_here"]
    assert read == [(str(out / GOOD), 0, collect.CHUNK, str(out))]  # only the good trace, inside its folder


def test_a_node_task_reads_nothing_through_a_link_or_outside_its_folder(tmp_path):
    root = tmp_path / "out"
    root.mkdir()
    (tmp_path / "secret").write_bytes(SECRET)
    (root / "t.pt.trace.json").write_bytes(TRACE)
    (root / "l.pt.trace.json").symlink_to(tmp_path / "secret")
    assert gather._read_here(str(root / "t.pt.trace.json"), 2, 5, str(root)) == TRACE[2:7]
    assert gather._digest_here(str(root / "t.pt.trace.json"), str(root))[0] == len(TRACE)
    for call in (lambda: gather._read_here(str(root / "l.pt.trace.json"), 0, 100, str(root)),
                 lambda: gather._digest_here(str(root / "l.pt.trace.json"), str(root)),
                 lambda: gather._read_here(str(tmp_path / "secret"), 0, 100, str(root))):
        with pytest.raises(CaptureError, match="symbolic link|leads outside"):
            call()


class Answers:
    """A node whose reads answer ``answer(offset, length)``; records what was asked."""

    def __init__(self, answer):
        self.answer, self.asked = answer, []

    def remote(self, path, offset, length, root):
        self.asked.append(offset)
        return lambda: self.answer(offset, length)


def source_answering(answer):
    src = gather.RaySource.__new__(gather.RaySource)
    src.ray, src.node, src._read = Tasks(), LABEL, Answers(answer)
    return src


def test_the_driver_takes_a_file_chunk_by_chunk_with_a_bounded_number_of_reads_in_flight():
    data = bytes(range(256)) * 40
    src = source_answering(lambda offset, length: data[offset: offset + length])
    assert b"".join(src.chunks("/n/t.json", len(data), 1000, "/n")) == data
    assert src._read.asked == list(range(0, len(data), 1000))


@pytest.mark.parametrize("answer,what", [(lambda o, n: b"x" * (n + 1), "with 1001"),
                                         (lambda o, n: "text", "with str"), (lambda o, n: None, "with NoneType")])
def test_a_node_that_answers_more_than_was_asked_is_refused(answer, what):
    src = source_answering(answer)
    size = 10 ** 15  # a listing may say anything: the reads are asked a few at a time, never all at once
    with pytest.raises(CaptureError, match=f"answered a read of 1000 bytes of /n/t.json {what}") as info:
        next(src.chunks("/n/t.json", size, 1000, "/n"))
    assert len(src._read.asked) == gather.IN_FLIGHT and info.value.hint


def test_a_read_that_fails_on_the_node_is_one_error_line():
    def fail(offset, length):
        raise CaptureError("/n/t.json is a symbolic link: never followed")

    with pytest.raises(ClusterError, match="reading /n/t.json on .*: /n/t.json is a symbolic link"):
        list(source_answering(fail).chunks("/n/t.json", 10, 1000, "/n"))


def test_collect_ray_tells_its_progress_the_nodes_searched_then_the_bytes_with_each_file_s_node(shared, ray_here):
    from progress_helpers import Recorder
    from patchkit.core.progress import BYTES

    out, _secret, dest = shared
    recorder = Recorder()
    gather.collect("auto", str(dest), [str(out)], progress=recorder)
    assert recorder.summary() == [("searching 1 node(s)", "nodes", 1, 1),
                                  ("copying 1 file(s)", BYTES, len(TRACE), len(TRACE))]
    assert recorder.stages[0]["items"] == [LABEL] and recorder.stages[1]["items"] == [f"file 1/1 from {LABEL}"]
    scanned = Recorder()
    gather.scan("auto", [str(out)], progress=scanned)
    assert scanned.summary() == [("searching 1 node(s)", "nodes", 1, 1)]


def test_collect_and_traces_ray_draw_their_bars_on_a_terminal_only(shared, ray_here, monkeypatch):
    from progress_helpers import Terminal
    from patchkit.cli import progress

    out, _secret, dest = shared
    piped = cli("collect", dest, out, "--ray", "auto")
    listed = cli("traces", out, "--ray", "auto")
    assert "searching" not in piped.stderr + listed.stderr and "%" not in piped.stderr + listed.stderr
    real = progress.stream
    monkeypatch.setattr(progress, "stream", lambda: Terminal(real()))
    again = cli("collect", dest, out, "--ray", "auto")  # everything already there
    assert again.stdout == piped.stdout.replace("copied:", "already there:")
    assert "searching 1 node(s)" in again.stderr and "1/1" in again.stderr and "copying 0 file(s)" in again.stderr
    shown = cli("traces", out, "--ray", "auto")
    assert shown.stdout == listed.stdout and "searching 1 node(s)" in shown.stderr and "1/1" in shown.stderr
    as_json = cli("traces", out, "--ray", "auto", "--json")
    assert "searching" not in as_json.stderr
