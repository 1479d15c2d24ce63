"""``patchkit detach`` and ``patchkit attach --status``: what is attached to a job, from another terminal."""

from __future__ import annotations

import sys
from functools import partial

import click

from patchkit.cli.attachlines import _steps_text
from patchkit.core.printable import printable

say = partial(click.echo, err=True)


def status(pid: int) -> None:
    from patchkit.attach import records

    found = records.status(pid)
    if not found:
        say(f"pid {pid}: nothing attached from this PATCHKIT_HOME")
        return
    for s in found:
        what = _steps_text(s.get("captures", [])) if s.get("captures") else "waiting for its first step" \
            if s.get("state") not in ("watching", "watched") else "its stacks watched by attach --auto, nothing changed"
        click.echo(printable(f"pid {pid}: {s.get('recipe')}: {s.get('state')}; {', '.join(s.get('targets', []))}; "
                             f"{what}" + (f"; {s['error']}" if s.get("error") else "")))
        _left(s)


def _left(s) -> None:
    if s.get("left"):
        say(printable(s["left"]))


def detach(pid: int, timeout: float) -> None:
    from patchkit.attach import records

    failed = False
    for s in records.detach(pid, timeout):
        head = f"pid {pid}: {s.get('recipe')}"
        if s.get("state") == "restored":
            click.echo(printable(f"{head}: {_steps_text(s.get('captures', []))}; the job's own code is back"))
        elif s.get("state") == "watched":
            click.echo(printable(f"{head}: its watch stopped; nothing of the job's was changed"))
        elif s.get("state") == "handed over":
            click.echo(printable(f"{head}: detached; the job's own code is back, and the attaching command (pid "
                                 f"{s.get('attacher')}) says what was recorded"))
        elif s.get("error"):
            failed = True
            click.echo(printable(f"{head}: {s.get('state')}: {s['error']}"))
        else:
            failed = True
            click.echo(printable(f"{head}: {s.get('state', 'no answer')}: detach asked; the job puts its own code "
                                 "back at its next step"))
        _left(s)
    if failed:
        sys.exit(1)


@click.command("detach")
@click.argument("pid", type=int)
@click.option("--timeout", type=float, default=60, show_default=True, help="seconds to wait for the job")
def detach_cmd(pid, timeout) -> None:
    """Put back the job's own code where `patchkit attach` swapped it (a window in progress is kept)."""
    detach(pid, timeout)
