"""``patchkit attach`` and ``patchkit detach``: what they say while getting into a running job and out again."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from functools import partial
from typing import List, Optional, Sequence

import click

from patchkit.cli.attachlines import Said, _interrupts_as_keyboard, _pid, process_line, still_waiting
from patchkit.cli.options import backend_option, ray_option, root_option, version_options
from patchkit.core.printable import printable

say = partial(click.echo, err=True)


def attach(args: Sequence[str], steps: int, pids: Optional[str], match: Optional[str], show_status: bool,
           timeout: float, root: Optional[str], backend: Optional[str], versions, as_json: bool = False,
           skip_empty: bool = False) -> None:
    from patchkit.attach import flow, gdbrun, session as attach_session

    args = list(args)
    if skip_empty:
        raise click.UsageError("--skip-empty is for --ray: it passes over nodes where nothing runs the job")
    if show_status:
        if len(args) != 1:
            raise click.UsageError("give one PID: patchkit attach --status PID")
        from patchkit.cli.detach import status

        return status(_pid(args[0]))
    if pids or match:
        wanted: List[int] = [_pid(p.strip()) for p in (pids or "").split(",") if p.strip()]
        pid = None
    else:
        if len(args) < 2:
            raise click.UsageError("give the PID and the RECIPE: patchkit attach PID RECIPE [KEY=VALUE...]")
        pid, wanted = _pid(args.pop(0)), []
    if not args:
        raise click.UsageError("give the RECIPE to attach")
    recipe, overrides = args[0], args[1:]
    procs = attach_session.processes(pid, wanted, match)
    s = attach_session.Session([p.pid for p in procs], recipe, overrides, backend, root, versions, steps)
    s.prepare(pass_over=bool(match))
    for p in s.passed:  # --match: a process a check of its own refused (not Python, stopped, ...)
        say(printable(f"pid {p.pid}: passed over: {p.why}; {printable(p.command)[:120]}"))
    for a in s.attached:
        say(f"pid {a.pid}: {a.target.python.shown}, in through {a.target.way}; {printable(a.target.proc.command)[:120]}")
    if s.spec.get("version_note"):
        say(f"note: {printable(s.spec['version_note'])}")
    _interrupts_as_keyboard()
    gdbrun.tell_with(say)  # the line that says an interrupt waits for gdb to leave a job
    if flow.through(s, Said(match), timeout, match, still_waiting, _interrupted):
        _finish(s, as_json)
        sys.exit(130)
    _finish(s, as_json)
    if not flow.all_recorded([a for a in s.attached if not flow.passed_over(a, match)]):
        sys.exit(1)  # each process's line said why


def on_every_node(address: str, args: Sequence[str], steps: int, pids: Optional[str], match: Optional[str],
                  show_status: bool, timeout: float, as_json: bool, root: Optional[str], backend: Optional[str],
                  skip_empty: bool = False, versions=(False, None), auto: bool = False, seconds=None, pick=None,
                  dry_run: bool = False, save=None) -> None:
    """``attach --ray``: the ``--match`` session on every alive node, one line per node and per process as each
    node answers; exit 0 only when every node attached at least one process (``--skip-empty``: or matched
    nothing to attach) and each of them ended with the job's own code back.  With ``--auto``, every node
    watches first and the recipe is the first clear step's (:func:`patchkit.cli.auto.on_every_node`)."""
    from patchkit.attach.payload import settings
    from patchkit.cluster import attach as on_nodes
    from patchkit.cluster.ray import ClusterError

    args = list(args)
    if auto:
        from patchkit.cli.auto import on_every_node as auto_on_nodes

        if show_status or pids or root:
            raise click.UsageError("--auto finds the job's own files on each node: no --status, --pids or --root")
        args = auto_on_nodes(address, args, match, timeout, backend, seconds, pick, dry_run, save)
        if args is None:
            return
    elif seconds or pick or dry_run or save:
        raise click.UsageError("--watch, --pick, --dry-run and --save go with --auto")
    if show_status:
        raise click.UsageError("--status reads this machine's records: run `patchkit attach --status PID` on the node")
    if pids or (args and args[0].isdigit()):
        raise click.UsageError("a process id names a process of one node: with --ray, name the processes by their "
                               "command line with --match TEXT")
    if not match:
        raise click.UsageError("--ray needs --match TEXT: each node finds its own processes by their command line")
    if not args:
        raise click.UsageError("give the RECIPE to attach")
    s = settings(args[0], args[1:], backend, steps)  # a bad recipe or setting fails here, before any node is asked
    job = on_nodes.job_for(match, args[0], args[1:], backend, root, versions, steps, timeout)

    def started(n: int) -> None:
        _interrupts_as_keyboard()  # again: ray.init set its own SIGTERM handler
        say(printable(f"asking {n} node(s) to attach {s.id} to every process whose command line holds {match!r}; "
                      "each node answers when its windows have closed"))

    def interrupted(n: int) -> None:
        say(f"interrupted: asking {n} node(s) to put the jobs' own code back (a window in progress closes at its "
            "next step); Ctrl-C again stops waiting")

    results, stopped = on_nodes.attach_every_node(address, job, started, _said_node, interrupted)
    if as_json:
        click.echo(json.dumps([dict(asdict(r), node=r.node, ok=r.ok) for r in results], indent=2))
    if stopped:
        sys.exit(130)
    fine = [r for r in results if r.ok]
    bad = [r for r in results if not r.ok and not (skip_empty and r.state in on_nodes.EMPTY)]
    say(f"{s.id}: {len(fine)} of {len(results)} node(s) recorded {steps} step(s) in "
        f"{sum(len(r.attached) for r in fine)} process(es)")
    if bad:
        empty = any(r.state in on_nodes.EMPTY for r in bad)
        raise ClusterError("; ".join(f"node {r.node}: {r.state}" for r in bad),
                           hint="pass --skip-empty to pass over nodes that run no process of the job (a head node "
                                "that runs no worker)" if empty else "see each node's line above")
    if not fine:
        raise ClusterError(f"no node attached any process whose command line holds {match!r}",
                           hint="--match compares the whole command line: check it with `ps -ef` on a node")


