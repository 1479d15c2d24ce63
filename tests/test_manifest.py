"""The manifest the runtime writes next to each capture (patchkit.core.manifest), from real runs on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchkit.core import manifest
from patchkit.core.folders import Untrusted
from patchkit import __version__
from patchkit.state.ledger import home as ledger_home

from capturing import REPO, RECIPE, TORCH, patched, train, train_ranks
from doubles import npu_double_env

pytest.importorskip("torch")


def manifests(folder: Path):
    return {p.name: json.loads(p.read_text()) for p in sorted((folder / manifest.FOLDER).glob("*.json"))}


def test_a_closed_window_writes_its_manifest_next_to_the_trace(tmp_path, patchkit_home):
    out = tmp_path / "job" / "outputs" / "traces"
    site = patched(tmp_path, *TORCH, "profiler.save_path=outputs/traces")  # relative: to the job's directory
    done = train(site, tmp_path / "job", updates=2)
    [trace] = sorted(out.glob("*.pt.trace.json"))
    [(name, m)] = manifests(out).items()
    assert name == trace.name[: -len(".pt.trace.json")] + ".json"
    assert m["format"] == manifest.FORMAT and m["kind"] == "patchkit-capture" and m["patchkit"] == __version__
    assert (m["recipe"], m["key"], m["role"], m["backend"], m["rank"]) == (RECIPE, RECIPE, "", "torch", 0)
    assert m["pid"] == int(trace.name.split(".")[0].rsplit("_", 1)[1]) and m["host"] == os.uname().nodename
    assert m["steps"] == {"first": 1, "last": 2, "count": 2}  # wait=1 active=2, in the recipe's own count
    assert "recording steps 1-2" in done.stderr
    assert m["start_time"] <= m["end_time"] and m["cut_short"] == ""
    assert m["save_path"] == str(out)  # made absolute where the job ran
    assert m["traces"] == [{"name": trace.name, "kind": "file", "size": trace.stat().st_size, "files": 1}]
    assert {k: m["settings"][k] for k in ("backend", "wait", "warmup", "active", "repeat", "save_path")} == {
        "backend": "torch", "wait": 1, "warmup": 0, "active": 2, "repeat": 1, "save_path": "outputs/traces"}
    # the runtime's index lets `patchkit traces` find it from anywhere
    assert (patchkit_home / "captures").read_text() == f"{out}\n"


def test_each_rank_names_only_its_own_trace_in_a_shared_folder(tmp_path):
    """Ranks on one node share the save path: each manifest (and each window's line) is its own process's."""
    out = tmp_path / "job" / "out"
    site = patched(tmp_path, *TORCH, f"profiler.save_path={out}")
    logs = train_ranks(site, tmp_path / "job")
    found = manifests(out)
    assert sorted(m["rank"] for m in found.values()) == [0, 1]
    for m in found.values():
        [t] = m["traces"]
        assert t["name"].startswith(f"{m['host']}_{m['pid']}.")
    for rank, (_stdout, stderr) in enumerate(logs):
        [closed] = [ln for ln in stderr.splitlines() if "window closed" in ln]
        mine = next(m for m in found.values() if m["rank"] == rank)
        assert closed.endswith(str(out / mine["traces"][0]["name"]))  # not the other rank's trace too


def test_a_role_is_in_the_manifest(tmp_path):
    out = tmp_path / "out"
    site = patched(tmp_path, "role=ref", "backend=torch", f"profiler.save_path={out}", recipe="verl-fsdp-logprob")
    train(site, tmp_path / "job", updates=1)
    [m] = manifests(out).values()
    assert (m["recipe"], m["key"], m["role"]) == ("verl-fsdp-logprob", "verl-fsdp-logprob/ref", "ref")
    assert "_ref." in m["traces"][0]["name"]  # torch's worker name carries the role


CUT_SHORT = textwrap.dedent("""
    import sys, torch
    import patchkit.runtime as rt
    rt.configure("cut", backend="torch", contents=("cpu",), save_path=sys.argv[1], wait=1, warmup=0, active=10,
                 repeat=1)
    x = torch.randn(8, 8)
    for _ in range(4):  # steps 0-3: the window (steps 1-10) is open when the process ends
        x = torch.tanh(x @ x)
        rt.step("cut")
""")


def test_a_window_cut_short_at_exit_has_its_manifest(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", CUT_SHORT, str(out)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr
    [m] = manifests(out).values()
    assert m["steps"] == {"first": 1, "last": 3, "count": 3} and m["cut_short"] == "process exit"
    assert (out / m["traces"][0]["name"]).is_file()


def test_npu_capture_manifest_names_the_ascend_folder(tmp_path):
    out = tmp_path / "npu"
    site = patched(tmp_path, "schedule.wait=1", "schedule.active=2", f"profiler.save_path={out}")
    train(site, tmp_path / "job", updates=1, env=npu_double_env("2.14.0", strict=True))
    [folder] = sorted(out.glob("*_ascend_pt"))
    [(name, m)] = manifests(out).items()
    assert name == folder.name + ".json" and m["backend"] == "npu"
    [t] = m["traces"]
    assert (t["name"], t["kind"]) == (folder.name, "folder")
    assert (t["size"], t["files"]) == manifest.measure(str(folder)) and t["files"] > 1


def test_a_manifest_that_cannot_be_written_is_one_line_and_the_job_runs_on(tmp_path, clean_runtime, capsys):
    import torch

    out = tmp_path / "out"
    out.mkdir()
    (out / manifest.FOLDER).write_text("a file where the folder would go")
    rt = clean_runtime
    rt.configure("m", backend="torch", contents=("cpu",), save_path=str(out), wait=0, warmup=0, active=1)
    x = torch.randn(4, 4)
    for _ in range(3):
        x = x @ x
        rt.step("m")
    said = [ln.replace(str(tmp_path), "TMP") for ln in capsys.readouterr().err.splitlines()]
    [line] = [ln for ln in said if "manifest" in ln]  # one line; the window's own lines as always
    assert len([ln for ln in said if ln.startswith("[patchkit]")]) == 3
    assert line == "[patchkit] m: the capture's manifest was not written: TMP/out/patchkit-manifests: is not a folder"
    assert len(list(out.glob("*.pt.trace.json"))) == 1 and rt.report()[0]["error"] is None  # the capture is fine

    rt.reset()
    rt.set_strict(True)  # PATCHKIT_STRICT=1: raised, for tests
    rt.configure("m", backend="torch", contents=("cpu",), save_path=str(out), wait=0, warmup=0, active=1)
    rt.step("m")
    with pytest.raises(Untrusted, match="is not a folder"):
        rt.step("m")


def test_a_written_manifest_is_never_said_to_be_unwritten(tmp_path, clean_runtime, capsys, monkeypatch):
    """The list of capture folders in $PATCHKIT_HOME failing to update is a line of its own: the manifest is there."""
    import torch

    home = tmp_path / "home"
    home.write_text("a file where the state folder would go")
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    out = tmp_path / "out"
    clean_runtime.configure("m", backend="torch", contents=("cpu",), save_path=str(out), wait=0, warmup=0, active=1)
    x = torch.randn(4, 4)
    for _ in range(3):
        x = x @ x
        clean_runtime.step("m")
    [path] = (out / manifest.FOLDER).glob("*.json")
    assert manifest.load(str(path))[0]["error"] == ""
    said = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("[patchkit]")]
    assert not any("not written" in ln for ln in said)
    [line] = [ln for ln in said if "the capture's manifest" in ln]
    assert line.startswith(f"[patchkit] m: the capture's manifest {path} was written, but patchkit's list of capture "
                           f"folders could not be updated ({home}: refusing to use the state folder: it is not a folder)")
    assert line.endswith(f"; `patchkit traces {out}` finds it")


def test_write_is_atomic_and_never_replaces_a_manifest(tmp_path):
    first = manifest.write(str(tmp_path), "cap", {"n": 1})
    second = manifest.write(str(tmp_path), "cap", {"n": 2})
    assert (Path(first).name, Path(second).name) == ("cap.json", "cap-2.json")
    assert json.loads(Path(first).read_text()) == {"n": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cap-2.json", "cap.json"]  # no temporary file left


def test_the_index_lists_each_save_path_once(tmp_path, monkeypatch):
    monkeypatch.setattr(manifest, "_noted", set())
    for _ in range(2):
        manifest.note_folder(str(tmp_path / "a"))
    manifest.note_folder(str(tmp_path / "b"))
    monkeypatch.setattr(manifest, "_noted", set())  # another process
    manifest.note_folder(str(tmp_path / "a"))
    assert manifest.indexed_folders() == [str(tmp_path / "a"), str(tmp_path / "b")]


def test_home_is_the_ledgers(monkeypatch, tmp_path):
    for env in ({"PATCHKIT_HOME": str(tmp_path / "h")}, {"PATCHKIT_HOME": "", "XDG_STATE_HOME": str(tmp_path)}):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        assert manifest.home() == str(ledger_home())


def test_load_refuses_a_newer_format_and_a_cut_off_manifest(tmp_path):
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"format": manifest.FORMAT + 1, "kind": "patchkit-capture", "patchkit": "9.0"}))
    data, why = manifest.load(str(newer))
    assert data is None and "written by patchkit 9.0 in manifest format 2" in why and "reads format 1" in why
    cut = tmp_path / "cut.json"
    cut.write_text('{"format": 1, "kind": "patchkit-capture", "rec')
    assert "cut off" in manifest.load(str(cut))[1]


def test_the_manifest_module_imports_only_the_standard_library():
    code = ("import sys; before = set(sys.modules); import patchkit.core.manifest; "
            "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] not in sys.stdlib_module_names))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['patchkit', 'patchkit.core', 'patchkit.core.confined', 'patchkit.core.manifest', " \
                                  "'patchkit.core.wholejson']"


def test_one_reader_tells_foreign_json_from_a_broken_manifest(tmp_path):
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    with pytest.raises(manifest.Unreadable) as info:
        manifest.read(str(other))
    assert info.value.foreign
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": 1,\n "kind": "patchkit-capture",\n oops}')
    with pytest.raises(manifest.Unreadable) as info:
        manifest.read(str(bad))
    assert not info.value.foreign and (info.value.line, info.value.col) == (3, 2)
    assert "bad JSON" in info.value.reason
    whole = tmp_path / "whole.json"
    whole.write_text('{"format": 1, "kind": "patchkit-capture"}')
    assert manifest.read(str(whole)) == {"format": 1, "kind": "patchkit-capture"}
    assert manifest.load(str(whole)) == (None, "the manifest lacks recipe, key, backend, rank, steps, traces")


def test_a_fifo_or_a_link_as_a_manifest_or_a_trace_is_refused_without_reading_it(tmp_path):
    fifo, zero = tmp_path / "fifo.json", tmp_path / "zero.json"
    os.mkfifo(fifo)
    zero.symlink_to("/dev/zero")
    assert manifest.load(str(fifo)) == (None, "the manifest is not a regular file (a FIFO): never read")
    assert manifest.load(str(zero)) == (None, "the manifest is a symbolic link: never followed")
    for trace in ("t.pt.trace.json", "t.pt.trace.json.gz"):
        os.mkfifo(tmp_path / trace)
        assert manifest.check_trace(str(tmp_path / trace), 10) == "is not a regular file (a FIFO): never read"
        (tmp_path / f"link-{trace}").symlink_to("/dev/zero")
        assert manifest.check_trace(str(tmp_path / f"link-{trace}")) == "is a symbolic link: never followed"


def test_a_gzip_trace_is_checked_within_the_bounds_a_bomb_is_refused_by(tmp_path):
    import gzip

    from patchkit.core.confined import RATIO, SLACK

    bomb = tmp_path / "h_1.1.pt.trace.json.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as packer:
        for _ in range(2 * SLACK >> 20):
            packer.write(b" " * (1 << 20))
        packer.write(b"[]")
    assert manifest.check_trace(str(bomb)).startswith(f"decompresses to more than {RATIO} times its size")
    whole = tmp_path / "h_2.1.pt.trace.json.gz"
    whole.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    cut = tmp_path / "h_3.1.pt.trace.json.gz"
    cut.write_bytes(whole.read_bytes()[:-6])
    assert manifest.check_trace(str(whole)) == "" and "not a whole gzip file" in manifest.check_trace(str(cut))
