"""The commands after the capture: ``analyse``, ``summary`` and ``compare``, over :mod:`patchkit.traces`.

Messages and the analysis tools' own lines go to stderr; summaries,
comparisons and ``--json`` to stdout.
"""

from __future__ import annotations

import json
import os
from typing import List

import click

from patchkit.cli.progress import bar
from patchkit.core.errors import Location, TraceError
from patchkit.core.printable import printable

TOOLS_EXTRA = "pip install 'patchkit-profiler[analysis]'"


def _say(message: str) -> None:
    click.echo(printable(message), err=True)


def _relay(line: str) -> None:
    """A line an analysis tool printed, indented under patchkit's own messages."""
    click.echo(f"  | {printable(line)}", err=True)


def _lines(lines: List[str]) -> str:
    """Lines for the terminal: names from traces and manifests may hold control characters (ESC, BEL, CR)."""
    return "\n".join(printable(line) for line in lines)


def _ms(us: float) -> str:
    return f"{us / 1000:.3f}"


def _signed_ms(us: float) -> str:
    return f"{'+' if us >= 0 else '-'}{abs(us) / 1000:.3f}"


def _percent(delta: float, base: float) -> str:
    return f"{100 * delta / base:+.1f}%" if base else "n/a"


# ---------------------------------------------------------------- analyse


@click.command("analyse")
@click.argument("path", type=click.Path())
@click.option("--export-type", type=click.Choice(["text", "db"]), default=None,
              help="export type for torch_npu's parse (default: the one each capture recorded); text is what "
                   "`patchkit summary` reads")
@click.option("--no-cluster", is_flag=True, help="parse only; do not run msprof-analyze cluster")
def analyse_cmd(path: str, export_type, no_cluster: bool) -> None:
    """Parse torch_npu captures taken with analysis off, then run msprof-analyze's cluster analysis.

    PATH is one *_ascend_pt folder or a folder holding them (every rank's,
    as `patchkit collect` lays them out).  The parse is torch_npu's own
    torch_npu.profiler.profiler.analyse: it runs where torch_npu and CANN
    are installed.  Captures already parsed are left as they are.  When
    msprof-analyze is installed (patchkit-profiler[analysis]), `msprof-analyze
    cluster -d PATH` follows and writes PATH/cluster_analysis_output.
    """
    from patchkit.traces import analyse

    folders = analyse.capture_folders(path)
    outcomes = analyse.parse(folders, export_type, on_line=_relay)
    for o in outcomes:
        _say(f"{o.state}: {o.folder}" + (f" ({o.detail})" if o.detail else ""))
    failed = [o for o in outcomes if o.state == "failed"]
    if failed:
        raise TraceError(f"{len(failed)} of {len(outcomes)} capture(s) could not be parsed", Location(failed[0].folder),
                         hint="torch_npu's own messages above say why; no cluster analysis was run")
    root = os.path.abspath(path)
    if no_cluster:
        _say("cluster analysis skipped (--no-cluster)")
        return
    if len(folders) == 1 and os.path.commonpath([folders[0], root]) == folders[0]:  # PATH is the capture itself
        _say("one capture: no cluster analysis (run `patchkit analyse` on the folder that holds every rank's "
             "*_ascend_pt)")
        return
    run = analyse.cluster(root, on_line=_relay)
    if run is None:
        _say(f"note: msprof-analyze is not installed: no cluster analysis ({TOOLS_EXTRA}, then `msprof-analyze "
             f"cluster -d {root}`)")
        return
    if run.returncode != 0:
        raise TraceError(f"msprof-analyze cluster failed (exit status {run.returncode})", Location(root),
                         hint="its messages above say why; the parsed captures are in place, `patchkit summary` "
                              "reads them")
    _say(f"msprof-analyze cluster: wrote {run.output_dir}")


# ---------------------------------------------------------------- summary


@click.command("summary")
@click.argument("path", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False), default=None,
              help="also write step time per rank to FILE: .html (no dependency) or .png (matplotlib)")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="operators shown per rank")
def summary_cmd(path: str, as_json: bool, plot_file, top: int) -> None:
    """Per rank: the recorded steps, their durations, the top operators by self time; and the slowest rank.

    PATH is a trace file, a *_ascend_pt folder, or a folder of captures
    (a recipe's save_path, or a folder `patchkit collect` filled).
    torch.profiler traces are read from their Chrome trace events;
    torch_npu captures from the text files of ASCEND_PROFILER_OUTPUT
    (step_trace_time.csv, op_statistic.csv, kernel_details.csv).
    """
    from patchkit.traces.summary import summarise

    if plot_file:
        from patchkit.traces.plot import require

        try:
            require(plot_file)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--plot") from None
    with bar(enabled=not as_json) as progress:
        result = summarise(path, progress)
    click.echo(json.dumps(result.to_json(top), indent=2) if as_json else _lines(_summary_lines(result, top)))
    if plot_file:
        from patchkit.traces.plot import write_plot

        fmt = write_plot(result, plot_file)
        _say(f"wrote {plot_file} (step time per rank, {fmt.upper()})")


