"""What ``patchkit attach``, ``attach --auto`` and ``detach`` say about a process: one line for each state it
reaches, as its agent wrote it."""

from __future__ import annotations

import signal
from functools import partial
from typing import Optional

import click

from patchkit.core.printable import printable

say = partial(click.echo, err=True)


def _pid(text: str) -> int:
    if not text.isdigit():
        raise click.UsageError(f"{text!r} is not a process id")
    return int(text)


def _steps_text(captures) -> str:
    spans = [f"{a}-{b}" if a != b else str(a) for c in captures for a, b in c.get("recorded", [])]
    traces = [t for c in captures for t in c.get("traces", [])]
    errors = [c["error"] for c in captures if c.get("error")]
    text = f"steps {', '.join(spans)} recorded -> {', '.join(traces) or 'no trace'}" if spans else \
        "nothing recorded" + (": its capture never started in this process" if not captures else "")
    return text + (f" (error: {'; '.join(errors)})" if errors else "")


class Said:
    """One line for each process whose state changed.  The line that names what was attached is said once, even
    when the job was recording (or done) before it was looked at; with ``--match``, a process passed over (it does
    not run the recipe's code, did not answer, ...: :func:`patchkit.attach.flow.passed_over`) is said to be passed
    over, with why, not refused."""

    def __init__(self, match: Optional[str] = None):
        self.match, self.told = match, set()

    def __call__(self, a) -> None:
        from patchkit.attach import flow

        if flow.passed_over(a, self.match):
            return say(printable(f"pid {a.pid}: passed over: "
                                 f"{flow.why_passed(a.state, a.status.get('error'), a.status.get('reason'))}"))
        if a.state in flow.IN + ("restored",) and a.pid not in self.told and a.status.get("targets"):
            self.told.add(a.pid)
            say(printable(process_line(a.pid, "attached", a.status)))
            running = a.status.get("running")  # written by the job: a list of names, or nothing said
            for scope in [r for r in running if isinstance(r, str)][:20] if isinstance(running, list) else []:
                say(printable(running_line(a.pid, scope[:200])))
            if a.state == "attached":
                return
        say(printable(process_line(a.pid, a.state, a.status)))


def still_waiting(waiting, seconds: float) -> None:
    """The processes whose window has not opened a while after their code went in, with the calls since (3.12+)."""
    for a in waiting:
        targets, calls, waited = ", ".join(a.status.get("targets", [])), a.status.get("calls"), f"({seconds:.0f} s)"
        why = (f" for the next call of {targets} {waited}" if calls is None else f": no call of {targets} since its "
               f"code went in {waited}") + "; a function not called again never opens the window" if not calls else \
            f": {targets} called {calls} time(s) since its code went in {waited}, the recipe's point not reached: a " \
            "point no call reaches (after a return) never opens the window; `patchkit points` shows each one's points"
        say(printable(f"pid {a.pid}: still waiting{why}: Ctrl-C puts the job's own code back"))


def running_line(pid: int, scope: str) -> str:
    return (f"pid {pid}: note: {scope} is running now and keeps its own code until it returns; the window opens at "
            "its next call (one that runs for the whole job never opens it: attach at a function called every step, "
            "`patchkit points` shows them)")


def process_line(pid: int, state: str, s) -> str:
    """What a process's state says (``s``: its agent's last status)."""
    head = f"pid {pid}"
    if state == "attached":
        line = (f"{head}: attached ({', '.join(s.get('targets', []))}: {s.get('functions', 0)} function(s)); "
                f"recording the next {s.get('steps')} step(s) from the next call")
    elif state == "recording":
        line = f"{head}: recording"
    elif state == "closing":
        line = f"{head}: detaching: the window closes at the job's next step"
    elif state == "restored":
        from patchkit.attach.flow import unrecorded
        back = "the job's own code is back" if s.get("original_code") is True else \
            "WARNING: some function does not have its original code back"
        what, todo = unrecorded(s) or (_steps_text(s.get("captures", [])), "")
        line = f"{head}: {what}; {back} ({s.get('why', '')})" + (f"; {todo}" if todo else "")
    elif state == "refused":
        line = f"{head}: refused: {s.get('error')}; nothing changed"
    elif state == "no answer":
        line = (f"{head}: no answer: {s.get('error')} (its main thread is blocked in native code?); the request was "
                "withdrawn, nothing changed")
    elif state == "gone":
        line = f"{head}: the process ended"
    else:
        line = f"{head}: {state}: {s.get('error', '')}"
    return line


def _interrupts_as_keyboard():
    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, raise_interrupt)
        except (ValueError, OSError):
            pass
