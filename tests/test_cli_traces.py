"""`patchkit traces`: the captures of a real two-rank torch.distributed run on CPU, and bad input."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys

import pytest

from patchkit.core import manifest

from capturing import cli, RECIPE, TORCH, patched, snapshot

pytest.importorskip("torch")


@pytest.fixture
def run_copy(run_dir, tmp_path):
    """A copy of the run's save path, to change."""
    dest = tmp_path / "outputs" / "traces"
    shutil.copytree(run_dir, dest)
    return dest


def rows(output):
    return [line.split() for line in output.splitlines()[1:]]


def test_traces_lists_both_ranks_newest_first(run_dir):
    out = cli("traces", str(run_dir)).stdout
    assert out.splitlines()[0].split() == ["RECIPE", "RANK", "ROLE", "STEPS", "SIZE", "NODE", "PATH"]
    listed = rows(out)
    assert sorted(r[1] for r in listed) == ["0", "1"]
    ends = {}
    for m in (json.loads(p.read_text()) for p in (run_dir / manifest.FOLDER).glob("*.json")):
        ends[str(m["rank"])] = m["end_time"]
        trace = run_dir / m["traces"][0]["name"]
        [row] = [r for r in listed if r[1] == str(m["rank"])]
        assert row[0] == RECIPE and row[2] == "-" and row[3] == "1-2"  # recipe, role, steps
        assert row[6] == socket.gethostname() and row[7] == str(trace)  # node, path
        assert " ".join(row[4:6]) == f"{trace.stat().st_size / 1024:.1f} KiB"
    shown = [ends[r[1]] for r in listed]  # newest first (two ranks may end in the same millisecond: either order)
    assert shown == sorted(shown, reverse=True)


def test_traces_json(run_dir):
    data = json.loads(cli("traces", str(run_dir), "--json").stdout)["captures"]
    assert sorted(c["rank"] for c in data) == [0, 1]
    for c in data:
        assert c["recipe"] == RECIPE and c["backend"] == "torch" and c["steps"] == {"first": 1, "last": 2, "count": 2}
        assert c["problem"] == "" and c["size"] == c["traces"][0]["size"] == os.path.getsize(c["traces"][0]["path"])
        assert c["manifest"].startswith(str(run_dir / manifest.FOLDER))


def test_without_dir_the_applied_recipes_save_paths_are_searched_from_here(run_copy, tmp_path, monkeypatch):
    patched(tmp_path / "env", *TORCH, "profiler.save_path=outputs/traces")  # recorded in this test's ledger
    monkeypatch.chdir(tmp_path)  # where the job ran: outputs/traces is relative to it
    assert sorted(r[1] for r in rows(cli("traces").stdout)) == ["0", "1"]
    monkeypatch.chdir(run_copy.parent)  # elsewhere, the relative save path names nothing (yet)
    result = cli("traces", code=1)
    assert f"no capture yet: the save path of the applied recipe does not exist yet: {run_copy.parent / 'outputs'}" \
        in result.stderr and "hint:" in result.stderr


def test_without_dir_the_runtime_index_is_searched_from_anywhere(run_copy, tmp_path, monkeypatch, patchkit_home):
    (patchkit_home / "captures").write_text(f"{run_copy}\n{tmp_path / 'gone'}\n")
    monkeypatch.chdir(tmp_path)
    assert sorted(r[1] for r in rows(cli("traces").stdout)) == ["0", "1"]


def test_an_empty_folder_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    result = cli("traces", str(tmp_path / "empty"), code=1)
    assert result.stderr.startswith(f"error: {tmp_path / 'empty'}: no capture here: no patchkit manifest, "
                                    "*.pt.trace.json file or *_ascend_pt folder under it")
    assert "hint: a capture appears in the recipe's profiler.save_path" in result.stderr
    result = cli("traces", str(tmp_path / "missing"), code=1)
    assert f"{tmp_path / 'missing'} does not exist" in result.stderr


