"""``patchkit attach`` and ``patchkit detach``: what they say while getting into a running job and out again."""

from __future__ import annotations

import json
import signal
import sys
from functools import partial
from typing import List, Optional, Sequence

import click

from patchkit.cli.options import backend_option, root_option, version_options
from patchkit.core.printable import printable

say = partial(click.echo, err=True)
SKIPPED = "has not imported"  # with --match, a process that does not run the recipe's code is passed over


def _pid(text: str) -> int:
    if not text.isdigit():
        raise click.UsageError(f"{text!r} is not a process id")
    return int(text)


def _steps_text(captures) -> str:
    spans = [f"{a}-{b}" if a != b else str(a) for c in captures for a, b in c.get("recorded", [])]
    traces = [t for c in captures for t in c.get("traces", [])]
    errors = [c["error"] for c in captures if c.get("error")]
    text = f"steps {', '.join(spans)} recorded -> {', '.join(traces) or 'no trace'}" if spans else "nothing recorded"
    return text + (f" (error: {'; '.join(errors)})" if errors else "")


def said(a) -> None:
    """One line for a process whose state changed."""
    s, head = a.status, f"pid {a.pid}"
    if a.state == "attached":
        line = (f"{head}: attached ({', '.join(s.get('targets', []))}: {s.get('functions', 0)} function(s)); "
                f"recording the next {s.get('steps')} step(s) from the next call")
    elif a.state == "recording":
        line = f"{head}: recording"
    elif a.state == "closing":
        line = f"{head}: detaching: the window closes at the job's next step"
    elif a.state == "restored":
        back = "the job's own code is back" if s.get("original_code", True) else \
            "WARNING: some function does not have its original code back"
        line = f"{head}: {_steps_text(s.get('captures', []))}; {back} ({s.get('why', '')})"
    elif a.state == "refused":
        line = f"{head}: refused: {s.get('error')}; nothing changed"
    elif a.state == "no answer":
        line = (f"{head}: no answer: {s.get('error')} (its main thread is blocked in native code?); the request was "
                "withdrawn, nothing changed")
    elif a.state == "gone":
        line = f"{head}: the process ended"
    else:
        line = f"{head}: {a.state}: {s.get('error', '')}"
    say(printable(line))


def _interrupts_as_keyboard():
    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, raise_interrupt)
        except (ValueError, OSError):
            pass


def attach(args: Sequence[str], steps: int, pids: Optional[str], match: Optional[str], show_status: bool,
           timeout: float, root: Optional[str], backend: Optional[str], versions, as_json: bool = False) -> None:
    from patchkit.attach import session as attach_session
    from patchkit.attach.process import AttachError

    args = list(args)
    if show_status:
        if len(args) != 1:
            raise click.UsageError("give one PID: patchkit attach --status PID")
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
    s.prepare()
    for a in s.attached:
        say(f"pid {a.pid}: {a.target.python.shown}, in through {a.target.way}; {printable(a.target.proc.command)[:120]}")
    if s.spec.get("version_note"):
        say(f"note: {printable(s.spec['version_note'])}")
    _interrupts_as_keyboard()
    try:
        s.inject()
        s.wait(said, timeout, until=("attached", "recording", "closing"))
        bad = [a for a in s.attached if a.state in ("refused", "failed", "no answer", "gone")
               and not (match and SKIPPED in str(a.status.get("error")))]
        if bad or not any(a.state in ("attached", "recording", "closing", "restored") for a in s.attached):
            s.detach(said)
            s.close()
            first = bad[0] if bad else s.attached[0]
            raise AttachError(f"pid {first.pid}: {first.state}: {first.status.get('error')}", None,
                              "nothing stays changed in any process; fix the cause and attach again")
        s.wait(said)
    except KeyboardInterrupt:
        say("interrupted: putting the job's own code back (a window in progress closes at its next step)")
        try:
            s.detach(said, timeout=max(timeout, 30))
        except KeyboardInterrupt:
            say("interrupted again: each job puts its own code back at its next step by itself")
        _finish(s, as_json)
        sys.exit(130)
    _finish(s, as_json)
    if any(a.state != "restored" for a in s.attached if not (match and SKIPPED in str(a.status.get("error")))):
        sys.exit(1)


