"""After the capture, for real: two-rank runs of the patched demo sample under torchrun, then summary and compare.

torch backend: torch.distributed (gloo, CPU), ranks 0 and 1; run B does more work per step
than run A (longer responses, a larger vocabulary), but no assertion compares measured times: on a
loaded machine either run may be the quicker.  npu backend: ranks 0 and 1 against the
CPU stand-in for torch_npu with analysis off, so that `patchkit analyse` parses the captures
before `summary` and `compare` read them; msprof-analyze is a stand-in on PATH.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import patchkit
from patchkit.cli.commands import main
from patchkit.demo.runner import SAMPLE
from patchkit.state.ledger import Ledger

import fake_tools
from doubles import npu_double_env

REPO = Path(__file__).resolve().parent.parent
WORK = {"a": {"DEMO_RESPONSE": "6", "DEMO_VOCAB": "32"}, "b": {"DEMO_RESPONSE": "48", "DEMO_VOCAB": "4096"}}
WRAPPER = """\
import os, sys
import torch.distributed as dist
import patchkit.demo.train as train
if "TORCHELASTIC_RUN_ID" in os.environ:  # under torchrun
    dist.init_process_group("gloo")
train.RESPONSE, train.VOCAB = int(os.environ["DEMO_RESPONSE"]), int(os.environ["DEMO_VOCAB"])
code = train.main(["--updates", "1"])  # 4 micro-batches: steps 0 (warm-up) to 3, the window closes at the 4th
if dist.is_initialized():
    dist.barrier()  # ranks that tear gloo down apart may abort (tests/attach_job.py)
    dist.destroy_process_group()
