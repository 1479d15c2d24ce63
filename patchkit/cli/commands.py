"""The command line: the group every command belongs to, over the public API (:mod:`patchkit`).

Each command is declared in the module that says what it did, and calls the API, then prints; this module
holds the group (errors turned into ``path:line:col`` messages and exit statuses, ``--debug``, ``--version``)
and names every command, in :data:`COMMANDS`, one way: its name, where it is declared and the line
``patchkit --help`` lists it with.  A command's module is imported only when that command runs or its help is
shown, so ``patchkit status`` loads no analysis and ``patchkit --help`` no command at all.  Diffs go to stdout,
messages to stderr.
"""

from __future__ import annotations

import gc
import importlib
from pathlib import Path
from typing import Dict, List, Optional

import click

from patchkit import DISTRIBUTION, __version__
from patchkit.core.errors import PatchkitError

_HERE = str(Path(__file__).resolve().parent.parent)  # the package folder `import patchkit` found

# Other tools' spellings of a command, answered with patchkit's own (msprof-analyze spells analyse with a z).
_SPELLED = {"analyze": "analyse"}

# Every command: its name, the module:attribute that declares it, and the first paragraph of its help, which
# `patchkit --help` shortens to one line without importing the module (tests/test_cli_commands.py holds it to
# the command's own help).
COMMANDS: Dict[str, tuple] = {
    "list": ("patchkit.cli.recipes:list_recipes", "The built-in recipes: id, package, versions."),
    "show": ("patchkit.cli.recipes:show",
             "The resolved recipe, the file it would patch here, and the code it inserts."),
    "diff": ("patchkit.cli.patch:diff", "Unified diff of what apply would change; writes nothing to the targets."),
    "apply": ("patchkit.cli.patch:apply", "Patch the target files, back them up and record it."),
    "revert": ("patchkit.cli.patch:revert", "Restore the original files."),
    "status": ("patchkit.cli.patch:status", "What is applied where, and whether anything drifted since."),
    "validate": ("patchkit.cli.recipes:validate", "Check recipe files; print each problem as file:line:col."),
    "test": ("patchkit.cli.recipes:test", "Run recipes' own examples (all built-in recipes by default)."),
    "run": ("patchkit.cli.run:run",
            "Run COMMAND with the recipe applied in memory (children too): no file changes, nothing to revert."),
    "capture": ("patchkit.cli.capture:capture", "Ask a running job (applied with schedule.trigger=manual) to record "
                "its next STEPS steps, and wait for the traces."),
    "demo": ("patchkit.cli.demo:demo",
             "The whole loop on a bundled verl-shaped sample, on CPU: diff, apply, run, revert."),
    "traces": ("patchkit.cli.traces:traces",
               "The captures under DIR: recipe, rank, role, steps, size, node, path; newest first."),
    "collect": ("patchkit.cli.traces:collect",
                "Copy every capture into DEST, one folder per recipe, laid out for the analysis tools."),
    "analyse": ("patchkit.cli.analysis:analyse_cmd", "Parse torch_npu captures taken with analysis off, then run "
                "msprof-analyze's cluster analysis."),
    "summary": ("patchkit.cli.analysis:summary_cmd", "Per rank: the recorded steps, their durations, the top "
                "operators by self time; and the slowest rank."),
    "compare": ("patchkit.cli.analysis:compare_cmd", "Two captures, or two folders of them, side by side: step time "
                "and top operators, with B - A."),
    "points": ("patchkit.cli.authoring:points_cmd", "The function TARGET names, as an outline: its loops, calls, "
               "blocks and returns, each line numbered as in the file and followed by the recipe point that puts "
               "a line there."),
    "new": ("patchkit.cli.authoring:new_cmd", "Write the recipe ID.yaml for the points asked: its target (the "
            "package, file and version range where TARGET lives, or the script, path/to/train.py::NAME, a job runs "
            "as __main__), the schedule and profiler keys with their defaults, and a before/after example made from "
            "the real function. It prints the commands that come next, each as it works from here (with --root "
            "where the target needs one): `patchkit test`, `diff`, `apply` and `revert`."),
    "attach": ("patchkit.cli.attach:attach_cmd", "Record the next STEPS steps of a running Python job started "
               "without patchkit, then leave it as it was."),
    "detach": ("patchkit.cli.detach:detach_cmd", "Put back the job's own code where `patchkit attach` swapped it "
               "(a window in progress is kept)."),
}


class _Group(click.Group):
    """The group of :data:`COMMANDS`, each loaded from its module when it is asked for (click's lazy group).

    It turns a PatchkitError into `path:line:col: message` + a hint, exit 1, no traceback.

    A command runs with the cyclic garbage collector paused: it lives for
    milliseconds and leaves little cyclic garbage, but the syntax trees it
    builds would set off some twenty collections on a large target file that
    free nothing: 8% of a `patchkit diff` on SGLang's model_runner.py.
    (Training, in `patchkit demo`, runs in a process of its own.)
    """

    def list_commands(self, ctx: click.Context) -> List[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        if cmd_name in self.commands or cmd_name not in COMMANDS:
            return self.commands.get(cmd_name)
        module, _, attribute = COMMANDS[cmd_name][0].partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command) or command.name != cmd_name:
            raise TypeError(f"{COMMANDS[cmd_name][0]} is not the click command {cmd_name!r}")
        return command

    def resolve_command(self, ctx: click.Context, args: List[str]):
        """click's, with "did you mean" among every command (click's own looks only among those loaded)."""
        name = click.utils.make_str(args[0]) if args else ""
        if args and not ctx.resilient_parsing and not name.startswith("-") and self.get_command(ctx, name) is None:
            raise click.UsageError(f"No such command {name!r}.{_guess(name, self.list_commands(ctx))}", ctx)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's list of commands, each line made from :data:`COMMANDS` where the command is not loaded."""
        from gettext import gettext as _

        listed = [(name, self.commands[name] if name in self.commands else click.Command(name, help=COMMANDS[name][1]))
                  for name in self.list_commands(ctx)]
        listed = [(name, command) for name, command in listed if not command.hidden]
        if listed:
            limit = formatter.width - 6 - max(len(name) for name, _command in listed)
            with formatter.section(_("Commands")):
                formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in listed])

    def invoke(self, ctx: click.Context):
        collecting = gc.isenabled()
        gc.disable()
        try:
            return super().invoke(ctx)
        except PatchkitError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            from patchkit.core.printable import printable  # only here: a command that succeeds needs none
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


def _guess(name: str, names: List[str]) -> str:
    """`` Did you mean 'analyse'?`` for a command spelt close to one of ``names``, else ``""``."""
    import difflib

    close = [_SPELLED[name.lower()]] if name.lower() in _SPELLED else difflib.get_close_matches(name, names, 3)
    return f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def every_command() -> Dict[str, click.Command]:
    """Every command of the group by name, each module imported (the docs and tests read their options)."""
    ctx = click.Context(main)
    return {name: main.get_command(ctx, name) for name in main.list_commands(ctx)}


if __name__ == "__main__":  # pragma: no cover
    main()
