"""``summary --plot FILE``: step time per rank, one line per rank, as HTML (an inline SVG) or PNG.

HTML needs nothing: one self-contained file with the chart and the numbers
in a table.  PNG needs matplotlib (``patchkit-profiler[plot]``).  The
format follows the file's extension.  The file is written whole or not at
all (a temporary file beside it, then a rename).
"""

from __future__ import annotations

import html
import math
import os
import tempfile
from typing import List, Sequence, Tuple

from patchkit.core.errors import Location, TraceError
from patchkit.traces.summary import RankSummary, Summary

FORMATS = (".html", ".htm", ".png")
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
W, H, LEFT, RIGHT, TOP, BOTTOM = 760, 360, 64, 150, 24, 44


def plot_format(path: str) -> str:
    """``html`` or ``png``, from the extension; a ValueError for any other."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise ValueError(f"{path}: the plot's format follows its extension: .html (no dependency) or .png (matplotlib)")
    return "png" if ext == ".png" else "html"


def require(path: str) -> str:
    """The plot's format, checked before any trace is read: a TraceError when PNG is asked and matplotlib is missing."""
    fmt = plot_format(path)
    if fmt == "png":
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            raise _no_matplotlib(path)
    return fmt


def _no_matplotlib(path: str) -> TraceError:
    return TraceError("a PNG plot needs matplotlib, which is not installed here", Location(path),
                      hint="pip install 'patchkit-profiler[plot]', or write HTML, which needs nothing: "
                           f"--plot {os.path.splitext(path)[0]}.html")


def write_plot(summary: Summary, path: str) -> str:
    """Write the plot; returns its format.  A TraceError when PNG is asked and matplotlib is missing."""
    ranks = [r for r in summary.ranks if r.steps]
    if plot_format(path) == "png":
        data = _png(summary, ranks, path)
    else:
        data = _html(summary, ranks).encode("utf-8")
    _write_whole(path, data)
    return plot_format(path)


def _series(rank: RankSummary) -> List[Tuple[int, float]]:
    """(x, ms): x is the step number, or the position among the rank's steps when a step has none."""
    return [(s.number if s.number is not None else i, s.duration_us / 1000) for i, s in enumerate(rank.steps)]


def _round_up(value: float) -> float:
    """The axis' top: a round number at or above ``value`` whose quarters are round too."""
    if value <= 0:
        return 1.0
    scale = 10 ** math.floor(math.log10(value))
    return next(m * scale for m in (1, 1.2, 2, 4, 6, 8, 10) if m * scale >= value)


def _html(summary: Summary, ranks: Sequence[RankSummary]) -> str:
    points = [p for r in ranks for p in _series(r)]
    x0, x1 = (min(p[0] for p in points), max(p[0] for p in points)) if points else (0, 1)
    y1 = _round_up(max((p[1] for p in points), default=1.0) * 1.05)
    span = (x1 - x0) or 1

    def sx(x: float) -> float:
        return LEFT + (x - x0) / span * (W - LEFT - RIGHT)

    def sy(y: float) -> float:
        return H - BOTTOM - y / y1 * (H - TOP - BOTTOM)

    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           'font-family="sans-serif" font-size="12">',
           f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="#333"/>',
           f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="#333"/>',
           f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 8}" text-anchor="middle">step</text>',
           f'<text x="14" y="{(TOP + H - BOTTOM) / 2}" transform="rotate(-90 14 {(TOP + H - BOTTOM) / 2})" '
           'text-anchor="middle">step time (ms)</text>']
    for i in range(5):
        y = y1 * i / 4
        svg.append(f'<text x="{LEFT - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:g}</text>'
                   f'<line x1="{LEFT}" y1="{sy(y):.1f}" x2="{W - RIGHT}" y2="{sy(y):.1f}" stroke="#eee"/>')
    ticks = sorted({p[0] for p in points})
    for x in ticks[::-(-len(ticks) // 20)]:  # at most 20 labels
        svg.append(f'<text x="{sx(x):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{x}</text>')
    for n, rank in enumerate(ranks):
        colour, series, name = COLOURS[n % len(COLOURS)], _series(rank), html.escape(rank.label)
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in series)
        svg.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        svg += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{colour}"><title>{name}, step {x}: '
                f'{y:.3f} ms</title></circle>' for x, y in series]
        ly = TOP + 16 * n
        svg.append(f'<rect x="{W - RIGHT + 12}" y="{ly}" width="12" height="3" fill="{colour}"/>'
                   f'<text x="{W - RIGHT + 30}" y="{ly + 5}">{name}</text>')
    svg.append("</svg>")
    rows = "".join(f"<tr><td>{html.escape(r.label)}</td><td>{s.number if s.number is not None else ''}</td>"
                   f"<td>{s.duration_us / 1000:.3f}</td></tr>" for r in ranks for s in r.steps)
    title = html.escape(f"Step time per rank: {summary.path}")
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n<body>'
            f'<h1 style="font:16px sans-serif">{title}</h1>\n{"".join(svg)}\n'
            '<table style="font:12px sans-serif"><tr><th>rank</th><th>step</th><th>ms</th></tr>'
            f"{rows}</table>\n<p style=\"font:11px sans-serif\">written by patchkit summary</p></body></html>\n")


def _png(summary: Summary, ranks: Sequence[RankSummary], path: str) -> bytes:
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        raise _no_matplotlib(path) from None
    import io

    figure, axes = pyplot.subplots(figsize=(8, 4))
    for n, rank in enumerate(ranks):
        series = _series(rank)
        axes.plot([x for x, _ in series], [y for _, y in series], marker="o", color=COLOURS[n % len(COLOURS)],
                  label=rank.label)
    axes.set_xticks(sorted({x for rank in ranks for x, _ in _series(rank)}))
    axes.set_xlabel("step")
    axes.set_ylabel("step time (ms)")
    axes.set_title(f"Step time per rank: {os.path.basename(summary.path.rstrip(os.sep)) or summary.path}")
    axes.set_ylim(bottom=0)
    if ranks:
        axes.legend()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    pyplot.close(figure)
    return buffer.getvalue()


def _write_whole(path: str, data: bytes) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".patchkit-plot-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a plot is for sharing
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
