"""The command line: the commands, their options and help, over :mod:`patchkit.api`.

Only the command line prints: what each command says is in
:mod:`patchkit.cli.patch` (diff, apply, revert, status on this machine),
:mod:`patchkit.cli.cluster` (the same with ``--ray``) and
:mod:`patchkit.cli.recipes` (list, show, validate, test).  Diffs go to
stdout, messages to stderr.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Optional, Sequence

import click

from patchkit import DISTRIBUTION, __version__
from patchkit.cli.options import (backend_option, complete_applied, complete_recipes, overrides_argument,
                                  root_option, version_options)
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
    patchkit points MOD:CLS.METHOD where a point can go; `patchkit new` writes a recipe of them
    """
    ctx.obj = {"debug": debug}


@main.command("list")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def list_cmd(as_json: bool) -> None:
    """The built-in recipes: id, package, versions."""
    from patchkit.cli import recipes as cli_recipes

    cli_recipes.list_recipes(as_json)


@main.command()
@click.argument("recipe", shell_complete=complete_recipes)
@overrides_argument
@root_option
@backend_option
@click.option("--strict-versions", "strict", is_flag=True, help="as diff and apply would with it")
def show(recipe: str, overrides: Sequence[str], root: Optional[str], backend: Optional[str], strict: bool) -> None:
    """The resolved recipe, the file it would patch here, and the code it inserts."""
    from patchkit.cli import recipes as cli_recipes

    cli_recipes.show(recipe, overrides, root, backend, strict or None)


@main.command()
@click.argument("recipe", shell_complete=complete_recipes)
@overrides_argument
@root_option
@backend_option
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), help="write the patch to this file")
@click.option("--stat", is_flag=True, help="a summary of the changes instead of the patch")
@click.option("--ray", "ray_address", metavar="ADDRESS", help="run on every alive node of this Ray cluster (or auto)")
@version_options
def diff(recipe, overrides, root, backend, output, stat, ray_address=None, versions=(False, None)) -> None:
    """Unified diff of what apply would change; writes nothing to the targets."""
    if ray_address:
        from patchkit.cli import cluster as cli_cluster

        return cli_cluster.diff(ray_address, recipe, overrides, root, backend, output, stat, versions)
    from patchkit.cli import patch as cli_patch

    cli_patch.diff(recipe, overrides, root, backend, output, stat, versions)


@main.command()
@click.argument("recipe", shell_complete=complete_recipes)
@overrides_argument
@root_option
@backend_option
@click.option("--allow-dirty", is_flag=True, help="patch files that have uncommitted changes in their git checkout")
@click.option("--commit", is_flag=True, help="in a git checkout, commit the patch on a new branch patchkit/RECIPE")
@click.option("--interactive", "-i", is_flag=True, help="show each file's diff and ask y/n/q before writing")
@click.option("--ray", "ray_address", metavar="ADDRESS", help="run on every alive node of this Ray cluster (or auto)")
@click.option("--json", "as_json", is_flag=True, help="what was done, as JSON on stdout")
@version_options
def apply(recipe, overrides, root, backend, allow_dirty=False, commit=False, interactive=False, ray_address=None,
          as_json=False, versions=(False, None)) -> None:
    """Patch the target files, back them up and record it.

    In a git checkout, a file with uncommitted changes is refused unless
    --allow-dirty.  A recipe's files are written all together or not at
    all: with --interactive, answering n for any file (or q) writes nothing.
    """
    if ray_address:
        if allow_dirty or commit or interactive:
            raise click.UsageError("--allow-dirty, --commit and --interactive are not available with --ray")
        from patchkit.cli import cluster as cli_cluster

        return cli_cluster.apply(ray_address, recipe, overrides, root, backend, versions, as_json)
    from patchkit.cli import patch as cli_patch

    cli_patch.apply(recipe, overrides, root, backend, allow_dirty, commit, interactive, versions, as_json)


