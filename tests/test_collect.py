"""`patchkit collect`: real captures gathered into one folder, checked, never overwritten, resumable; and --ray."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from patchkit.traces import collect as collect_mod
from patchkit.core import manifest

from capturing import cli, REPO, RECIPE, TORCH, job_env, patched, snapshot, train
from doubles import npu_double_env
from raycluster import two_nodes

pytest.importorskip("torch")


@pytest.fixture
def run_copy(run_dir, tmp_path):
    dest = tmp_path / "src" / "traces"
    shutil.copytree(run_dir, dest)
    return dest


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def by_rank(folder):
    """rank -> (trace, manifest) of a save path."""
    out = {}
    for p in (folder / manifest.FOLDER).glob("*.json"):
        m = json.loads(p.read_text())
        out[m["rank"]] = (folder / m["traces"][0]["name"], m)
    return out


def journal(dest):
    lines = [json.loads(ln) for ln in (dest / ".patchkit-collect").read_text().splitlines()]
    assert lines[0] == {"kind": "patchkit-collect", "format": 1}
    return lines[1:]


def test_collect_gathers_both_ranks_rank_named_with_their_manifests(run_dir, tmp_path):
    dest = tmp_path / "collected"
    result = cli("collect", str(dest), str(run_dir))
    group = dest / RECIPE
    for rank, (trace, m) in by_rank(run_dir).items():
        copy = group / f"rank{rank}_{trace.name}"
        assert copy.read_bytes() == trace.read_bytes()
        assert f"copied: {RECIPE} rank {rank} steps 1-2: " in result.stdout
        assert f":{trace} -> {copy} (" in result.stdout  # what, from where, to where
        [(kept, name)] = [(json.loads(p.read_text()), p.name) for p in (group / manifest.FOLDER).glob(f"rank{rank}_*")]
        assert name == f"rank{rank}_{trace.name[:-len('.pt.trace.json')]}.json"
        assert kept["traces"] == [dict(m["traces"][0], name=copy.name)]
        assert kept["collected_from"]["traces"] == [str(trace)] and kept["steps"] == m["steps"]
    assert sorted(p.name for p in group.iterdir()) == sorted(
        [manifest.FOLDER] + [f"rank{r}_{t.name}" for r, (t, _) in by_rank(run_dir).items()])
    # Holistic Trace Analysis reads every *.json of the folder: each is a trace with its distributedInfo.rank
    for p in group.glob("*.json"):
        assert json.loads(p.read_text())["distributedInfo"]["rank"] == int(p.name[4])
    assert "2 file(s) copied" in result.stderr and f"TraceAnalysis(trace_dir=\"{group}\")" in result.stderr
    entries = journal(dest)
    assert sorted(e["file"] for e in entries) == sorted(f"{RECIPE}/{p.name}" for p in group.glob("*.json"))
    assert all(e["sha256"] == sha(dest / e["file"]) for e in entries)
    # `patchkit traces` reads the collected folder too
    listed = cli("traces", str(dest)).stdout
    assert sorted(line.split()[1] for line in listed.splitlines()[1:]) == ["0", "1"]

    before = snapshot(dest)
    again = cli("collect", str(dest), str(run_dir))  # nothing new: nothing written
    assert "0 file(s) copied (0 B), 2 already there" in again.stderr
    assert snapshot(dest) == before


def test_collect_tells_its_progress_the_bytes_to_copy_and_each_file_with_its_node(run_dir, tmp_path):
    from progress_helpers import Recorder
    from patchkit.core.progress import BYTES

    host = collect_mod.collect_here(str(tmp_path / "d"), [str(run_dir)]).files[0].node
    recorder = Recorder()
    collect_mod.collect_here(str(tmp_path / "collected"), [str(run_dir)], progress=recorder)
    size = sum(p.stat().st_size for p in run_dir.glob("*.pt.trace.json"))
    assert recorder.summary() == [("copying 2 file(s)", BYTES, size, size)]
    assert recorder.stages[0]["items"] == [f"file 1/2 from {host}", f"file 2/2 from {host}"]
    again = Recorder()
    collect_mod.collect_here(str(tmp_path / "collected"), [str(run_dir)], progress=again)
    assert again.summary() == [("copying 0 file(s)", BYTES, 0, 0)]  # both already there: nothing to copy


def test_an_interrupted_collect_completes_when_run_again(run_copy, tmp_path):
    """SIGKILL in the middle of the second file; the next run keeps the first and copies the second anew."""
    dest = tmp_path / "collected"
    slow = textwrap.dedent(f"""
        import time
        from patchkit.traces import collect
        plain = collect.Source.chunks
        def chunks(self, *args):
            for data in plain(self, *args):
                time.sleep(0.01)
                yield data
        collect.Source.chunks = chunks
        collect.CHUNK = 4096
        collect.collect_here({str(dest)!r}, [{str(run_copy)!r}])
    """)
    proc = subprocess.Popen([sys.executable, "-c", slow], env=dict(os.environ, PYTHONPATH=str(REPO)))
    group = dest / RECIPE
    deadline = time.time() + 120
    while time.time() < deadline:
        done = list(group.glob("*.pt.trace.json")) if group.exists() else []
        parts = list(group.glob("*.patchkit-part")) if group.exists() else []
        if len(done) == 1 and parts and parts[0].stat().st_size > 0:
            break
        assert proc.poll() is None, "the copy finished before it could be interrupted"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    [part] = list(group.glob("*.patchkit-part"))
    assert not (group / manifest.FOLDER).exists() or len(list((group / manifest.FOLDER).iterdir())) < 2

    result = cli("collect", str(dest), str(run_copy))
    assert "1 file(s) copied" in result.stderr and "1 already there" in result.stderr
    assert not part.exists() and not list(dest.rglob("*.patchkit-part"))
    for rank, (trace, _m) in by_rank(run_copy).items():
        assert (group / f"rank{rank}_{trace.name}").read_bytes() == trace.read_bytes()
    files = [e["file"] for e in journal(dest)]
    assert sorted(files) == sorted(set(files)) and len(files) == 2  # each file once
    assert len(list((group / manifest.FOLDER).glob("*.json"))) == 2


def test_npu_captures_keep_their_ascend_folders_for_msprof_analyze(tmp_path):
    out = tmp_path / "npu"
    site = patched(tmp_path, "schedule.wait=1", "schedule.active=2", f"profiler.save_path={out}")
    for rank in (0, 1):
        train(site, tmp_path / f"job{rank}", updates=1, env=dict(npu_double_env("2.14.0"), RANK=str(rank)))
    dest = tmp_path / "collected"
    result = cli("collect", str(dest), str(out))
    group = dest / RECIPE
    sources = sorted(out.glob("*_ascend_pt"))
    assert sorted(p.name for p in group.glob("*_ascend_pt")) == [p.name for p in sources]
    for src in sources:
        assert snapshot(group / src.name) == snapshot(src)
        assert sorted(p.name for p in (group / src.name).glob("profiler_info_*.json")) in (
            ["profiler_info_0.json"], ["profiler_info_1.json"])  # the rank msprof-analyze reads
    assert f"msprof-analyze cluster -d {group}" in result.stderr
    assert len(list((group / manifest.FOLDER).glob("*_ascend_pt.json"))) == 2


def test_dest_that_holds_other_files_is_refused_and_left_alone(run_dir, tmp_path):
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("my own file")
    before = snapshot(dest)
    result = cli("collect", str(dest), str(run_dir), code=1)
    assert f"error: {dest}: {dest} already holds files that patchkit collect did not write" in result.stderr
    assert "hint: choose a new or empty folder" in result.stderr
    assert snapshot(dest) == before


def test_a_different_file_in_the_way_is_never_overwritten(run_dir, tmp_path):
    dest = tmp_path / "collected"
    cli("collect", str(dest), str(run_dir))
    [copy] = sorted((dest / RECIPE).glob("rank0_*.pt.trace.json"))
    copy.write_text('{"changed": "by hand"}')
    before = snapshot(dest)
    result = cli("collect", str(dest), str(run_dir), code=1)
    assert f"error: {copy}: {copy} is already there and differs from" in result.stderr
    assert "nothing was written" in result.stderr
    assert snapshot(dest) == before


def test_a_truncated_trace_stops_the_collect_before_anything_is_written(run_copy, tmp_path):
    trace, _m = by_rank(run_copy)[1]
    trace.write_bytes(trace.read_bytes()[:1000])
    dest = tmp_path / "collected"
    result = cli("collect", str(dest), str(run_copy), code=1)
    assert f"error: {trace}: is 1000 bytes" in result.stderr and "nothing was copied" in result.stderr
    assert "--skip-broken" in result.stderr
    assert not dest.exists()

    result = cli("collect", str(dest), str(run_copy), "--skip-broken")
    assert f"skipped (--skip-broken): {trace}: is 1000 bytes" in result.stderr
    assert [p.name for p in (dest / RECIPE).glob("*.pt.trace.json")] == [f"rank0_{by_rank(run_copy)[0][0].name}"]


def test_a_newer_manifest_or_an_empty_folder_stops_the_collect(run_copy, tmp_path):
    dest = tmp_path / "collected"
    (tmp_path / "empty").mkdir()
    result = cli("collect", str(dest), str(tmp_path / "empty"), code=1)
    assert f"error: {tmp_path / 'empty'}: no capture here" in result.stderr and not dest.exists()

    path = sorted((run_copy / manifest.FOLDER).glob("*.json"))[0]
    path.write_text(json.dumps(dict(json.loads(path.read_text()), format=manifest.FORMAT + 1)))
    result = cli("collect", str(dest), str(run_copy), code=1)
    assert f"error: {path}: written by patchkit" in result.stderr and not dest.exists()


def test_dest_inside_the_searched_folder_is_not_collected_again(run_copy):
    dest = run_copy / "collected"
    cli("collect", str(dest), str(run_copy))
    again = cli("collect", str(dest), str(run_copy))
    assert "2 already there; 2 capture(s)" in again.stderr


# ---------------------------------------------------------------- a two-node Ray cluster

class Node:
    def __init__(self, name, base, rank):
        self.name, self.rank = name, rank
        self.home = base / f"{name}-patchkit-home"
        self.job = base / f"{name}-job"  # the training job's working directory on this node
        self.home.mkdir()
        self.id = ""

    @property
    def env(self):
        return {"PATCHKIT_HOME": str(self.home)}


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("ray-nodes")
    a, b = Node("a", base, 0), Node("b", base, 1)
    with two_nodes(a, b) as address:
        yield address, a, b, base


@pytest.fixture(scope="module")
def captured_on_each_node(ray_cluster):
    """The patched sample trained on each node by a task pinned to it, in that node's own job folder.

    The save path is relative (outputs/traces): each node's job writes its own,
    and only that node's index ($PATCHKIT_HOME/captures) names it.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    address, a, b, base = ray_cluster
    site = patched(base, *TORCH, "profiler.save_path=outputs/traces")
    ray.init(address=address, log_to_driver=False)
    try:
        runs = []
        for n in (a, b):
            n.job.mkdir()
            env = job_env(site, dict(n.env, RANK=str(n.rank)))
            run = ray.remote(subprocess.run).options(
                num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(n.id, soft=False))
            runs.append(run.remote([sys.executable, "-m", "patchkit.demo.train", "--updates", "2"], cwd=str(n.job),
                                   env=env, capture_output=True, text=True, timeout=300))
        for done in ray.get(runs):
            assert done.returncode == 0, done.stderr
    finally:
        ray.shutdown()
    return address, a, b


