"""``patchkit traces`` and ``patchkit collect``: the captures found (:mod:`patchkit.traces.captures`) and copied
(:mod:`patchkit.traces.collect`), here or, with ``--ray``, on every node (:mod:`patchkit.cluster.gather`)."""

from __future__ import annotations

import json
import os
import sys
from typing import Dict, List, Sequence

import click

from patchkit.cli.options import ray_option
from patchkit.cli.progress import bar, size_text

FOLDERS_HELP = ("With no DIR: this project's captures, those under the save paths of the applied recipes (a "
                "relative save path is taken from the current directory), then those of the current directory "
                "(the save paths under it that the runtime listed in $PATCHKIT_HOME/captures).  --all adds every "
                "other folder of that list: other projects that share the state folder.")
TRACES_RAY_HELP = "every alive node of this Ray cluster (or auto): each node's captures in one table"
COLLECT_RAY_HELP = "every alive node of this Ray cluster (or auto); DEST is written here"
ALL_HELP = "with no DIR: also every other capture folder listed in $PATCHKIT_HOME/captures (other projects')"
STRICT_HELP = "exit 1 when a capture is broken (the listing exits 0 when it worked)"


def _with_folders(command: click.Command) -> None:
    """The command's help and :data:`FOLDERS_HELP` as one text (the docstring's indentation taken off first:
    click takes it off the whole text, and text after the docstring has none, so click would keep it)."""
    import inspect

    command.help = inspect.cleandoc(command.help or "") + "\n\n" + FOLDERS_HELP


def _say(message: str) -> None:
    click.echo(message, err=True)


def _rows(caps) -> List[List[str]]:
    rows = [["RECIPE", "RANK", "ROLE", "STEPS", "SIZE", "NODE", "PATH"]]
    for c in caps:
        path = c.traces[0].path if c.traces else (c.manifest or c.folder)
        more = f" (+{len(c.traces) - 1})" if len(c.traces) > 1 else ""
        size = size_text(c.size) if c.traces else "-" if c.problem else f"({c.backend} report)"
        rows.append([c.recipe or "?", "-" if c.rank is None else str(c.rank), c.role or "-", c.steps,
                     size, c.node, path + more + ("  BROKEN (see below)" if c.problem else "")])
    return rows


def _table(rows: List[List[str]]) -> None:
    from patchkit.core.printable import printable

    rows = [[printable(cell) for cell in r] for r in rows]  # recipe, role, node, path: written by others
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths)) + "  " + r[-1])


def _problems(caps, strict: bool) -> None:
    """Each broken capture, then how many of how many; exit 1 for one only when ``strict``."""
    from patchkit.core.printable import printable

    broken = [c for c in caps if c.problem]
    for c in broken:
        click.echo(f"{'error' if strict else 'broken'}: {printable(c.problem)}\n  hint: capture it again, or move it "
                   "aside; `patchkit collect --skip-broken` collects the others", err=True)
    if broken:
        _say(f"{len(caps)} capture(s), {len(broken)} broken" + ("" if strict else " (--strict: exit 1 when one is)"))
    if broken and strict:
        sys.exit(1)


def traces_on_every_node(address: str, folders: Sequence[str], as_json: bool, strict: bool) -> None:
    """``traces --ray``: every alive node's captures in one table, and each node that could not be searched."""
    from patchkit.cluster import gather
    from patchkit.core.printable import printable

    folders = list(folders)
    with bar(enabled=not as_json) as progress:
        scans = gather.scan(address, folders, progress=progress)
    caps = gather.found(scans, folders)
    if as_json:
        click.echo(json.dumps({"nodes": [{"node_id": s.node_id, "ip": s.ip, "ok": s.ok, "message": s.message}
                                         for s in scans], "captures": [c.to_json() for c in caps]}, indent=2))
    else:
        _table(_rows(caps))
    for s in scans:
        if not s.ok:
            _say(printable(f"error: node {s.node}: {s.message}"))
    _problems(caps, strict)
    if not all(s.ok for s in scans):
        sys.exit(1)