def _said_node(r) -> None:
    """A node's answer: its line, then one per process."""
    from patchkit.attach.flow import why_passed
    from patchkit.cluster.attach import RECORDED

    message = " ".join(r.message.replace("\n  hint:", "; hint:").split())
    if r.state == RECORDED:
        message = f"{len(r.attached)} process(es) recorded, the jobs' own code is back" + (
            f" ({len(r.processes) - len(r.attached)} passed over)" if len(r.processes) > len(r.attached) else "")
    say(printable(f"{r.node}  {r.state}" + (f": {message}" if message else "")))
    for p in r.processes:
        if p["passed_over"]:
            line = f"pid {p['pid']}: passed over: {why_passed(p['state'], p['error'], p.get('reason'))}"
        elif p["state"] == "matched":
            line = f"pid {p['pid']}: matched, not attached; {p['command'][:120]}"
        else:
            line = process_line(p["pid"], p["state"], p)
        say(printable(f"{r.node}  {line}"))


def _interrupted(again: bool) -> None:
    say("interrupted again: each job puts its own code back at its next step by itself" if again else
        "interrupted: putting the job's own code back (a window in progress closes at its next step)")


def _pick(value: Optional[str]) -> Optional[str]:
    """--pick's value: a number from 1, ``FILE:LINE`` or a function's name (matched against what the watch lists)."""
    if value is None:
        return None
    value = value.strip()
    if not value or value.isdigit() and int(value) < 1 or len(value) > 512 or any(ch.isspace() for ch in value):
        raise click.BadParameter(f"{value!r}: give a candidate's number (1, 2, ...), its place as listed "
                                 "(FILE:LINE) or its function's name", param_hint="--pick")
    return value


