"""``patchkit capture``: ask a running job for its next steps, and say who was asked and, for each process, the
steps and traces, or why none came.  With ``--ray``, every node's processes are asked."""

from __future__ import annotations

import sys
from functools import partial
from typing import Any, Dict, List, Optional

import click

from patchkit.cli.options import complete_recipes, ray_option
from patchkit.cli.progress import bar
from patchkit.core.errors import Location, PatchkitError
from patchkit.core.printable import printable

say = partial(click.echo, err=True)


class CaptureRequestError(PatchkitError):
    title = "capture"


def parse_ranks(text: Optional[str]) -> List[int]:
    if not text:
        return []
    try:
        ranks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise click.BadParameter(f"{text!r}: write ranks as 0,1,3") from None
    if any(r < 0 for r in ranks):
        raise click.BadParameter(f"{text!r}: ranks are 0 or more")
    return ranks


def recipe_id(ref: str) -> str:
    """A built-in id as it is; a recipe file's own id (the running processes know recipes by id)."""
    if ref.endswith((".yaml", ".yml")) or "/" in ref:
        import patchkit

        return patchkit.load(ref).id
    return ref


def shown(value: Any) -> str:
    """``value`` as text for the terminal, control characters escaped (answers are files, read not trusted)."""
    try:
        text = str(value)
    except ValueError:  # an integer of thousands of digits
        text = "<a number too long to show>"
    return printable(text)


def check_steps(steps: int) -> None:
    """At most ``ondemand.MAX_STEPS``: a profiler window holds every event of its steps in the job's memory."""
    from patchkit.runtime.requests import MAX_STEPS, valid_steps

    if not valid_steps(steps):
        raise CaptureRequestError(f"--steps: a capture records 1 to {MAX_STEPS} steps",
                                  Location("<command line>"),
                                  "ask for a few steps (1 to 10 is what a trace viewer opens): the profiler keeps "
                                  "every event of the window in the job's memory until the window closes")


def on_every_node(address: str, recipe: str, steps: int, ranks: Optional[str], role: Optional[str],
                  timeout: float) -> None:
    """``capture --ray``: the same, asked of every alive node's processes."""
    _capture(recipe, steps, ranks, role, timeout, address)


@click.command()
@click.argument("recipe", shell_complete=complete_recipes)
@click.option("--steps", type=click.IntRange(min=1, max=1000), default=1, show_default=True,
              help="steps to record (at most 1000: a profiler holds every event of its window in memory)")
@click.option("--ranks", metavar="0,1", help="only the processes of these ranks")
@click.option("--role", help="only the captures of this role (actor, ref, ...)")
@click.option("--timeout", type=float, default=300, show_default=True, help="seconds to wait for the answers")
@ray_option(on_every_node, help="ask on every alive node of this Ray cluster (or auto)")
def capture(recipe: str, steps: int, ranks: Optional[str], role: Optional[str], timeout: float) -> None:
    """Ask a running job (applied with schedule.trigger=manual) to record its next STEPS steps, and wait for the traces."""
    _capture(recipe, steps, ranks, role, timeout, None)


def _capture(recipe: str, steps: int, ranks: Optional[str], role: Optional[str], timeout: float,
             address: Optional[str]) -> None:
    """Ask here, or with a Ray ``address`` on every node, and say each process's answer."""
    from patchkit.runtime import requests as ondemand

    check_steps(steps)
    rid = recipe_id(recipe)
    wanted = parse_ranks(ranks)
    with bar() as progress:
        if address:
            from patchkit.cluster.capture import ask_every_node

            results = ask_every_node(address, rid, steps, wanted, role or "", timeout, progress)
        else:
            results = [ondemand.ask_and_wait(rid, steps, wanted, role or "", timeout, progress=progress)]
    asked = sum(len(r["asked"]) for r in results)
    if not asked:
        where = "on any node" if address else f"here (PATCHKIT_HOME={ondemand.home()})"
        raise CaptureRequestError(f"no running process of {rid} waits for a capture {where}"
                                  + (f" with rank {','.join(map(str, wanted))}" if wanted else "")
                                  + (f" and role {role}" if role else ""), Location("<command line>"),
                                  f"apply it with `patchkit apply {rid} schedule.trigger=manual` and start the job: "
                                  "a process registers at its first step (the same PATCHKIT_HOME as here)")
    bad = 0
    for result in results:
        bad += _say_node(result, steps, timeout, bool(address))
    answered = asked - bad
    say(f"{rid}: {answered} of {asked} process(es) recorded {steps} step(s)")
    if bad:
        sys.exit(1)


def _say_node(result: Dict[str, Any], steps: int, timeout: float, ray: bool) -> int:
    bad = 0
    node = f"[{result['host']}] " if ray else ""
    for entry in result["asked"]:
        from patchkit.runtime.requests import name

        who = shown(f"{node}rank {entry['rank']} {entry['key']} (pid {entry['pid']} on {entry['host']})")
        answer = result["answers"].get(name(entry))
        if answer is None:
            bad += 1
            if name(entry) in result["dead"]:
                say(f"{who}: the process ended before it answered")
            else:
                say(f"{who}: no answer within {timeout:g} s (it records at its next {steps} step(s) at the "
                    "recipe's points: is it still stepping?)")
        elif answer.get("error"):
            bad += 1
            say(f"{who}: failed: {shown(answer['error'])}")
        else:
            traces = answer.get("traces")
            traces = ", ".join(map(shown, traces)) if isinstance(traces, list) and traces else \
                "written by the profiler itself"
            click.echo(f"{who}: steps {shown(answer.get('first'))}-{shown(answer.get('last'))} -> {traces}")
    return bad