def test_a_truncated_trace_is_listed_and_named_as_an_error(run_copy):
    before = snapshot(run_copy)
    [trace] = [p for p in run_copy.glob("*.pt.trace.json") if p.stat().st_size][:1]
    data = trace.read_bytes()
    trace.write_bytes(data[: len(data) // 2])
    result = cli("traces", str(run_copy))  # the listing worked: exit 0 (before: 1)
    assert len(rows(result.stdout)) == 2  # both still listed
    assert [r[-1] for r in rows(result.stdout) if "BROKEN" in r] == ["below)"]  # "BROKEN (see below)"
    assert f"broken: {trace}: is {len(data) // 2} bytes, {len(data)} when it was written" in result.stderr
    assert "hint:" in result.stderr and result.stderr.rstrip().endswith("2 capture(s), 1 broken (--strict: exit 1 "
                                                                        "when one is)")
    result = cli("traces", str(run_copy), "--strict", code=1)
    assert f"error: {trace}: is {len(data) // 2} bytes" in result.stderr
    assert json.loads(cli("traces", str(run_copy), "--json").stdout)["broken"] == 1
    assert {k: v for k, v in snapshot(run_copy).items() if k != trace.name} == \
        {k: v for k, v in before.items() if k != trace.name}  # nothing else touched


def test_a_truncated_trace_without_manifest_is_found_by_its_end(run_copy):
    shutil.rmtree(run_copy / manifest.FOLDER)
    trace = sorted(run_copy.glob("*.pt.trace.json"))[0]
    cut = trace.read_bytes()[:-40]
    trace.write_bytes(cut)
    result = cli("traces", str(run_copy), "--strict", code=1)
    assert f"error: {trace}: ends after {len(cut)} bytes inside " in result.stderr


def test_traces_without_manifest_are_listed_with_their_rank(run_copy):
    shutil.rmtree(run_copy / manifest.FOLDER)  # as an older patchkit, or hand-made profiler code, leaves them
    listed = rows(cli("traces", str(run_copy)).stdout)
    assert sorted((r[0], r[1], r[3]) for r in listed) == [("?", "0", "-"), ("?", "1", "-")]  # distributedInfo.rank


def test_a_manifest_from_a_newer_patchkit_is_an_error(run_copy):
    path = sorted((run_copy / manifest.FOLDER).glob("*.json"))[0]
    data = json.loads(path.read_text())
    path.write_text(json.dumps(dict(data, format=manifest.FORMAT + 1, patchkit="9.1.0")))
    result = cli("traces", str(run_copy), "--strict", code=1)
    assert (f"error: {path}: written by patchkit 9.1.0 in manifest format {manifest.FORMAT + 1}; "
            f"this patchkit") in result.stderr
    assert len(rows(result.stdout)) == 2  # its trace is not listed a second time as one without a manifest


def test_another_project_s_broken_capture_is_left_out_then_listed_with_all_and_never_fails_the_listing(
        run_copy, tmp_path, monkeypatch, patchkit_home):
    """Root's state folder is every root project's: their captures are not this one's, and their broken one is a
    row and a count, exit 0 (before: listed among this project's, and `traces` exited 1 for it)."""
    theirs = tmp_path / "theirs"
    (theirs / manifest.FOLDER).mkdir(parents=True)
    broken = theirs / manifest.FOLDER / "vm_4066.json"
    broken.write_text('{"format": 1, "kind": "patchkit-capture", "recipe": "x", "key": "x", "backend": "torch", '
                      '"rank": 0, "steps": {"first": 1, "last": 1}, "traces": [], "error": "disk full"}')
    (patchkit_home / manifest.INDEX).write_text(f"{theirs}\n{run_copy}\n{theirs}\n{theirs}/\n")
    os.chmod(patchkit_home / manifest.INDEX, 0o600)
    monkeypatch.chdir(run_copy.parent)  # this project: run_copy lies in it
    result = cli("traces")
    assert sorted(r[1] for r in rows(result.stdout)) == ["0", "1"] and str(theirs) not in result.stdout
    assert result.stderr == ("note: 1 other capture folder(s) in $PATCHKIT_HOME/captures are other projects': "
                             "`patchkit traces --all` lists them too\n")
    result = cli("traces", "--all")
    listed = rows(result.stdout)
    assert [r[1] for r in listed[:2]] in (["0", "1"], ["1", "0"]) and listed[2][-3:] == ["BROKEN", "(see", "below)"]
    assert len(listed) == 3  # their folder once, though the index names it three times
    assert f"broken: {broken}: the capture failed: disk full" in result.stderr
    assert result.stderr.rstrip().endswith("3 capture(s), 1 broken (--strict: exit 1 when one is)")
    cli("traces", "--all", "--strict", code=1)


@pytest.mark.parametrize("command", ["traces", "collect"])
def test_help_reads_as_one_text_and_says_what_the_command_does(command):
    from click.testing import CliRunner

    from patchkit.cli.commands import main

    shown = CliRunner().invoke(main, [command, "--help"]).output
    runs = [line for line in shown.split("Options:")[0].splitlines()
            if re.search(r"\S {3,}\S", line) and not line.strip().startswith("DEST/")]
    assert not runs  # before: "without a     manifest", "sha256 before     it gets its name"
    assert ("DEST is written here" in " ".join(shown.split())) == (command == "collect")  # before: in traces's too
    assert "--all" in shown and "this project's captures" in shown


@pytest.mark.parametrize("args", [["--help"], ["traces", "--help"], ["collect", "--help"]])
def test_help_imports_neither_torch_libcst_git_nor_ray(args, tmp_path):
    code = ("import sys, runpy; sys.argv = ['patchkit'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('patchkit', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'libcst', 'git', 'ray', 'yaml')))")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=tmp_path,
                          env=dict(os.environ, PATCHKIT_HOME=str(tmp_path)))
    assert done.returncode == 0 and done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr


def test_a_capture_whose_profiler_writes_its_own_report_is_listed_and_collected_from_its_manifest(
        tmp_path, clean_runtime, monkeypatch):
    """As with nsys: no trace in the save path, the manifest says which window of which process was recorded."""
    from patchkit.runtime import backends

    class OwnReport(backends.Backend):
        def probe(self):
            return {}

        def plan(self, settings, features, key):
            return backends.Plan(sections={"window_open": "pass\n"}, trace_dir=None)

    monkeypatch.setitem(backends._REGISTRY, "ownreport", OwnReport())
    out = tmp_path / "out"
    clean_runtime.configure("own", backend="ownreport", save_path=str(out), wait=1, warmup=0, active=2)
    for _ in range(4):
        clean_runtime.step("own")
    [path] = (out / manifest.FOLDER).glob("*.json")
    assert path.name == f"own_{socket.gethostname()}_{os.getpid()}_steps1-2.json"
    assert rows(cli("traces", str(out)).stdout) == [
        ["own", "0", "-", "1-2", "(ownreport", "report)", socket.gethostname(), str(path)]]
    dest = tmp_path / "collected"
    result = cli("collect", str(dest), str(out))
    assert "(the ownreport report itself is where ownreport wrote it)" in result.stdout
    assert json.loads((dest / "own" / manifest.FOLDER / f"rank0_{path.name}").read_text())["steps"]["first"] == 1


def test_collect_shows_a_bar_of_the_bytes_copied_only_on_a_terminal(run_dir, tmp_path, monkeypatch):
    """Piped: stderr as it was, no bar.  On a terminal: the bar on stderr, the same stdout, byte for byte."""
    dest = tmp_path / "collected"
    piped = cli("collect", str(dest), str(run_dir))
    assert "copying" not in piped.stderr and "%" not in piped.stderr
    shutil.rmtree(dest)
    from progress_helpers import Terminal
    from patchkit.cli import progress
    from patchkit.cli.progress import size_text

    real = progress.stream
    monkeypatch.setattr(progress, "stream", lambda: Terminal(real()))
    shown = cli("collect", str(dest), str(run_dir))
    assert shown.stdout == piped.stdout
    size = sum(p.stat().st_size for p in run_dir.glob("*.pt.trace.json"))
    assert "copying 2 file(s)" in shown.stderr and "100%" in shown.stderr
    assert f"{size_text(size)}/{size_text(size)}" in shown.stderr
    assert f"file 2/2 from {socket.gethostname()}" in shown.stderr
    assert shown.stderr.endswith(piped.stderr)  # the bar's line ends before collect's own lines


@pytest.mark.parametrize("args", [["traces"], ["collect", "dest"]])
def test_all_is_refused_with_ray_each_node_looks_at_this_project_s_folders(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli(*args, "--all", "--ray", "auto", code=2)
    assert "--all is not available with --ray" in result.output and not (tmp_path / "dest").exists()
