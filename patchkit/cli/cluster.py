"""What diff, apply, revert and status say with ``--ray`` (:func:`patchkit.cli.options.ray_option`): one line per
node, then a summary.

Each function takes the Ray address, then the command's own arguments.  The patches and status go to stdout,
the rest to stderr; a command that failed on any node exits 1 naming each such node and why.  The cluster
layer is imported when a command runs with ``--ray``, not when the command line starts.
"""

from __future__ import annotations

import sys
from typing import Dict, List, Optional, Sequence

import click

from patchkit.cli.options import write_output
from patchkit.cli.progress import bar


def _line(r) -> str:
    """``<node id> (<ip>)  <recipe>  <state>: <message>`` on one line."""
    message = " ".join(r.message.replace("\n  hint:", "; hint:").split("\n"))
    if r.version_skipped:
        message += f"; version check skipped (--skip-version-check): {r.version_skipped}"
    if r.version_note:
        message += f"; note: {r.version_note}"
    return f"{r.node}  {r.recipe or '-'}  {r.state}" + (f": {message}" if message else "")


def _fail_if_any(results: List, what: str) -> None:
    """Exit 1 (a ClusterError) naming every node that failed, after their lines are out."""
    from patchkit.cluster.ray import ClusterError

    failed = [r for r in results if not r.ok]
    if not failed:
        return
    reasons = "; ".join(f"node {r.node_id} ({r.ip}): {r.message.splitlines()[0] if r.message else r.state}"
                        for r in failed)
    raise ClusterError(f"{what} failed on {len(failed)} of {len(results)} node(s): {reasons}",
                       hint="fix that node's environment (see the line for it above), then run the command again")


def apply(address: str, recipe: str, overrides: Sequence[str], root: Optional[str], backend: Optional[str],
          versions=(False, None), as_json: bool = False) -> None:
    import patchkit
    from patchkit.cluster import ray as cluster
    from patchkit.cluster.node import NodeState

    s = patchkit.load(recipe, overrides, backend)  # a bad override fails here, before the cluster is touched
    with bar() as progress:
        results = cluster.apply(address, recipe, overrides, backend, root, *versions, progress=progress)
    if as_json:
        import json
        from dataclasses import asdict

        click.echo(json.dumps([asdict(r) for r in results], indent=2))
    for r in results:
        click.echo(_line(r), err=as_json)
    ok = all(r.ok for r in results)
    if ok:
        changed = sum(r.changed for r in results)
        click.echo(f"{s.id}: applied on {len(results)} node(s) ({changed} changed); undo with "
                   f"`patchkit revert --ray {address} {s.id}`", err=True)
        for note in s.recipe.notes:  # only after a success, like apply without --ray
            click.echo(f"note: {note}", err=True)
    if any(r.state == NodeState.ROLLBACK_FAILED for r in results):
        what = f"apply {s.id} (and putting back the nodes it changed; see `patchkit status --ray {address}`)"
    else:
        what = f"apply {s.id} (no node keeps a change from this command)"
    _fail_if_any(results, what)


def diff(address: str, recipe: str, overrides: Sequence[str], root: Optional[str], backend: Optional[str],
         output: Optional[str], stat: bool, versions=(False, None)) -> None:
    import patchkit
    from patchkit.cluster import ray as cluster
    from patchkit.engine.diff import colour
    from patchkit.engine.diff import stat as diffstat

    patchkit.load(recipe, overrides, backend)
    with bar() as progress:
        results = cluster.plan(address, recipe, overrides, backend, root, *versions, progress=progress)
    groups: Dict[str, List] = {}
    for r in results:
        if r.ok and r.diff:
            groups.setdefault(r.diff, []).append(r)
    parts = []
    for text, rs in groups.items():  # nodes with the same patch share it
        head = f"# node(s) {', '.join(r.node for r in rs)}\n"
        if stat:
            parts.append(head + diffstat(_split_diff(text)))
        else:
            parts.append(head + text)
    combined = "".join(parts)
    if output and not stat:
        write_output(output, combined)
        click.echo(f"wrote {output}", err=True)
    elif combined:
        click.echo((colour(combined) if sys.stdout.isatty() and not stat else combined).rstrip("\n"))
    for r in results:
        click.echo(_line(r), err=True)
    _fail_if_any(results, f"diff {recipe}")


def _split_diff(text: str):
    """``(relpath, patch)`` per file of a unified diff with ``a/``/``b/`` paths."""
    files, current, lines = [], None, []
    for line in text.splitlines(keepends=True):
        if line.startswith("--- a/"):
            if current is not None:
                files.append((current, "".join(lines)))
            current, lines = line[len("--- a/"):].rstrip("\n"), []
        lines.append(line)
    if current is not None:
        files.append((current, "".join(lines)))
    return files


def revert(address: str, recipes: Sequence[str], everything: bool, force: bool, root: Optional[str]) -> None:
    from patchkit.cluster import ray as cluster

    with bar() as progress:
        results = cluster.revert(address, recipes, everything, root, force, progress=progress)
    for r in results:
        click.echo(_line(r))
    _fail_if_any(results, "revert")


def status(address: str, as_json: bool, root: Optional[str] = None) -> None:
    from patchkit.cluster import ray as cluster
    from patchkit.core.outcome import Status

    with bar(enabled=not as_json) as progress:
        results = cluster.status(address, root, progress=progress)
    if as_json:
        import json

        click.echo(json.dumps({"nodes": [{"node_id": r.node_id, "ip": r.ip, "ok": r.ok, "home": r.home,
                                          "state": str(r.state), "message": r.message, "files": r.files}
                                         for r in results]}, indent=2))
    else:
        for r in results:
            if not r.ok or not r.files:
                click.echo(_line(r))
            for f in r.files:
                if f["state"] == Status.INTERRUPTED:
                    click.echo(f"{r.node}  interrupted: {f['path']} (the next apply or revert on the node puts it back)")
                    continue
                warn = "" if f["backup"] == "ok" else "  [no record: no backup]" if f["backup"] is None \
                    else "  [backup missing or corrupted]"
                click.echo(f"{r.node}  {','.join(f['recipes'])}  {f['state']}: {f['path']} "
                           f"({f['distribution']} {f['version']}){warn}")
    _fail_if_any(results, "status")
