"""analyse: torch_npu's offline parse (the CPU stand-in plays torch_npu), then msprof-analyze cluster (a stand-in too)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from patchkit.cli.commands import main

import fake_tools
from conftest import snapshot
from doubles import npu_double_env

CAPTURE = textwrap.dedent("""\
    import sys, torch, torch_npu
    P = torch_npu.profiler
    prof = P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.NPU],
                     schedule=P.schedule(wait=0, warmup=0, active=2, repeat=1),
                     on_trace_ready=P.tensorboard_trace_handler(sys.argv[1], analyse_flag=False))
    prof.start()
    for _ in range(3):
        torch.ones(32, 32).mm(torch.ones(32, 32)).sum()
        prof.step()
    prof.stop()
""")


@pytest.fixture(scope="module")
def raw_run(tmp_path_factory):
    """Two ranks' *_ascend_pt folders, written by the stand-in with analysis off (analyse_flag=False)."""
    folder = tmp_path_factory.mktemp("raw") / "run"
    for rank in (0, 1):
        env = dict(npu_double_env("2.7.1"), RANK=str(rank))
        done = subprocess.run([sys.executable, "-c", CAPTURE, str(folder)], env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
    assert len(list(folder.glob("*_ascend_pt"))) == 2 and not list(folder.glob("*/ASCEND_PROFILER_OUTPUT"))
    return folder


@pytest.fixture
def run(raw_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(raw_run, copy)
    return copy


@pytest.fixture
def torch_npu_here(monkeypatch):
    """torch_npu importable by the parse's child process: the stand-in, release 2.7.1, on PYTHONPATH."""
    for key, value in npu_double_env("2.7.1").items():
        if key in ("PYTHONPATH", "TORCH_NPU_DOUBLE_VERSION", "TORCH_NPU_DOUBLE_STRICT"):
            monkeypatch.setenv(key, value)


@pytest.fixture
def no_tools(tmp_path, monkeypatch):
    empty = tmp_path / "no-tools"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_analyse_parses_every_rank_at_once_and_runs_the_cluster_analysis(run, torch_npu_here, tmp_path, monkeypatch):
    log = fake_tools.msprof_analyze(tmp_path, monkeypatch)
    result = invoke("analyse", run)
    assert result.exit_code == 0, result.output
    assert f"  | patchkit: torch_npu analyse({str(run)!r})" in result.stderr  # the folder: parsed in parallel
    for folder in sorted(run.glob("*_ascend_pt")):
        assert f"parsed: {folder}\n" in result.stderr
        names = {p.name for p in (folder / "ASCEND_PROFILER_OUTPUT").iterdir()}
        assert {"trace_view.json", "kernel_details.csv", "op_statistic.csv", "step_trace_time.csv"} <= names
    assert fake_tools.calls(log) == [["cluster", "-d", str(run)]]
    assert f"msprof-analyze cluster: wrote {run / 'cluster_analysis_output'}" in result.stderr
    assert (run / "cluster_analysis_output").is_dir()


def test_without_torch_npu_it_says_where_to_run_and_writes_nothing(run, no_tools, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    before = snapshot(run)
    result = invoke("analyse", run)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0] == f"error: the offline parse needs torch_npu and CANN: torch_npu is not installed in this " \
                       f"environment ({sys.executable})"
    assert lines[1].startswith("  hint: run `patchkit analyse` where `python -c 'import torch_npu'` works")
    assert len(lines) == 2 and snapshot(run) == before


def test_parsed_captures_are_left_alone_and_the_rest_parsed_one_by_one(run, torch_npu_here, no_tools):
    first, second = sorted(run.glob("*_ascend_pt"))
    assert invoke("analyse", first).exit_code == 0
    parsed = snapshot(first)
    result = invoke("analyse", run)
    assert result.exit_code == 0, result.output
    assert f"already parsed: {first} (ASCEND_PROFILER_OUTPUT is there; left as it is)" in result.stderr
    assert f"  | patchkit: torch_npu analyse({str(second)!r})" in result.stderr and f"parsed: {second}" in result.stderr
    assert snapshot(first) == parsed
    assert "note: msprof-analyze is not installed: no cluster analysis (pip install " \
           "'patchkit-profiler[analysis]'" in result.stderr


def test_one_capture_gets_no_cluster_analysis_and_no_cluster_skips_it(run, torch_npu_here, tmp_path, monkeypatch):
    log = fake_tools.msprof_analyze(tmp_path, monkeypatch)
    first = sorted(run.glob("*_ascend_pt"))[0]
    result = invoke("analyse", first)
    assert result.exit_code == 0 and "one capture: no cluster analysis" in result.stderr
    result = invoke("analyse", run, "--no-cluster")
    assert result.exit_code == 0 and "cluster analysis skipped (--no-cluster)" in result.stderr
    assert fake_tools.calls(log) == []


def test_a_failing_cluster_analysis_exits_1_after_the_parse(run, torch_npu_here, tmp_path, monkeypatch):
    fake_tools.msprof_analyze(tmp_path, monkeypatch, exit_code=1)
    result = invoke("analyse", run)
    assert result.exit_code == 1
    assert "parsed: " in result.stderr and "  | [ERROR] the stand-in fails as asked" in result.stderr
    assert f"error: {run}: msprof-analyze cluster failed (exit status 1)" in result.stderr


def test_a_capture_torch_npu_cannot_parse_is_named(run, torch_npu_here, no_tools):
    broken = sorted(run.glob("*_ascend_pt"))[1]
    (broken / "FRAMEWORK" / "double_events.json").write_text('{"traceEvents": [')
    result = invoke("analyse", run)
    assert result.exit_code == 1
    assert f"failed: {broken} (" in result.stderr and "Call analyse failed" in result.stderr
    assert f"error: {broken}: 1 of 2 capture(s) could not be parsed" in result.stderr


def test_export_type_needs_a_torch_npu_whose_analyse_takes_it(run, no_tools, monkeypatch):
    for key, value in npu_double_env("2.5.1").items():  # before 2.6.0: analyse(profiler_path, max_process_number)
        if key in ("PYTHONPATH", "TORCH_NPU_DOUBLE_VERSION"):
            monkeypatch.setenv(key, value)
    before = snapshot(run)
    result = invoke("analyse", run, "--export-type", "text")
    assert result.exit_code == 1 and "analyse() has no export_type" in result.stderr
    assert snapshot(run) == before


def test_folders_without_torch_npu_captures_are_refused(tmp_path):
    result = invoke("analyse", tmp_path)
    assert result.exit_code == 1 and "no capture here" in result.stderr
    fake_tools.torch_trace(tmp_path / "h_1.1.pt.trace.json", 0, 100, 10)
    result = invoke("analyse", tmp_path)
    assert result.exit_code == 1 and "torch.profiler traces need no parse" in result.stderr
    assert f"`patchkit summary {tmp_path}`" in result.stderr

