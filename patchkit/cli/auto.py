"""``patchkit attach --auto``: what it says while it watches a job, finds its step and records it."""

from __future__ import annotations

import os
import shlex
import sys
import threading
from functools import partial
from typing import List, Optional, Sequence

import click

from patchkit.attach.process import AttachError
from patchkit.core.printable import printable

say = partial(click.echo, err=True)


def _said(a) -> None:
    from patchkit.cli.attachlines import process_line

    if a.state == "watching":
        return say(f"pid {a.pid}: watching its threads' stacks (nothing of the job's is changed)")
    if a.state == "watched":
        return None
    say(printable(process_line(a.pid, a.state, a.status)))


def _warm() -> None:
    """The modules that write the recipe and plan it (libcst, the engine): imported while the job is watched."""
    import importlib

    for name in ("patchkit.authoring.newrecipe", "patchkit.engine.examples", "patchkit.state.planning"):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - imported again, and said, where it is used
            pass


def auto(args: Sequence[str], steps: int, pids: Optional[str], match: Optional[str], timeout: float,
         backend: Optional[str], seconds: Optional[float], pick: Optional[str], dry_run: bool,
         save: Optional[str]) -> Optional[List[str]]:
    """Watch, find the step, write its recipe: the arguments of the attach that records it, with the KEY=VALUE
    settings given (None: --dry-run)."""
    from patchkit.attach import auto as watching, autorecipe
    from patchkit.attach import session as attach_session
    from patchkit.cli.attachlines import _interrupts_as_keyboard, _pid

    args = list(args)
    if pids or match:
        wanted, pid = [_pid(p.strip()) for p in (pids or "").split(",") if p.strip()], None
    else:
        if not args:
            raise click.UsageError("give the PID: patchkit attach PID --auto (it finds the step and writes the recipe)")
        pid, wanted, args = _pid(args[0]), [], args[1:]
    named = [a for a in args if "=" not in a]
    if named:
        raise click.UsageError(f"--auto writes the recipe itself: give no RECIPE ({named[0]}), only KEY=VALUE "
                               "settings for it")
    if save and (not save.endswith(".yaml") or os.path.lexists(save)):
        raise click.UsageError(f"--save {save}: " + ("a recipe file ends in .yaml" if not save.endswith(".yaml") else
                                                      "it exists; patchkit never replaces a recipe file"))
    seconds = watching.WATCH_DEFAULT if seconds is None else seconds
    procs = attach_session.processes(pid, wanted, match)
    s = watching.Watching([p.pid for p in procs], seconds)
    s.prepare(pass_over=bool(match))
    for p in s.passed:
        say(printable(f"pid {p.pid}: passed over: {p.why}; {printable(p.command)[:120]}"))
    from patchkit.runtime.attach.watch import REPEATS

    say(f"watching {len(s.attached)} process(es) for at most {seconds:g} s (--watch SECONDS), until their step "
        f"has repeated {REPEATS} times; Ctrl-C stops, and nothing of the job's is changed")
    _interrupts_as_keyboard()
    warm = threading.Thread(target=_warm, name="patchkit-imports", daemon=True)
    warm.start()  # while the job is watched, this command has nothing else to do
    if not watching.watch(s, _said, timeout):
        say("interrupted: each watcher was asked out; nothing of the job's was changed, nothing recorded")
        sys.exit(130)
    for p_id, why in s.unread.items():
        say(printable(f"pid {p_id}: its watch is unreadable: {why}"))
    props = watching.found(s)
    if not props:
        raise AttachError("no process answered with what it saw; nothing recorded", None,
                          "each process's line above says why; attach again")
    index = []
    for p in props:
        i, why = watching.chosen(p, pick)
        index.append(i)
        for line in watching.listing(p, i, why, s.watches[p.pid]):
            say(printable(line))
    props, index = watching.clear_first(props, index)
    for line in watching.agree(props, index):
        say(printable(line))
    first = props[0]
    if index[0] is None:
        raise AttachError("no step to record: nothing was changed in the job", None,
                          "watch longer (--watch SECONDS), or attach with a recipe of your own (`patchkit points` "
                          "shows a function's places)")
    if dry_run and not save:
        say("--dry-run: nothing written, nothing recorded (--save FILE writes the recipe; --pick FILE:LINE, as "
            "listed, records another candidate on the next watch)")
        return None
    if first.job is None:
        raise AttachError(f"pid {first.pid}: its files could not be found from /proc: no recipe written", None,
                          "write the recipe with `patchkit new` from the candidate listed above")
    written = autorecipe.write(first.found.candidates[index[0]], first.job, first.uid, save,
                               backend or ("npu" if s.watches[first.pid].npu else "torch"))  # what the job imported
    target = f"--pids {','.join(map(str, wanted))}" if wanted else f"--match {shlex.quote(match)}" if match else \
        str(pid)
    say(printable(f"wrote {written.shown}: {written.described[0]}"))
    settings = "".join(f" {shlex.quote(a)}" for a in args)
    say(printable(f"next time, with no watching: patchkit attach {target} {written.shown}{settings} --steps {steps}"))
    if dry_run:
        say("--dry-run: nothing recorded")
        return None
    return ([str(pid)] if pid is not None else []) + [written.shown] + args


