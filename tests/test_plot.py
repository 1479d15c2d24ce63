"""plot: step time per rank as HTML with inline SVG (no dependency), or PNG with matplotlib; the format is the extension."""

from __future__ import annotations

import importlib.util
from xml.etree import ElementTree

import pytest

from patchkit.core.errors import TraceError
from patchkit.traces.plot import plot_format, require, write_plot
from patchkit.traces.summary import RankSummary, Summary
from patchkit.traces.read import Step


def _rank(label, rank, times):
    steps = tuple(Step(n, t) for n, t in times)
    return RankSummary(label, rank, "", "torch", (), steps, (), "ProfilerStep", "self time")


SUMMARY = Summary("run/<a&b>", (_rank("rank 0", 0, [(1, 2000.0), (2, 3000.0)]), _rank("rank 1", 1, [(1, 2500.0)]),
                                _rank("rank 2 (no steps)", 2, [])), ())


def test_html_draws_one_line_and_one_legend_entry_per_rank_with_steps(tmp_path):
    out = tmp_path / "steps.html"
    assert write_plot(SUMMARY, str(out)) == "html"
    text = out.read_text(encoding="utf-8")
    svg = ElementTree.fromstring(text[text.index("<svg"): text.index("</svg>") + 6])
    ns = "{http://www.w3.org/2000/svg}"
    assert len(svg.findall(f"{ns}polyline")) == 2 and len(svg.findall(f"{ns}circle")) == 3
    titles = [c.find(f"{ns}title").text for c in svg.findall(f"{ns}circle")]
    assert titles == ["rank 0, step 1: 2.000 ms", "rank 0, step 2: 3.000 ms", "rank 1, step 1: 2.500 ms"]
    assert "Step time per rank: run/&lt;a&amp;b&gt;" in text and "no steps" not in text
    assert "<tr><td>rank 1</td><td>1</td><td>2.500</td></tr>" in text


def test_the_format_follows_the_extension():
    assert plot_format("a.HTML") == "html" and plot_format("a.htm") == "html" and plot_format("a.png") == "png"
    with pytest.raises(ValueError, match=r"\.html \(no dependency\) or \.png"):
        plot_format("a.svg")


def test_png_without_matplotlib_is_refused_before_any_trace_is_read(tmp_path):
    if importlib.util.find_spec("matplotlib") is not None:
        assert require(str(tmp_path / "a.png")) == "png"
        return
    with pytest.raises(TraceError) as info:
        require(str(tmp_path / "a.png"))
    assert "needs matplotlib" in info.value.message and "--plot" in info.value.hint and "a.html" in info.value.hint
    assert not (tmp_path / "a.png").exists()