@click.command()
@click.argument("folders", nargs=-1, metavar="[DIR]...", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.option("--all", "all", is_flag=True, help=ALL_HELP)  # named as the option: --ray's refusal names it
@click.option("--strict", is_flag=True, help=STRICT_HELP)
@ray_option(traces_on_every_node, refuse=["all"], help=TRACES_RAY_HELP)
def traces(folders: Sequence[str], as_json: bool, strict: bool, **flags: bool) -> None:
    """The captures under DIR: recipe, rank, role, steps, size, node, path; newest first.

    A capture is one recording window of one process: the trace (a torch
    *.pt.trace.json, a torch_npu *_ascend_pt folder) and the manifest the
    runtime wrote beside it (in patchkit-manifests/).  Traces found without a
    manifest are listed too, with what their name and content say.  A broken
    capture is a row marked BROKEN, said below the table.
    """
    from patchkit.traces import places
    from patchkit.traces.captures import search

    every = flags["all"]
    caps = search(list(folders), every=every)
    if as_json:
        click.echo(json.dumps({"captures": [c.to_json() for c in caps],
                               "broken": sum(1 for c in caps if c.problem)}, indent=2))
    else:
        _table(_rows(caps))
    more = 0 if folders or every else places.others()
    if more and not as_json:
        _say(f"note: {more} other capture folder(s) in $PATCHKIT_HOME/captures are other projects': "
             "`patchkit traces --all` lists them too")
    _problems(caps, strict)


_with_folders(traces)


def collect_on_every_node(address: str, dest: str, folders: Sequence[str], skip_broken: bool) -> None:
    """``collect --ray``: every alive node's captures copied into DEST, here."""
    from patchkit.cluster import gather

    with bar() as progress:
        result, scans = gather.collect(address, dest, list(folders), skip_broken=skip_broken, progress=progress)
    for s in scans:
        if not s.ok:
            _say(f"warning: node {s.node} was not searched (--skip-broken): {s.message}")
    _report(result)


@click.command()
@click.argument("dest", type=click.Path())
@click.argument("folders", nargs=-1, metavar="[DIR]...", type=click.Path(file_okay=False))
@click.option("--skip-broken", is_flag=True, help="collect the other captures when one is cut off or unreadable")
@click.option("--all", "all", is_flag=True, help=ALL_HELP)
@ray_option(collect_on_every_node, refuse=["all"], help=COLLECT_RAY_HELP)
def collect(dest: str, folders: Sequence[str], skip_broken: bool, **flags: bool) -> None:
    """Copy every capture into DEST, one folder per recipe, laid out for the analysis tools.

    \b
    DEST/RECIPE[.ROLE]/rankR_*.pt.trace.json   torch traces (Holistic Trace Analysis, TensorBoard)
    DEST/RECIPE[.ROLE]/*_ascend_pt/            npu captures (msprof-analyze cluster -d DEST/RECIPE)
    DEST/RECIPE[.ROLE]/patchkit-manifests/     each capture's manifest, saying where it came from

    Nothing is overwritten: DEST must be new, empty, or an earlier collect's
    folder.  Each file is checked against the source's size and sha256 before
    it gets its name.  Run the same command again after an interruption: it
    copies what is missing and keeps what is complete.
    """
    from patchkit.traces.collect import collect_here

    with bar() as progress:
        result = collect_here(dest, list(folders), skip_broken=skip_broken, progress=progress,
                              every=flags["all"])
    _report(result)


_with_folders(collect)


def _report(result) -> None:
    """What collect did; every name from a manifest or a node is shown with its control characters escaped."""
    from patchkit.traces.collect import dest_path, group_of, shown

    per: Dict[int, List] = {}
    for f in result.files:
        per.setdefault(f.capture, []).append(f)
    copied = [f for f in result.files if f.state == "copied"]
    for index, cap in enumerate(result.captures):
        files = per.get(index, [])
        state = "copied" if any(f.state == "copied" for f in files) else "already there" if files else "manifest"
        rank = "-" if cap.rank is None else shown(cap.rank, 40)
        for t in cap.traces:
            into = dest_path(result.dest, cap, t.name)
            role = " " + shown(cap.role, 200) if cap.role else ""
            click.echo(f"{state}: {shown(cap.recipe or '?', 200)} rank {rank}{role} "
                       f"steps {shown(cap.steps, 80)}: {shown(cap.node)}:{shown(t.path)} -> {into} "
                       f"({size_text(t.size)})")
        if not cap.traces:
            click.echo(f"{state}: {shown(cap.recipe, 200)} rank {rank} steps {shown(cap.steps, 80)}: {shown(cap.node)}:"
                       f"{shown(cap.manifest)} (the {shown(cap.backend)} report itself is where {shown(cap.backend)} "
                       "wrote it)")
    for cap in result.skipped:
        _say(f"skipped (--skip-broken): {shown(cap.problem, 2000)}")
    for note in result.notes:
        _say(f"note: {shown(note, 2000)}")
    _say(f"{len(copied)} file(s) copied ({size_text(sum(f.size for f in copied))}), "
         f"{len(result.files) - len(copied)} already there; {len(result.captures)} capture(s) in {result.dest}")
    for group in result.groups:
        folder = os.path.join(result.dest, group)
        kinds = {t.kind for c in result.captures if group_of(c) == group for t in c.traces}
        if "folder" in kinds:
            _say(f"{folder}: `msprof-analyze cluster -d {folder}` (after `patchkit analyse` if analysis was off)")
        if "file" in kinds:
            _say(f"{folder}: Holistic Trace Analysis `TraceAnalysis(trace_dir=\"{folder}\")`, "
                 f"or `tensorboard --logdir {folder}`")