def on_every_node(address: str, args: Sequence[str], match: Optional[str], timeout: float, backend: Optional[str],
                  seconds: Optional[float], pick: Optional[str], dry_run: bool,
                  save: Optional[str]) -> Optional[List[str]]:
    """``attach --ray ADDRESS --match TEXT --auto``: every node watches its own processes and lists what it found;
    the first node whose step is clear writes the recipe from its job's files, which is saved here (``--save``, or
    ``./auto-<function>.yaml``) and attached on every node, as ``--ray`` attaches a recipe; the arguments of that
    attach (None: --dry-run, or interrupted)."""
    from patchkit.attach.process import machine
    from patchkit.cluster import autowatch

    args = list(args)
    named = [a for a in args if "=" not in a]
    if named or not match:
        raise click.UsageError("--ray --auto takes --match TEXT and KEY=VALUE settings, no PID or RECIPE")
    if save and (not save.endswith(".yaml") or os.path.lexists(save)):
        raise click.UsageError(f"--save {save}: a new .yaml file (patchkit never replaces a recipe file)")
    job = {"match": match, "seconds": 30.0 if seconds is None else seconds, "pick": pick, "backend": backend,
           "driver": os.getpid(), "machine": machine(), "name": os.path.basename(save)[:-5] if save else None}
    say(printable(f"asking every node to watch each process whose command line holds {match!r} (at most "
                  f"{job['seconds']:g} s); nothing of any job changes"))
    answers, stopped = autowatch.watch_every_node(address, job)
    for node, a in answers:
        say(printable(f"{node}  {a['state']}"))
        for line in a["lines"]:
            say(printable(f"{node}  {line}"))
    if stopped:
        say("interrupted: each node's watchers were asked out; nothing of any job changed")
        sys.exit(130)
    found = [(node, a) for node, a in answers if a["state"] == autowatch.FOUND and a["recipe"]]
    if not found:
        raise AttachError("no node found a step to record: nothing was changed in any job", None,
                          "each node's lines above say what it saw; watch longer (--watch SECONDS)")
    if dry_run and not save:
        say("--dry-run: nothing written, nothing recorded (--save FILE writes the recipe)")
        return None
    node, a = found[0]
    path = save or f"{a['name'] or 'auto-step'}.yaml"
    if os.path.lexists(path):
        raise AttachError(f"{path} exists: patchkit never replaces a recipe file", None, "pass --save FILE")
    why = autowatch.taken(a["recipe"], path)
    if why:
        raise AttachError(f"the recipe node {node} wrote is not taken: {why}", None,
                          "check that node's patchkit (the same version on every node)")
    settings = "".join(f" {shlex.quote(x)}" for x in args)
    say(printable(f"wrote {path} (from node {node}); next time, with no watching: patchkit attach --ray {address} "
                  f"--match {shlex.quote(match)} {path}{settings}"))
    return None if dry_run else [path] + args
