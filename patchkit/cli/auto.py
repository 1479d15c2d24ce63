"""``patchkit attach --auto``: what it says while it watches a job, finds its step and records it."""

from __future__ import annotations

import os
import shlex
import sys
import threading
from functools import partial
from typing import List, Optional, Sequence

import click

from patchkit.core.printable import printable

say = partial(click.echo, err=True)
SHOWN = 10  # candidates listed for each process


def _said(a) -> None:
    from patchkit.cli.attachlines import process_line

    if a.state == "watching":
        return say(f"pid {a.pid}: watching its threads' stacks (nothing of the job's is changed)")
    if a.state == "watched":
        return None
    say(printable(process_line(a.pid, a.state, a.status)))


def _seconds(x: float) -> str:
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def candidate_lines(found, chosen: Optional[int]) -> List[str]:
    """The candidates as ``patchkit points`` shows places: number (``*`` the chosen), file:line, the code, the
    function, how often it repeats, how regularly, its share of the time, the repetitions seen, what each holds."""
    out = []
    for i, c in enumerate(found.candidates[:SHOWN]):
        mark = "*" if i == chosen else " "
        where = f"{os.path.basename(c.file)}:{c.line}"
        code = c.code if len(c.code) <= 40 else c.code[:37] + "..."
        out.append(f"  {i + 1:>2}{mark} {c.kind:<8} {where:<28} {code:<40}  in {c.qualname}")
        detail = (f"every {_seconds(c.period)} ({c.regularity:.0%} regular), {c.share:.0%} of the time, "
                  f"{c.repeats} {'turns' if c.kind == 'loop' else 'calls'} seen")
        out.append(f"       {detail}" + (f"; each holds {c.holds}" if c.holds else ""))
    if len(found.candidates) > SHOWN:
        out.append(f"  ... and {len(found.candidates) - SHOWN} more (--pick K takes any of them)")
    return out


def top_lines(found) -> List[str]:
    return [f"  {share:.0%}  {os.path.basename(file)}:{line}  in {qualname}" for file, line, qualname, share in
            found.top]


def _warm() -> None:
    """The modules that write the recipe and plan it (libcst, the engine): imported while the job is watched."""
    import importlib

    for name in ("patchkit.authoring.newrecipe", "patchkit.engine.examples", "patchkit.state.planning"):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - imported again, and said, where it is used
            pass


def auto(args: Sequence[str], steps: int, pids: Optional[str], match: Optional[str], timeout: float,
         backend: Optional[str], seconds: Optional[float], pick: Optional[int], dry_run: bool,
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
        raise click.ClickException("no process answered with what it saw; nothing recorded")
    index = []
    for p in props:
        i, why = watching.chosen(p, pick)
        index.append(i)
        w = s.watches[p.pid]
        say(printable(f"pid {p.pid}: watched {w.last - w.first:.1f} s ({w.samples} looks, {w.cost:.1%} of its time; "
                      f"stopped: {w.stopped}); " + (f"{len(p.found.candidates)} candidate(s), judged by each "
                                                    f"{p.found.marker}:" if p.found.marker else
                                                    f"{len(p.found.candidates)} candidate(s):")))
        for line in candidate_lines(p.found, i):
            say(printable(line))
        if i is None:
            say(printable(f"pid {p.pid}: no step is clear: {why}"))
            if p.found.top:
                say("  where its time went (the innermost frames of the job's own code):")
                for line in top_lines(p.found):
                    say(printable(line))
        else:
            say(printable(f"pid {p.pid}: chosen {i + 1}: {why}"))
    props, index = watching.clear_first(props, index)
    for line in watching.agree(props, index):
        say(printable(line))
    first = props[0]
    if index[0] is None:
        raise click.ClickException("no step to record: nothing was changed in the job; attach with a recipe of your "
                                   "own (`patchkit points` shows a function's places), or watch longer (--watch)")
    if dry_run and not save:
        say("--dry-run: nothing written, nothing recorded (--save FILE writes the recipe)")
        return None
    if first.job is None:
        raise click.ClickException(f"pid {first.pid}: its files could not be found from /proc: no recipe written")
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
