"""compare: ranks matched, step time and operators per step with B - A, and msprof-analyze compare for torch_npu data."""

from __future__ import annotations

import json

from click.testing import CliRunner

from patchkit.cli.commands import main
from patchkit.traces.compare import compare
from patchkit.traces.summary import summarise

import fake_tools
from fake_tools import torch_trace

STEP_HEADER = ("Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
               "Communication(Not Overlapped and Exclude Receive),Preparing")
OP_HEADER = "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def two_runs(tmp_path):
    for rank in (0, 1):
        torch_trace(tmp_path / "a" / f"rank{rank}.pt.trace.json", rank, 1000, 400)
        torch_trace(tmp_path / "b" / f"rank{rank}.pt.trace.json", rank, 1600 + 100 * rank, 900, steps=(1, 2))
    return tmp_path / "a", tmp_path / "b"


def test_step_time_and_operators_per_step_side_by_side_with_the_difference(tmp_path):
    a, b = two_runs(tmp_path)
    result = invoke("compare", a, b)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "rank 0: mean step 1.000 ms -> 1.600 ms: +0.600 ms (+60.0%); A 3 step(s), B 2" in out
    assert "rank 1: mean step 1.000 ms -> 1.700 ms: +0.700 ms (+70.0%)" in out
    mm = next(line for line in out.splitlines() if "aten::mm" in line)
    assert mm.split()[-3:] == ["0.400", "0.900", "+0.500"]  # per step: 3 steps in A, 2 in B


def test_json_comparison(tmp_path):
    a, b = two_runs(tmp_path)
    data = json.loads(invoke("compare", a, b, "--json", "--top", "1").stdout)
    assert [r["label"] for r in data["ranks"]] == ["rank 0", "rank 1"]
    rank0 = data["ranks"][0]
    assert (rank0["a_mean_step_us"], rank0["b_mean_step_us"], rank0["delta_us"], rank0["delta_percent"]) == \
        (1000.0, 1600.0, 600.0, 60.0)
    assert rank0["ops"] == [{"name": "aten::mm", "kind": "cpu_op", "a_us_per_step": 400.0, "b_us_per_step": 900.0,
                             "delta_us": 500.0}]


def test_ranks_match_by_rank_and_the_rest_is_listed(tmp_path):
    torch_trace(tmp_path / "a" / "rank0.pt.trace.json", 0, 1000, 400)
    torch_trace(tmp_path / "a" / "rank1.pt.trace.json", 1, 1000, 400)
    torch_trace(tmp_path / "b" / "rank1.pt.trace.json", 1, 1000, 400)
    torch_trace(tmp_path / "b" / "rank2.pt.trace.json", 2, 1000, 400)
    result = compare(summarise(str(tmp_path / "a")), summarise(str(tmp_path / "b")))
    assert [p.label for p in result.pairs] == ["rank 1"]
    assert (result.only_a, result.only_b) == (("rank 0",), ("rank 2",))


def test_two_single_captures_are_compared_whatever_their_ranks(tmp_path):
    a = torch_trace(tmp_path / "x.pt.trace.json", 0, 1000, 400)
    b = torch_trace(tmp_path / "y.pt.trace.json", 3, 500, 100)
    (pair,) = compare(summarise(str(a)), summarise(str(b))).pairs
    assert pair.label == "rank 0 / rank 3" and pair.delta_us == -500.0


def test_no_rank_in_common_is_an_error(tmp_path):
    torch_trace(tmp_path / "a" / "rank0.pt.trace.json", 0, 1000, 400)
    torch_trace(tmp_path / "a" / "rank1.pt.trace.json", 1, 1000, 400)
    torch_trace(tmp_path / "b" / "rank2.pt.trace.json", 2, 1000, 400)
    torch_trace(tmp_path / "b" / "rank3.pt.trace.json", 3, 1000, 400)
    result = invoke("compare", tmp_path / "a", tmp_path / "b")
    assert result.exit_code == 1
    assert "no rank of A matches a rank of B (A: rank 0, rank 1; B: rank 2, rank 3)" in result.stderr


def ascend_run(folder, step_us, mm_us):
    for rank in (0, 1):
        capture = folder / f"host_{10 + rank}_20260101000000000_ascend_pt"
        (capture / "FRAMEWORK").mkdir(parents=True)
        (capture / f"profiler_info_{rank}.json").write_text("{}")
        out = capture / "ASCEND_PROFILER_OUTPUT"
        out.mkdir()
        (out / "step_trace_time.csv").write_text(f"{STEP_HEADER}\n{rank},1,{step_us - 10},0,0,0,10,{step_us},0,0,1\n")
        (out / "op_statistic.csv").write_text(f"{OP_HEADER}\n{rank},MatMulV2,AI_CORE,2,{mm_us},1,1,1,100\n")
        (out / "trace_view.json").write_text("[]")
    return folder


def test_torch_npu_data_is_also_compared_by_msprof_analyze_when_it_is_installed(tmp_path, monkeypatch):
    a, b = ascend_run(tmp_path / "a", 100, 60), ascend_run(tmp_path / "b", 150, 90)
    log = fake_tools.msprof_analyze(tmp_path, monkeypatch)
    result = invoke("compare", a, b, "--output", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "rank 1: mean step 0.100 ms -> 0.150 ms: +0.050 ms (+50.0%)" in result.stdout
    assert "MatMulV2  [AI_CORE]" in result.stdout
    calls = fake_tools.calls(log)
    assert calls == [["compare", "-d", str(next(b.glob(f"*_{10 + r}_*"))), "-bp", str(next(a.glob(f"*_{10 + r}_*"))),
                      "-o", str(tmp_path / "out" / f"msprof-compare-rank{r}")] for r in (0, 1)]
    assert f"msprof-analyze compare: wrote {tmp_path / 'out' / 'msprof-compare-rank1'}" in result.stderr
    assert (tmp_path / "out" / "msprof-compare-rank0" / "performance_comparison_result_1.xlsx").exists()


def test_msprof_analyze_failing_is_an_error_after_patchkits_own_comparison(tmp_path, monkeypatch):
    a, b = ascend_run(tmp_path / "a", 100, 60), ascend_run(tmp_path / "b", 150, 90)
    fake_tools.msprof_analyze(tmp_path, monkeypatch, exit_code=2)
    result = invoke("compare", a, b, "--output", tmp_path / "out")
    assert result.exit_code == 1
    assert "rank 0: mean step" in result.stdout and "  | [ERROR] the stand-in fails as asked" in result.stderr
    assert "msprof-analyze compare failed (exit status 2)" in result.stderr


def test_without_msprof_analyze_or_with_no_msprof_only_patchkits_comparison_runs(tmp_path, monkeypatch):
    a, b = ascend_run(tmp_path / "a", 100, 60), ascend_run(tmp_path / "b", 150, 90)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = invoke("compare", a, b)
    assert result.exit_code == 0 and "note: msprof-analyze is not installed" in result.stderr
    log = fake_tools.msprof_analyze(tmp_path, monkeypatch)
    result = invoke("compare", a, b, "--no-msprof")
    assert result.exit_code == 0 and fake_tools.calls(log) == [] and "msprof" not in result.stderr