@main.command()
@click.argument("recipes", nargs=-1, shell_complete=complete_applied)
@click.option("--all", "everything", is_flag=True, help="revert every recipe patchkit applied")
@click.option("--force", is_flag=True, help="revert files edited by hand after apply even where patchkit lines were changed")
@root_option
@click.option("--ray", "ray_address", metavar="ADDRESS", help="run on every alive node of this Ray cluster (or auto)")
def revert(recipes, everything, force, root, ray_address=None) -> None:
    """Restore the original files.

    Patchkit lines that no record of this PATCHKIT_HOME explains (applied under
    another one) in the built-in recipes' files are taken out too, without a
    backup: every line patchkit inserts is marked and patchkit only inserts.
    """
    if not recipes and not everything:
        raise click.UsageError("say which recipes to revert, or --all")
    if ray_address:
        from patchkit.cli import cluster as cli_cluster

        return cli_cluster.revert(ray_address, recipes, everything, root, force)
    from patchkit.cli import patch as cli_patch

    cli_patch.revert(recipes, everything, force, root)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@root_option
@click.option("--ray", "ray_address", metavar="ADDRESS", help="run on every alive node of this Ray cluster (or auto)")
def status(as_json: bool, root=None, ray_address=None) -> None:
    """What is applied where, and whether anything drifted since.

    Also lists the built-in recipes' files (under --root, or in this
    environment) holding patchkit lines that no record explains: applied
    under another PATCHKIT_HOME.  `revert` takes those out without a backup.
    """
    if ray_address:
        from patchkit.cli import cluster as cli_cluster

        return cli_cluster.status(ray_address, as_json, root)
    from patchkit.cli import patch as cli_patch

    cli_patch.status(as_json, root)


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path())
def validate(files) -> None:
    """Check recipe files; print each problem as file:line:col."""
    from patchkit.cli import recipes as cli_recipes

    cli_recipes.validate(files)


@main.command("test")
@click.argument("recipes", nargs=-1, shell_complete=complete_recipes)
def test_cmd(recipes) -> None:
    """Run recipes' own examples (all built-in recipes by default)."""
    from patchkit.cli import recipes as cli_recipes

    cli_recipes.test(recipes)


@main.command()
@click.argument("recipe", shell_complete=complete_recipes)
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[KEY=VALUE]... -- COMMAND...")
@root_option
@backend_option
@click.option("--print-env", is_flag=True, help="print the environment instead (JSON), e.g. for a Ray runtime_env")
@version_options
def run(recipe, args, root, backend, print_env, versions=(False, None)) -> None:
    """Run COMMAND with the recipe applied in memory (children too): no file changes, nothing to revert."""
    from patchkit.cli import run as cli_run

    cli_run.run(recipe, args, root, backend, versions, print_env)


@main.command()
@click.argument("recipe", shell_complete=complete_recipes)
@click.option("--steps", type=click.IntRange(min=1, max=1000), default=1, show_default=True,
              help="steps to record (at most 1000: a profiler holds every event of its window in memory)")
@click.option("--ranks", metavar="0,1", help="only the processes of these ranks")
@click.option("--role", help="only the captures of this role (actor, ref, ...)")
@click.option("--timeout", type=float, default=300, show_default=True, help="seconds to wait for the answers")
@click.option("--ray", "ray_address", metavar="ADDRESS", help="ask on every alive node of this Ray cluster (or auto)")
def capture(recipe, steps, ranks, role, timeout, ray_address) -> None:
    """Ask a running job (applied with schedule.trigger=manual) to record its next STEPS steps, and wait for the traces."""
    from patchkit.cli import capture as cli_capture

    cli_capture.capture(recipe, steps, ranks, role, timeout, ray_address)


@main.command()
@click.option("--keep", is_flag=True, help="keep the temporary folder")
def demo(keep: bool) -> None:
    """The whole loop on a bundled verl-shaped sample, on CPU: diff, apply, run, revert."""
    from patchkit.demo.runner import run_demo

    sys.exit(run_demo(keep=keep, echo=click.echo))


# commands defined beside what they say (imported after main: the capture, after the capture, your own recipes)
from patchkit.cli import analysis as _analysis, attach as _attach, authoring as _authoring, traces as _traces  # noqa: E402

for _command in (_traces.traces, _traces.collect, _analysis.analyse_cmd, _analysis.summary_cmd,
                 _analysis.compare_cmd, _authoring.points_cmd, _authoring.new_cmd, _attach.attach_cmd, _attach.detach_cmd):
    main.add_command(_command)

if __name__ == "__main__":  # pragma: no cover
    main()
