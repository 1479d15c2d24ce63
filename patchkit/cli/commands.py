"""The command line: the group every command belongs to, over the public API (:mod:`patchkit`).

Each command is declared in the module that says what it did, and calls the API, then prints; this module
holds the group (errors turned into ``path:line:col`` messages and exit statuses, ``--debug``, ``--version``)
and attaches every command, in :data:`COMMANDS`, one way.  Diffs go to stdout, messages to stderr.
"""

from __future__ import annotations

import gc
from pathlib import Path

import click

from patchkit import DISTRIBUTION, __version__
from patchkit.cli import analysis, attach, authoring, capture, demo, patch, recipes, run, traces
from patchkit.core.errors import PatchkitError
from patchkit.core.printable import printable

_HERE = str(Path(__file__).resolve().parent)


class _Group(click.Group):
    """Turns a PatchkitError into `path:line:col: message` + a hint, exit 1, no traceback.

    A command runs with the cyclic garbage collector paused: it lives for
    milliseconds and leaves little cyclic garbage, but the syntax trees it
    builds would set off some twenty collections on a large target file that
    free nothing: 8% of a `patchkit diff` on SGLang's model_runner.py.
    (Training, in `patchkit demo`, runs in a process of its own.)
    """

    def invoke(self, ctx: click.Context):
        collecting = gc.isenabled()
        gc.disable()
        try:
            return super().invoke(ctx)
        except PatchkitError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            for warning in exc.warnings:
                click.echo(f"warning: {printable(warning)}", err=True)
            click.echo(f"error: {exc.render()}", err=True)
            ctx.exit(exc.exit_code)
        finally:
            if collecting:
                gc.enable()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="show tracebacks")
@click.version_option(__version__, message=f"{DISTRIBUTION} %(version)s (import patchkit from {_HERE})")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Place profiler start/step calls in installed RL training code, and take them out again.

    \b
    patchkit list                  the built-in recipes
    patchkit diff RECIPE k=v...    preview the patch (unified diff on stdout)
    patchkit apply RECIPE k=v...   patch, back up, record
    patchkit revert --all          restore the original bytes
    patchkit run RECIPE -- CMD     run CMD with the recipe applied in memory
    patchkit capture RECIPE        ask a running job (trigger=manual) for a window
    patchkit attach PID RECIPE     record the next steps of a job started without patchkit
    patchkit points MOD:CLS.METHOD where a point can go; `patchkit new` writes a recipe of them
    """
    ctx.obj = {"debug": debug}


# Every command, each from the module that says what it did (`patchkit --help` lists them by name).
COMMANDS = (recipes.list_recipes, recipes.show, patch.diff, patch.apply, patch.revert, patch.status, recipes.validate,
            recipes.test, run.run, capture.capture, demo.demo, traces.traces, traces.collect, analysis.analyse_cmd,
            analysis.summary_cmd, analysis.compare_cmd, authoring.points_cmd, authoring.new_cmd, attach.attach_cmd,
            attach.detach_cmd)
for _command in COMMANDS:
    main.add_command(_command)

if __name__ == "__main__":  # pragma: no cover
    main()
