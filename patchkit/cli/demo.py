"""``patchkit demo``: the whole loop on a bundled verl-shaped sample, on CPU (:mod:`patchkit.demo.runner`), said as
it goes."""

from __future__ import annotations

import sys

import click


@click.command()
@click.option("--keep", is_flag=True, help="keep the temporary folder, and the trace in it")
def demo(keep: bool) -> None:
    """The whole loop on a bundled verl-shaped sample, on CPU: diff, apply, run, revert."""
    from patchkit.demo.runner import run_demo

    sys.exit(run_demo(keep=keep, echo=click.echo))