@pytest.fixture
def no_local_reads(monkeypatch):
    """With --ray the driver reads no source file itself: every byte comes from a task on the node."""
    def refuse(*args, **kwargs):
        raise AssertionError("the driver read a capture from its own disk")

    monkeypatch.setattr(collect_mod.Source, "chunks", refuse)
    monkeypatch.setattr(collect_mod.Source, "digest", refuse)
    monkeypatch.setenv("PATCHKIT_RAY_TIMEOUT", "120")


def test_traces_ray_lists_the_captures_of_both_nodes(captured_on_each_node, monkeypatch):
    address, a, b = captured_on_each_node
    monkeypatch.chdir(a.job.parent)  # the project's folder: each node's job folder lies in it
    data = json.loads(cli("traces", "--ray", address, "--json").stdout)
    assert {(c["rank"], c["node"][:12], c["folder"]) for c in data["captures"]} == {
        (n.rank, n.id[:12], str(n.job / "outputs" / "traces")) for n in (a, b)}
    assert all(node["ok"] for node in data["nodes"])
    table = cli("traces", "--ray", address).stdout
    assert sum(a.id[:12] in line or b.id[:12] in line for line in table.splitlines()) == 2


def test_collect_ray_gathers_the_captures_written_on_both_nodes(captured_on_each_node, tmp_path, no_local_reads,
                                                                monkeypatch):
    address, a, b = captured_on_each_node
    monkeypatch.chdir(a.job.parent)  # the project's folder: each node's job folder lies in it
    monkeypatch.setattr(collect_mod, "CHUNK", 64 * 1024)  # several reads in flight per trace
    dest = tmp_path / "collected"
    result = cli("collect", str(dest), "--ray", address)
    group = dest / RECIPE
    for n in (a, b):
        [(trace, m)] = by_rank(n.job / "outputs" / "traces").values()
        copy = group / f"rank{n.rank}_{trace.name}"
        assert copy.read_bytes() == trace.read_bytes()
        assert f"{n.id[:12]} (" in result.stdout and f"{trace} -> {copy}" in result.stdout
        [kept] = [json.loads(p.read_text()) for p in (group / manifest.FOLDER).glob(f"rank{n.rank}_*.json")]
        assert kept["collected_from"]["node"].startswith(n.id[:12]) and kept["steps"] == m["steps"]
    assert "2 file(s) copied" in result.stderr
    again = cli("collect", str(dest), "--ray", address)
    assert "0 file(s) copied (0 B), 2 already there" in again.stderr