sys.exit(code)
"""
SETTINGS = ["granularity=micro", "schedule.wait=0", "schedule.warmup=1", "schedule.active=3"]


def two_ranks(work: Path, run: str, backend_settings, env, torchrun=True) -> Path:
    """Patch a copy of the sample, run it as ranks 0 and 1, revert; the folder the traces went to.

    Under torchrun (torch.distributed, gloo), or as two processes told their RANK (enough for torch_npu's
    stand-in, and quicker).
    """
    site, traces = work / f"site-{run}", work / f"traces-{run}"
    shutil.copytree(SAMPLE, site, ignore=shutil.ignore_patterns("__pycache__"))
    ledger = Ledger(work / "state")
    settings = patchkit.load("verl-fsdp-update", SETTINGS + backend_settings + [f"profiler.save_path={traces}"])
    patchkit.apply(settings, str(site), ledger=ledger)
    (work / "wrapper.py").write_text(WRAPPER)
    env = dict(env, PATCHKIT_HOME=str(work / "home"), **WORK[run])
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.pop("PATCHKIT_STRICT", None)
    if torchrun:
        done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                               str(work / "wrapper.py")], cwd=work, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    else:
        ranks = [subprocess.Popen([sys.executable, str(work / "wrapper.py")], cwd=work,
                                  env=dict(env, RANK=str(r), OMP_NUM_THREADS="1"),  # as torchrun sets it
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
        for proc in ranks:
            out, _ = proc.communicate(timeout=600)
            assert proc.returncode == 0, out
    patchkit.revert(["verl-fsdp-update"], ledger=ledger)
    return traces


@pytest.fixture(scope="module")
def torch_runs(tmp_path_factory):
    work = tmp_path_factory.mktemp("torch-runs")
    return {run: two_ranks(work, run, ["backend=torch"], os.environ) for run in ("a", "b")}


@pytest.fixture(scope="module")
def npu_runs(tmp_path_factory):
    work = tmp_path_factory.mktemp("npu-runs")
    env = npu_double_env("2.7.1")
    return {run: two_ranks(work, run, ["profiler.analysis=false", "profiler.export_type=text"], env, torchrun=False)
            for run in ("a", "b")}


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_summary_names_each_ranks_steps_and_top_operators(torch_runs, tmp_path):
    result = invoke("summary", torch_runs["a"], "--plot", tmp_path / "steps.html")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "2 rank(s), 2 capture(s) (torch.profiler traces)" in out
    for rank in (0, 1):
        assert f"\nrank {rank}: 3 step(s) (#1-#3), mean " in out
    assert out.count("(rank from manifest)") == 2  # the runtime wrote each rank into its capture's manifest
    data = json.loads(invoke("summary", torch_runs["a"], "--json").stdout)
    for rank in data["ranks"]:
        assert [s["step"] for s in rank["steps"]] == [1, 2, 3]
        selfs = [o["self_us"] for o in rank["top_ops"]]
        assert len(selfs) == 10 and selfs == sorted(selfs, reverse=True) and selfs[0] > 0
        assert any(o["name"].startswith("aten::") and o["kind"] == "cpu_op" for o in rank["top_ops"])
        assert f"{rank['top_ops'][0]['name']}  [{rank['top_ops'][0]['kind']}]" in out
    assert data["slowest"][0]["slowest"] in ("rank 0", "rank 1")
    assert (tmp_path / "steps.html").read_text().count("<polyline") == 2


def agrees_with_each_summary(ranks, a, b, op):
    """compare's numbers are each run's own summary, side by side, and B - A of them.

    The runs are measured on a shared machine, so which one is faster is no fact to assert: run B does
    more work per step, yet a busy moment can make it the quicker one.  What compare must get right is
    which number comes from which run and the difference of the two.
    """
    summary = {side: {r["label"]: r for r in json.loads(invoke("summary", path, "--json", "--top", "1000").stdout)
                      ["ranks"]} for side, path in (("a", a), ("b", b))}
    for rank in ranks:
        mine = {side: summary[side][rank["label"]] for side in "ab"}
        assert (rank["a_mean_step_us"], rank["b_mean_step_us"]) == (mine["a"]["mean_step_us"],
                                                                    mine["b"]["mean_step_us"]), rank
        assert rank["delta_us"] == pytest.approx(rank["b_mean_step_us"] - rank["a_mean_step_us"], abs=0.002)
        assert (rank["a_steps"], rank["b_steps"]) == (3, 3)
        ops = {o["name"]: o for o in rank["ops"]}
        for side in "ab":
            per_step = {o["name"]: o["self_us_per_step"] for o in mine[side]["top_ops"]}
            assert ops[op][f"{side}_us_per_step"] == per_step[op], ops[op]
        assert ops[op]["delta_us"] == pytest.approx(ops[op]["b_us_per_step"] - ops[op]["a_us_per_step"], abs=0.002)


def test_compare_puts_each_run_s_numbers_side_by_side(torch_runs):
    data = json.loads(invoke("compare", torch_runs["a"], torch_runs["b"], "--json", "--top", "50").stdout)
    assert [r["label"] for r in data["ranks"]] == ["rank 0", "rank 1"]
    agrees_with_each_summary(data["ranks"], torch_runs["a"], torch_runs["b"], "aten::addmm")
    text = invoke("compare", torch_runs["a"], torch_runs["b"]).stdout
    assert "rank 0: mean step " in text and "rank 1: mean step " in text and "B - A" in text


def test_torch_npu_captures_go_through_analyse_summary_and_compare(npu_runs, tmp_path, monkeypatch):
    a, b = npu_runs["a"], npu_runs["b"]
    result = invoke("summary", a)
    assert result.exit_code == 1 and "not parsed yet" in result.stderr  # analysis was off
    for key in ("PYTHONPATH", "TORCH_NPU_DOUBLE_VERSION"):
        monkeypatch.setenv(key, npu_double_env("2.7.1")[key])
    log = fake_tools.msprof_analyze(tmp_path, monkeypatch)
    for run in (a, b):
        result = invoke("analyse", run)
        assert result.exit_code == 0, result.output
        assert result.stderr.count("parsed: ") == 2
    assert [c[:3] for c in fake_tools.calls(log)] == [["cluster", "-d", str(a)], ["cluster", "-d", str(b)]]

    data = json.loads(invoke("summary", a, "--json").stdout)
    assert [(r["label"], r["format"]) for r in data["ranks"]] == [("rank 0", "ascend"), ("rank 1", "ascend")]
    for rank in data["ranks"]:
        assert [s["step"] for s in rank["steps"]] == [1, 2, 3] and rank["steps_from"] == "step_trace_time.csv"
        assert rank["ops_from"] == "op_statistic.csv" and rank["top_ops"][0]["kind"] in ("AI_CORE", "AI_VECTOR_CORE")

    result = invoke("compare", a, b, "--json", "--top", "50", "--output", tmp_path / "cmp")
    assert result.exit_code == 0, result.output
    ranks = json.loads(result.stdout)["ranks"]
    assert [r["label"] for r in ranks] == ["rank 0", "rank 1"]
    agrees_with_each_summary(ranks, a, b, "Addmm")
    compares = [c for c in fake_tools.calls(log) if c[0] == "compare"]
    assert [(Path(c[2]).parent, Path(c[4]).parent, c[6]) for c in compares] == \
        [(b, a, str(tmp_path / "cmp" / f"msprof-compare-rank{r}")) for r in (0, 1)]


# ---------------------------------------------------------------- hostile traces: located errors, never a traceback

def x(name, ts, dur, cat="cpu_op", tid=1):
    return {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid, "ts": ts, "dur": dur}


STEP_5000 = json.dumps({"traceEvents": [x("aten::mm", 0, 1), x("ProfilerStep#" + "4" * 5000, 0, 9)]}, indent=1)
CUT_GZIP = gzip.compress(json.dumps({"traceEvents": [x("op", i, 1) for i in range(3000)]}).encode())


@pytest.mark.parametrize("name, data, says, line", [
    ("deep.pt.trace.json", "[" * 200_000 + "]" * 200_000, "the JSON nests deeper than 100 levels", 1),
    ("args.pt.trace.json", '{"traceEvents": [\n{"ph": "X", "args": ' + "{\"a\": " * 200_000 + "1" + "}" * 200_000
     + "}]}", "the JSON nests deeper than 100 levels", 2),
    ("step.pt.trace.json", STEP_5000, "a ProfilerStep# span numbered with 5000 digits",
     STEP_5000.splitlines().index(next(t for t in STEP_5000.splitlines() if "4444" in t)) + 1),
    ("cut.pt.trace.json.gz", CUT_GZIP[: len(CUT_GZIP) // 2], "the compressed trace is cut off", None),
    ("bytes.pt.trace.json", b'{"traceEvents": [\n{"ph": "X", "name": "caf\xe9"}]}', "invalid bytes in UTF8 string", 2),
    ("int.pt.trace.json", '{"traceEvents": [{"ph": "X", "ts": ' + "9" * 5000 + "}]}", "integer overflow", 1),
    ("float.pt.trace.json", '{"traceEvents": [{"ph": "X", "ts": 1e400}]}', "floating point) overflow", 1),
    ("nan.pt.trace.json", '{"traceEvents": [{"ph": "X", "name": "op", "ts": "nan"}]}', "not a finite number", 1),
])
def test_a_hostile_trace_is_a_located_error_with_exit_status_1(tmp_path, name, data, says, line):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    for command in (["summary", path], ["compare", path, path]):
        result = invoke(*command)
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output  # not a traceback
        where = f"error: {path}:{line}:" if line else f"error: {path}: "
        assert where in result.stderr and says in result.stderr and "\n  hint: " in result.stderr, result.stderr
        assert result.stdout == ""


@pytest.mark.parametrize("count", ["1e400", "nan", "inf"])
def test_a_non_finite_count_in_a_torch_npu_csv_names_the_file_and_line(tmp_path, count):
    out = tmp_path / "h_1_20260101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "op_statistic.csv").write_text("Device_id,OP Type,Core Type,Count,Total Time(us)\n0,Add,AI_CORE,3,9.5\n"
                                          f"0,MatMul,AI_CORE,{count},40\n")
    result = invoke("summary", tmp_path)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert f"error: {out / 'op_statistic.csv'}:3: Count is '{count}', not a finite number" in result.stderr


# ---------------------------------------------------------------- text from a trace reaches the terminal escaped

EVIL = "\x1b]0;owned\x07aten::mm\r\nrank 0: 1 step(s) (#1-#1), mean 0.001 ms\x1b[2J"


def test_names_with_control_characters_are_printed_escaped_and_kept_in_json(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    for run, dur in (("a", 5), ("b", 7)):
        (folder / f"{run}\x1b[31m.pt.trace.json").write_text(json.dumps({"traceEvents": [
            x("ProfilerStep#1", 0, 100, cat="user_annotation"), x(EVIL, 1, dur), x("k\x9b1m", 2, 1, cat="kernel", tid=2)]}))
    result = invoke("summary", folder)
    assert result.exit_code == 0, result.output
    assert not set(result.stdout) & set("\x1b\x07\r\x9b") and "\nrank 0: 1 step(s)" not in result.stdout
    assert "\\x1b]0;owned\\x07aten::mm\\x0d\\x0arank 0: 1 step(s) (#1-#1), mean 0.001 ms\\x1b[2J  [cpu_op]" in result.stdout
    assert "a\\x1b[31m.pt.trace.json: 1 step(s)" in result.stdout and "k\\x9b1m  [kernel]" in result.stdout
    data = json.loads(invoke("summary", folder, "--json").stdout)
    assert {o["name"] for r in data["ranks"] for o in r["top_ops"]} == {EVIL, "k\x9b1m"}
    a, b = sorted(folder.iterdir())
    text = invoke("compare", a, b).stdout
    assert not set(text) & set("\x1b\x07\r\x9b") and "\\x1b]0;owned" in text
    rows = [line for line in text.splitlines() if "[cpu_op]" in line or "[kernel]" in line or "B - A" in line]
    assert len(rows) == 3 and len({len(line) for line in rows}) == 1  # the columns still line up
    assert json.loads(invoke("compare", a, b, "--json").stdout)["ranks"][0]["ops"][0]["name"] == EVIL
