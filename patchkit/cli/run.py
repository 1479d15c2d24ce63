"""``patchkit run``: the recipe planned and handed to COMMAND's Python in memory, what it says, and the hand-over
(this process becomes COMMAND)."""

from __future__ import annotations

import json
import os
import sys
from functools import partial
from typing import List, Optional, Sequence, Tuple

import click

from patchkit.cli.options import backend_option, complete_recipes, root_option, version_options

say = partial(click.echo, err=True)


def split(args: Sequence[str]) -> Tuple[List[str], List[str]]:
    """KEY=VALUE overrides first, then COMMAND (click has taken the ``--`` between them away)."""
    args = list(args)
    if "--" in args:  # a second `--`, or one click left because an option came first
        at = args.index("--")
        return args[:at], args[at + 1:]
    n = 0
    while n < len(args) and "=" in args[n] and not args[n].startswith(("/", ".")):
        n += 1
    return args[:n], args[n:]


@click.command()
@click.argument("recipe", shell_complete=complete_recipes)
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[KEY=VALUE]... -- COMMAND...")
@root_option
@backend_option
@click.option("--print-env", is_flag=True, help="print the environment instead (JSON), e.g. for a Ray runtime_env")
@version_options
def run(recipe: str, args: Sequence[str], root: Optional[str], backend: Optional[str], print_env: bool,
        versions) -> None:
    """Run COMMAND with the recipe applied in memory (children too): no file changes, nothing to revert."""
    import patchkit
    from patchkit.hook.editfree import HOOK_DIR, environment, prepare
    from patchkit.hook.isolation import check
    from patchkit.recipe.load import read_text

    overrides, command = split(args)
    if not command and not print_env:
        raise click.UsageError("give the command to run after --, e.g. patchkit run RECIPE -- python train.py")
    unreached = check(command, HOOK_DIR) if command and not print_env else []  # nothing reached: an error, here
    settings = patchkit.load(recipe, overrides, backend)
    script = settings.recipe.target.script
    if script is not None:  # run instruments modules as they are imported; a script is not imported, it runs
        from patchkit.core.errors import Location, TargetError

        raise TargetError(f"{settings.id} patches the script {script.path}, which runs as __main__: `patchkit run` "
                          "instruments modules as the job imports them, and a script is never imported",
                          script.where or Location(settings.recipe.path), f"patch it with `patchkit apply {recipe}` (undo: `patchkit "
                          f"revert {settings.id}`), or attach to the running job with `patchkit attach PID {recipe}`")
    spec = prepare(settings, read_text(patchkit.recipe_path(recipe)), root, *versions)
    from patchkit.cli.patch import say_skipped

    say_skipped(spec["version_skipped"], spec["version_note"])
    for path in spec["already_applied"]:
        say(f"note: {path} has the recipe's lines already (applied); run adds nothing to it")
    env = environment(spec)
    if print_env:
        click.echo(json.dumps({"env_vars": {k: env[k] for k in ("PATCHKIT_RUN", "PYTHONPATH")}}, indent=2))
        return
    for warning in unreached:  # a process of the command the hook cannot reach, said before it starts
        say(f"warning: {warning}")
    names = ", ".join(spec["modules"]) or "nothing"
    say(f"{settings.id}: patching {names} in memory ({settings.recipe.target.distribution} {spec['version']}); "
        f"traces go to {settings.recipe.profiler.save_path}")
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        say(f"error: cannot run {command[0]}: {exc.strerror}")
        sys.exit(127)