def _finish(s, as_json: bool) -> None:
    s.close()
    _note_folders(s)
    if as_json:
        keep = ("state", "attached_at", "why", "captures", "error", "targets", "original_code", "steps")
        click.echo(json.dumps([dict({k: a.status.get(k) for k in keep}, pid=a.pid, state=a.state) for a in s.attached],
                              indent=2))


def _note_folders(s) -> None:
    """The capture folders, in this user's index too (`patchkit traces` lists them; the job noted them in its own)."""
    import os

    from patchkit.core import manifest

    for a in s.attached:
        for c in a.status.get("captures", []) or []:
            for trace in c.get("traces", []) or []:
                try:
                    manifest.note_folder(os.path.dirname(str(trace)))
                except OSError:
                    pass


def status(pid: int) -> None:
    from patchkit.attach import session as attach_session

    found = attach_session.status(pid)
    if not found:
        say(f"pid {pid}: nothing attached from this PATCHKIT_HOME")
        return
    for s in found:
        what = _steps_text(s.get("captures", [])) if s.get("captures") else "waiting for its first step"
        click.echo(printable(f"pid {pid}: {s.get('recipe')}: {s.get('state')}; {', '.join(s.get('targets', []))}; "
                             f"{what}" + (f"; {s['error']}" if s.get("error") else "")))


def detach(pid: int, timeout: float) -> None:
    from patchkit.attach import session as attach_session

    for s in attach_session.detach(pid, timeout):
        if s.get("state") == "restored":
            click.echo(printable(f"pid {pid}: {s.get('recipe')}: {_steps_text(s.get('captures', []))}; "
                                 "the job's own code is back"))
        elif s.get("state") == "handed over":
            click.echo(printable(f"pid {pid}: {s.get('recipe')}: detached; the job's own code is back, and the "
                                 f"attaching command (pid {s.get('attacher')}) says what was recorded"))
        else:
            click.echo(printable(f"pid {pid}: {s.get('recipe')}: {s.get('state', 'no answer')}: detach asked; the "
                                 "job puts its own code back at its next step"))
            sys.exit(1)


@click.command("attach")
@click.argument("args", nargs=-1, metavar="PID RECIPE [KEY=VALUE]...")
@click.option("--steps", type=click.IntRange(min=1, max=1000), default=1, show_default=True,
              help="steps to record, from the job's next call of the recipe's code")
@click.option("--pids", metavar="PID,PID", help="attach to each of these processes (RECIPE comes first then)")
@click.option("--match", metavar="TEXT", help="attach to every process of yours whose command line holds TEXT")
@click.option("--status", "show_status", is_flag=True, help="say what is attached to PID")
@click.option("--timeout", type=float, default=60, show_default=True,
              help="seconds for each job to take the code (it runs between two bytecodes of its main thread)")
@click.option("--json", "as_json", is_flag=True, help="at the end, what each process did, as JSON on stdout")
@root_option
@backend_option
@version_options
def attach_cmd(args, steps, pids, match, show_status, timeout, as_json, root, backend, versions=(False, None)) -> None:
    """Record the next STEPS steps of a running Python job started without patchkit, then leave it as it was.

    The recipe's instrumented code replaces the code of its functions in the job (Python 3.14+: sys.remote_exec;
    3.10 to 3.13: gdb, at a safe point of the main thread) until the window closes, Ctrl-C, or `patchkit detach
    PID`. KEY=VALUE: recipe settings as for `apply` (not schedule.*: --steps sets the window). See docs/attach.md.
    """
    attach(args, steps, pids, match, show_status, timeout, root, backend, versions, as_json)


@click.command("detach")
@click.argument("pid", type=int)
@click.option("--timeout", type=float, default=60, show_default=True, help="seconds to wait for the job")
def detach_cmd(pid, timeout) -> None:
    """Put back the job's own code where `patchkit attach` swapped it (a window in progress is kept)."""
    detach(pid, timeout)