def _summary_lines(result, top: int) -> List[str]:
    formats = sorted({r.format for r in result.ranks})
    kinds = " and ".join({"torch": "torch.profiler traces", "ascend": "torch_npu captures"}[f] for f in formats)
    captures = sum(len(r.captures) for r in result.ranks)
    out = [f"{result.path}: {len(result.ranks)} rank(s), {captures} capture(s) ({kinds})"]
    for r in result.ranks:
        out.append("")
        if r.steps:
            numbers = [s.number for s in r.steps if s.number is not None]
            span = f" (#{min(numbers)}-#{max(numbers)})" if numbers else ""
            durations = [s.duration_us for s in r.steps]
            out.append(f"{r.label}: {len(r.steps)} step(s){span}, mean {_ms(r.mean_step_us)} ms "
                       f"(min {_ms(min(durations))}, max {_ms(max(durations))}; from {r.steps_from})")
            out.append("  steps: " + "  ".join(f"#{s.number if s.number is not None else '-'} "
                                                f"{_ms(s.duration_us)} ms" for s in r.steps))
        else:
            out.append(f"{r.label}: no step recorded (no ProfilerStep# span: was the profiler stepped?)")
        if r.ops:
            out.append(f"  top operators by self time (from {r.ops_from}):")
            out.append(f"  {'ms/step':>10}  {'total ms':>10}  {'calls':>7}  operator  [kind]")
            out += [f"  {_ms(r.per_step(o)):>10}  {_ms(o.self_us):>10}  {o.calls:>7}  {o.name}  [{o.kind}]"
                    for o in r.ops[:top]]
        for c in r.captures:
            source = f"rank from {c.rank_from}" if c.rank_from else "rank unknown"
            out.append(f"  capture: {c.path} ({source})")
        out += [f"  note: {note}" for note in r.notes]
    out.append("")
    if not result.slowest:
        out.append("slowest rank: needs two ranks or more with recorded steps")
    for s in result.slowest:
        role = f" among {s.role}" if s.role else ""
        out.append(f"slowest rank{role}: {s.slowest}, mean step {_ms(s.slowest_mean_us)} ms, {_ms(s.delta_us)} ms "
                   f"({100 * s.ratio:.1f}%) longer than the fastest, {s.fastest} ({_ms(s.fastest_mean_us)} ms)")
    return out


# ---------------------------------------------------------------- compare


@click.command("compare")
@click.argument("a", type=click.Path())
@click.argument("b", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="operators shown per rank (largest changes first)")
@click.option("--output", "output_dir", type=click.Path(file_okay=False), default=".", show_default=True,
              help="where msprof-analyze compare writes its workbooks (torch_npu data)")
@click.option("--no-msprof", is_flag=True, help="do not run msprof-analyze compare on torch_npu data")
def compare_cmd(a: str, b: str, as_json: bool, top: int, output_dir: str, no_msprof: bool) -> None:
    """Two captures, or two folders of them, side by side: step time and top operators, with B - A.

    Ranks are matched by rank and role.  Operator times are per recorded
    step.  For torch_npu captures, `msprof-analyze compare` (when installed)
    writes its detailed comparison under --output, one folder per rank.
    """
    from patchkit.traces.compare import compare, msprof_commands
    from patchkit.traces.summary import summarise

    with bar(enabled=not as_json) as progress:
        result = compare(summarise(a, progress), summarise(b, progress), top)
    if not result.pairs:
        raise TraceError(printable(f"no rank of A matches a rank of B (A: {', '.join(result.only_a)}; "
                                   f"B: {', '.join(result.only_b)})"), Location(b),
                         hint="compare two single captures, or two folders of the same ranks and roles")
    click.echo(json.dumps(result.to_json(), indent=2) if as_json else _lines(_compare_lines(result)))
    for side, summary in (("A", result.a), ("B", result.b)):
        for r in summary.ranks:
            for note in r.notes:
                _say(f"note: {side} {r.label}: {note}")
    commands = msprof_commands(result, os.path.abspath(output_dir))
    if not commands or no_msprof:
        return
    from patchkit.traces.analyse import msprof_path, run_tool

    if msprof_path() is None:
        _say(f"note: msprof-analyze is not installed: no detailed comparison of the torch_npu captures "
             f"({TOOLS_EXTRA})")
        return
    failed = []
    for command, where in commands:
        _say("running: " + " ".join(command))
        run = run_tool(command, _relay, where)
        if run.returncode:
            failed.append(run)
        else:
            _say(f"msprof-analyze compare: wrote {where}")
    if failed:
        raise TraceError(f"msprof-analyze compare failed (exit status {failed[0].returncode})",
                         Location(failed[0].command[3]), hint="its messages above say why; the comparison "
                                                             "printed above stands")


def _compare_lines(result) -> List[str]:
    out = [f"A: {result.a.path}", f"B: {result.b.path}"]
    for p in result.pairs:
        out.append("")
        if p.delta_us is None:
            out.append(f"{p.label}: step time not comparable (A {len(p.a.steps)} step(s), B {len(p.b.steps)})")
        else:
            out.append(f"{p.label}: mean step {_ms(p.a_mean_us)} ms -> {_ms(p.b_mean_us)} ms: "
                       f"{_signed_ms(p.delta_us)} ms ({_percent(p.delta_us, p.a_mean_us)}); "
                       f"A {len(p.a.steps)} step(s), B {len(p.b.steps)}")
        if p.ops:
            names = [printable(f"{o.name}  [{o.kind}]") for o in p.ops]  # escaped before the column is measured
            width = max(len(n) for n in names + ["operator  [kind]"])
            out.append(f"  {'operator  [kind]':<{width}}  {'A ms/step':>10}  {'B ms/step':>10}  {'B - A':>10}")
            out += [f"  {n:<{width}}  {_ms(o.a_us):>10}  {_ms(o.b_us):>10}  {_signed_ms(o.delta_us):>10}"
                    for n, o in zip(names, p.ops)]
    if result.only_a:
        out.append(f"only in A: {', '.join(result.only_a)}")
    if result.only_b:
        out.append(f"only in B: {', '.join(result.only_b)}")
    return out
