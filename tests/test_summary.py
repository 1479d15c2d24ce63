"""summary: ranks grouped, the slowest rank, the text and JSON output, and the plot (HTML, PNG)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest
from click.testing import CliRunner

from patchkit.cli.commands import main
from patchkit.traces.summary import summarise

from conftest import snapshot
from fake_tools import torch_trace


@pytest.fixture
def run(tmp_path):
    torch_trace(tmp_path / "run" / "h_1.1.pt.trace.json", 0, 1000, 600)
    torch_trace(tmp_path / "run" / "h_2.1.pt.trace.json", 1, 1500, 900)
    return tmp_path / "run"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_each_rank_gets_its_steps_and_top_operators_and_the_slowest_rank_is_named(run):
    result = invoke("summary", run)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "rank 0: 3 step(s) (#1-#3), mean 1.000 ms" in out and "rank 1: 3 step(s) (#1-#3), mean 1.500 ms" in out
    assert "     0.600       1.800        3  aten::mm  [cpu_op]" in out  # per step, in total, calls
    assert "slowest rank: rank 1, mean step 1.500 ms, 0.500 ms (50.0%) longer than the fastest, rank 0" in out


def test_json_holds_the_same_per_rank_data(run):
    data = json.loads(invoke("summary", run, "--json", "--top", "1").stdout)
    assert [r["label"] for r in data["ranks"]] == ["rank 0", "rank 1"]
    assert data["ranks"][1]["steps"] == [{"step": n, "duration_us": 1500.0} for n in (1, 2, 3)]
    assert data["ranks"][1]["top_ops"] == [{"name": "aten::mm", "kind": "cpu_op", "calls": 3, "self_us": 2700.0,
                                             "self_us_per_step": 900.0}]
    assert data["slowest"] == [{"role": "", "slowest": "rank 1", "slowest_mean_us": 1500.0, "fastest": "rank 0",
                                "fastest_mean_us": 1000.0, "delta_us": 500.0, "delta_percent": 50.0}]


def test_windows_of_one_rank_are_one_row_and_roles_are_compared_apart(tmp_path):
    torch_trace(tmp_path / "rank0" / "a.pt.trace.json", 0, 1000, 500, steps=(1, 2))
    torch_trace(tmp_path / "rank0" / "b.pt.trace.json", 0, 3000, 500, steps=(8,))
    result = summarise(str(tmp_path))
    (rank,) = result.ranks
    assert [s.number for s in rank.steps] == [1, 2, 8] and rank.mean_step_us == pytest.approx(5000 / 3)
    assert rank.ops[0].calls == 3 and len(rank.captures) == 2
    assert result.slowest == ()  # one rank: nothing to compare


def test_an_empty_folder_exits_1_and_writes_nothing(tmp_path):
    before = snapshot(tmp_path)
    result = invoke("summary", tmp_path, "--plot", tmp_path / "steps.html")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {tmp_path}: no capture here")
    assert "hint:" in result.stderr and snapshot(tmp_path) == before


def test_html_plot_needs_nothing_and_shows_every_rank(run, tmp_path):
    plot = tmp_path / "steps.html"
    result = invoke("summary", run, "--plot", plot)
    assert result.exit_code == 0, result.output
    assert f"wrote {plot} (step time per rank, HTML)" in result.stderr
    page = plot.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<polyline") == 2
    assert "<title>rank 1, step 2: 1.500 ms</title>" in page and "<td>rank 0</td><td>3</td><td>1.000</td>" in page
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # self-contained


def test_a_png_plot_without_matplotlib_is_a_clear_error_before_anything_is_read(run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "matplotlib" else object())
    result = invoke("summary", run / "nowhere", "--plot", tmp_path / "steps.png")
    assert result.exit_code == 1
    assert "a PNG plot needs matplotlib, which is not installed here" in result.stderr
    assert "pip install 'patchkit-profiler[plot]'" in result.stderr and f"--plot {tmp_path / 'steps'}.html" in result.stderr
    assert not (tmp_path / "steps.png").exists()


def test_a_png_plot_draws_one_line_per_rank_with_matplotlib(run, tmp_path, monkeypatch):
    """matplotlib is an optional extra the test environment leaves out: a recording stand-in takes its place."""
    drawn = {}

    class Axes:
        def plot(self, xs, ys, **kw):
            drawn.setdefault("lines", []).append((kw["label"], list(xs), list(ys)))

        def __getattr__(self, name):
            return lambda *a, **k: drawn.setdefault(name, a)

    class Figure:
        def savefig(self, buffer, format, **kw):
            buffer.write(b"\x89PNG\r\n\x1a\n" + format.encode())

    pyplot = types.SimpleNamespace(subplots=lambda **kw: (Figure(), Axes()), close=lambda figure: None)
    fake = types.SimpleNamespace(use=lambda backend: drawn.setdefault("backend", backend), pyplot=pyplot)
    monkeypatch.setitem(sys.modules, "matplotlib", fake)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", pyplot)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: object())
    plot = tmp_path / "steps.png"
    result = invoke("summary", run, "--plot", plot)
    assert result.exit_code == 0, result.output
    assert plot.read_bytes() == b"\x89PNG\r\n\x1a\npng" and oct(os.stat(plot).st_mode)[-3:] == "644"
    assert drawn["backend"] == "Agg"
    assert drawn["lines"] == [("rank 0", [1, 2, 3], [1.0, 1.0, 1.0]), ("rank 1", [1, 2, 3], [1.5, 1.5, 1.5])]
    assert drawn["set_ylabel"] == ("step time (ms)",)


def test_another_plot_extension_is_a_usage_error(run, tmp_path):
    result = invoke("summary", run, "--plot", tmp_path / "steps.svg")
    assert result.exit_code == 2 and ".html (no dependency) or .png (matplotlib)" in result.stderr


def test_help_imports_none_of_the_analysis_libraries(tmp_path):
    env = dict(os.environ, PATCHKIT_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "patchkit", "--help"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "summary" in done.stdout and "compare" in done.stdout
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert not imported & {"torch", "libcst", "git", "ray", "matplotlib", "csv", "gzip"}
    assert "patchkit.traces.summary" not in done.stderr and "patchkit.traces.read" not in done.stderr


def test_a_manifest_from_a_newer_patchkit_stops_summary_and_no_plot_is_written(run, tmp_path):
    (run / "patchkit-manifests").mkdir()
    manifest = run / "patchkit-manifests" / "h_1.1.json"
    manifest.write_text(json.dumps({"format": 2, "kind": "patchkit-capture", "patchkit": "9.0.0", "rank": 0,
                                    "traces": [{"name": "h_1.1.pt.trace.json"}]}))
    before = snapshot(tmp_path)
    result = invoke("summary", run, "--plot", tmp_path / "steps.html")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {manifest}:1: written by patchkit 9.0.0 in manifest format 2")
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------- progress


def test_summarise_tells_its_progress_every_byte_of_the_traces_it_reads(run, tmp_path):
    from progress_helpers import Recorder
    from patchkit.core.progress import BYTES

    gz = tmp_path / "gz" / "h_3.1.pt.trace.json.gz"
    gz.parent.mkdir()
    gz.write_bytes(__import__("gzip").compress((run / "h_1.1.pt.trace.json").read_bytes()))
    (run / gz.name).write_bytes(gz.read_bytes())
    recorder = Recorder()
    summarise(str(run), recorder)
    size = sum(p.stat().st_size for p in run.iterdir())  # the .gz counts its compressed bytes, as on disk
    assert recorder.summary() == [("reading 3 capture(s)", BYTES, size, size)]
    assert [item.split(": ")[0] for item in recorder.stages[0]["items"]] == ["1/3", "2/3", "3/3"]
    seen = []
    from patchkit.traces.read import chrome_totals

    chrome_totals(str(gz), seen.append)  # told as the stream goes, chunk by chunk
    assert sum(seen) == gz.stat().st_size and seen


def test_summarise_counts_a_torch_npu_capture_by_the_text_files_it_reads(tmp_path):
    from progress_helpers import Recorder
    from test_compare import ascend_run

    folder = ascend_run(tmp_path / "a", 100, 60)
    recorder = Recorder()
    summarise(str(folder), recorder)
    texts = sum(p.stat().st_size for p in folder.glob("*/ASCEND_PROFILER_OUTPUT/*"))
    assert recorder.summary()[0][2:] == (texts, texts)


def test_summary_and_compare_draw_a_bar_on_a_terminal_only_and_never_with_json(run, monkeypatch):
    from progress_helpers import Terminal
    from patchkit.cli import progress
    from patchkit.cli.progress import size_text

    piped, piped_json = invoke("summary", run), invoke("summary", run, "--json")
    compared = invoke("compare", run, run)
    assert piped.stderr == piped_json.stderr == compared.stderr == ""
    real = progress.stream
    monkeypatch.setattr(progress, "stream", lambda: Terminal(real()))
    shown = invoke("summary", run)
    assert shown.exit_code == 0 and shown.stdout == piped.stdout
    size = size_text(sum(p.stat().st_size for p in run.iterdir()))
    assert "reading 2 capture(s)" in shown.stderr and "100%" in shown.stderr and f"{size}/{size}" in shown.stderr
    again = invoke("compare", run, run)
    assert again.stdout == compared.stdout and again.stderr.count("\n") == 2  # one finished bar per side
    assert (invoke("summary", run, "--json").stdout, invoke("summary", run, "--json").stderr) == (piped_json.stdout, "")
    assert invoke("compare", run, run, "--json").stderr == ""