def _finish(s, as_json: bool) -> None:
    for line in s.left:  # a request folder the bounds left behind
        say(printable(line))
    if as_json:
        keep = ("state", "attached_at", "why", "captures", "error", "targets", "original_code", "steps", "running")
        click.echo(json.dumps([dict({k: a.status.get(k) for k in keep}, pid=a.pid, state=a.state) for a in s.attached]
                              + [p.as_json() for p in s.passed], indent=2))


@click.command("attach")
@click.argument("args", nargs=-1, metavar="PID [RECIPE [KEY=VALUE]...]")
@click.option("--steps", type=click.IntRange(min=1, max=1000), default=1, show_default=True,
              help="steps to record, from the job's next call of the recipe's code")
@click.option("--pids", metavar="PID,PID", help="attach to each of these processes (RECIPE comes first then)")
@click.option("--match", metavar="TEXT", help="attach to every process of yours whose command line holds TEXT")
@click.option("--status", "show_status", is_flag=True, help="say what is attached to PID")
@click.option("--timeout", type=float, default=60, show_default=True,
              help="seconds for each job to take the code (it runs between two bytecodes of its main thread)")
@click.option("--json", "as_json", is_flag=True, help="at the end, what each process did, as JSON on stdout")
@click.option("--skip-empty", is_flag=True, help="with --ray: a node where no process runs the recipe's code (none "
              "matched, or only a launcher) does not fail the command")
@click.option("--auto", is_flag=True, help="no RECIPE: watch the job's stacks, find its step (the loop or function "
              "that runs once per optimizer step, or per model forward), write its recipe and record it")
@click.option("--watch", "seconds", type=click.FloatRange(min=1, max=600), metavar="SECONDS",
              help="with --auto: watch at most this long  [default: 30]")
@click.option("--pick", callback=lambda ctx, param, v: _pick(v), metavar="K|FILE:LINE|NAME",
              help="with --auto: record that candidate instead (its number, its place as listed, or its function's "
              "name: a place or name holds across watches)")
@click.option("--dry-run", is_flag=True, help="with --auto: watch and propose only (--save FILE writes the recipe)")
@click.option("--save", metavar="FILE", help="with --auto: the recipe file to write  [default: ./auto-NAME.yaml]")
@root_option
@backend_option
@version_options
@ray_option(on_every_node, help="with --match: the same attach on every alive node of this Ray cluster (or auto)")
def attach_cmd(args, steps, pids, match, show_status, timeout, as_json, root, backend, skip_empty=False,
               versions=(False, None), auto=False, seconds=None, pick=None, dry_run=False, save=None) -> None:
    """Record the next STEPS steps of a running Python job started without patchkit, then leave it as it was.

    The recipe's instrumented code replaces the code of its functions in the job (Python 3.14+: sys.remote_exec;
    3.10 to 3.13: gdb, at a safe point of the main thread) until the window closes, Ctrl-C, or `patchkit detach
    PID`. KEY=VALUE: recipe settings as for `apply` (not schedule.*: --steps sets the window). With --ray ADDRESS
    --match TEXT, every node of a Ray cluster attaches to its own matching processes. With --auto (no RECIPE) it
    first watches the job's stacks to find its step, and writes the recipe. See docs/attach.md.
    """
    if auto:
        from patchkit.cli.auto import auto as auto_attach

        if show_status or skip_empty or root:
            raise click.UsageError("--auto finds the job's own files: no --status, --skip-empty or --root with it")
        args = auto_attach(args, steps, pids, match, timeout, backend, seconds, pick, dry_run, save)
        if args is None:  # --dry-run
            return
        root = backend = None  # the recipe names the job's own files, and its backend
    elif seconds or pick or dry_run or save:
        raise click.UsageError("--watch, --pick, --dry-run and --save go with --auto")
    attach(args, steps, pids, match, show_status, timeout, root, backend, versions, as_json, skip_empty)
