"""``diff``, ``apply``, ``revert`` and ``status``: each calls the API and says what it did.  Patches and status go
to stdout, the rest to stderr.  With ``--ray`` each runs on every node instead (:mod:`patchkit.cli.cluster`)."""

from __future__ import annotations

import functools
import json
import sys
from functools import partial
from typing import List, Optional, Sequence

import click

from patchkit.cli import cluster
from patchkit.cli.options import (backend_option, complete_applied, complete_recipes, overrides_argument, ray_option,
                                  root_option, version_options, write_output)

say = partial(click.echo, err=True)


def ledger():
    """The ledger a command uses; anything it recovers from a crashed run is said on stderr."""
    from patchkit.state.ledger import Ledger

    class Said(Ledger):
        def recover(self) -> None:
            super().recover()
            while self.recovered:
                say(f"note: {self.recovered.pop(0)}")

    return Said()


def origin(target, installed) -> str:
    """What was patched, for the closing line: the distribution, its version and where that was read; a script."""
    if target.script is not None:
        return f"the script {installed.root / target.script.name}"
    return f"{target.distribution} {installed.shown or '(version unknown)'}, from {installed.version_from}"


def say_skipped(refusal: str, note: str = "") -> None:
    """What --skip-version-check let through, said plainly (nothing when the version was in range anyway), and a
    version past the recipe's proven range, or none, said once."""
    if refusal:
        from patchkit.state.planning import skipped_note

        say(f"warning: {skipped_note(refusal)}")
    if note:
        say(f"note: {note}")


@click.command()
@click.argument("recipe", shell_complete=complete_recipes)
@overrides_argument
@root_option
@backend_option
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), help="write the patch to this file")
@click.option("--stat", is_flag=True, help="a summary of the changes instead of the patch")
@version_options
@ray_option(cluster.diff)
def diff(recipe: str, overrides: Sequence[str], root: Optional[str], backend: Optional[str], output: Optional[str],
         stat: bool, versions) -> None:
    """Unified diff of what apply would change; writes nothing to the targets."""
    import patchkit
    from patchkit.engine.diff import colour
    from patchkit.engine.diff import stat as diffstat

    plan = patchkit.plan_recipe(recipe, overrides, backend, root, *versions)
    say_skipped(plan.version_skipped, plan.version_note)
    text = plan.diff()
    if stat:
        click.echo(diffstat((f.diffpath, f.diff()) for f in plan.files if f.changes), nl=False)
    elif output:
        write_output(output, text)
        say(f"wrote {output}")
    elif text:
        click.echo(colour(text) if sys.stdout.isatty() else text, nl=False)
    changed = sum(f.changes for f in plan.files)
    for f in plan.files:
        if f.work_tree is not None:
            say(f"git: {f.diffpath} is " + (f"tracked in the git work tree {f.work_tree}" if f.tracked else
                                             f"in the git work tree {f.work_tree} but not tracked there"))
    target = plan.settings.recipe.target
    say(f"{plan.settings.id}: {changed} file(s) would change, {len(plan.files) - changed} already applied "
        f"({origin(target, plan.installed)})")
    if changed:
        say("apply the patch with `git apply` or `patch -p1` run in " + " and ".join(map(str, plan.patch_bases())))


@click.command()
@click.argument("recipe", shell_complete=complete_recipes)
@overrides_argument
@root_option
@backend_option
@click.option("--allow-dirty", is_flag=True, help="patch files that have uncommitted changes in their git checkout")
@click.option("--commit", is_flag=True, help="in a git checkout, commit the patch on a new branch patchkit/RECIPE")
@click.option("--interactive", "-i", is_flag=True, help="show each file's diff and ask y/n/q before writing")
@click.option("--json", "as_json", is_flag=True, help="what was done, as JSON on stdout")
@version_options
@ray_option(cluster.apply, refuse=("allow_dirty", "commit", "interactive"))
def apply(recipe: str, overrides: Sequence[str], root: Optional[str], backend: Optional[str], allow_dirty: bool,
          commit: bool, interactive: bool, as_json: bool, versions) -> None:
    """Patch the target files, back them up and record it.

    In a git checkout, a file with uncommitted changes is refused unless
    --allow-dirty.  A recipe's files are written all together or not at
    all: with --interactive, answering n for any file (or q) writes nothing.
    """
    import patchkit

    skip, strict = versions
    done = patchkit.apply_recipe(recipe, overrides, backend, root, ledger=ledger(), allow_dirty=allow_dirty,
                                 commit=commit, skip_version_check=skip, strict_versions=strict,
                                 review=review if interactive else None)
    if as_json:
        click.echo(json.dumps(done.to_json(), indent=2))
    if not interactive:  # review said it before its questions
        say_skipped(done.version_skipped, done.version_note)
    for o in done.outcomes:
        say(f"{o.label}: {o.path}" + (f" ({o.detail})" if o.detail else ""))
    say_git(done.outcomes)
    s = done.settings
    if not done.written:
        say(f"{s.id}: nothing written")
        sys.exit(1)
    for warning in done.warnings:
        say(f"warning: {warning}")
    say(f"{s.id}: {done.changed} file(s) patched, {len(done.outcomes) - done.changed} already applied "
        f"({origin(s.recipe.target, done.installed)}); "
        f"traces go to {s.recipe.profiler.save_path}; undo with `patchkit revert {s.id}`")
    for note in s.recipe.notes:  # after the outcome: a failing apply shows its error first, and only that
        say(f"note: {note}")


def say_git(outcomes) -> None:
    """Each distinct git note once (files of one checkout share them)."""
    seen = set()
    for o in outcomes:
        if o.git and o.git not in seen:
            seen.add(o.git)
            say(f"git: {o.git}")


def review(plan) -> bool:
    """apply --interactive: what a skipped version check let through, then each changing file's diff and y/n/q;
    any n or q means nothing is written."""
    from patchkit.engine.diff import colour

    say_skipped(plan.version_skipped, plan.version_note)
    files = [f for f in plan.files if f.changes]
    declined: List[str] = []
    for number, f in enumerate(files, 1):
        text = f.diff()
        click.echo(colour(text) if sys.stdout.isatty() else text, nl=False)
        answer = click.prompt(f"({number}/{len(files)}) write {f.diffpath}? [y,n,q]", err=True, show_choices=False,
                              type=click.Choice(["y", "n", "q"], case_sensitive=False)).lower()
        if answer == "q":
            say("quit: nothing written")
            return False
        if answer == "n":
            declined.append(f.diffpath)
            if len(files) > 1 and number < len(files):
                say("note: a recipe writes all its files or none, so nothing will be written; the remaining files follow")
    if declined:
        say(f"declined {', '.join(declined)}: nothing written")
    return not declined


def _recipes_or_all(f):
    """revert's usage error, with or without --ray: name the recipes, or --all."""
    @functools.wraps(f)
    def command(*args, **kwargs):
        if not kwargs.get("recipes") and not kwargs.get("everything"):
            raise click.UsageError("say which recipes to revert, or --all")
        return f(*args, **kwargs)

    return command


@click.command()
@click.argument("recipes", nargs=-1, shell_complete=complete_applied)
@click.option("--all", "everything", is_flag=True, help="revert every recipe patchkit applied")
@click.option("--force", is_flag=True,
              help="revert files edited by hand after apply even where patchkit lines were changed")
@root_option
@_recipes_or_all
@ray_option(cluster.revert)
def revert(recipes: Sequence[str], everything: bool, force: bool, root: Optional[str]) -> None:
    """Restore the original files.

    Patchkit lines that no record of this PATCHKIT_HOME explains (applied under
    another one) in the built-in recipes' files are taken out too, without a
    backup: every line patchkit inserts is marked and patchkit only inserts.
    """
    import patchkit
    from patchkit.core.printable import printable

    outcomes = patchkit.revert(recipes, everything, root, ledger=ledger(), force=force)
    for o in outcomes:
        say(f"{o.label}: {o.path} ({o.detail})")
    for note in (n for o in outcomes for n in o.kept_notes()):
        say(f"note: {printable(note)}")
    say_git(outcomes)
    say(f"{len(outcomes)} file(s) handled" if outcomes else "nothing was applied")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@root_option
@ray_option(cluster.status)
def status(as_json: bool, root: Optional[str]) -> None:
    """What is applied where, and whether anything drifted since.

    Also lists the built-in recipes' files (under --root, or in this
    environment) holding patchkit lines that no record explains: applied
    under another PATCHKIT_HOME.  `revert` takes those out without a backup.
    """
    import patchkit
    from patchkit.state.ledger import home

    rows = patchkit.status(ledger=ledger(), root=root)
    if as_json:
        click.echo(json.dumps({"home": str(home()), "files": [st.to_json() for st in rows]}, indent=2))
        return
    if not rows:
        click.echo("nothing applied")
        return
    for st in rows:
        if st.interrupted:
            click.echo(f"{st.state:10s}  {st.path}  [an earlier patchkit command stopped half-way through a change; "
                       "the next `patchkit apply` or `patchkit revert` puts it back]")
            continue
        if st.record is None:
            f = st.found
            click.echo(f"{st.state:10s}  {', '.join(f.recipes)}  {f.path}  ({f.distribution} {f.version or '?'})  "
                       f"[no record under {home()}: revert takes the marked lines out, without a backup]")
            continue
        recipes = ", ".join(sorted(st.record.recipes))
        warn = "" if st.backup_ok else "  [backup missing or corrupted: revert takes the marked lines out]"
        version = f" {st.record.version}" if st.record.version else ""  # none: a script's
        click.echo(f"{st.state:10s}  {recipes}  {st.record.path}  ({st.record.distribution}{version}){warn}")
        for rid, a in sorted(st.record.recipes.items()):
            if a.git:
                click.echo(f"{'':10s}  {rid}: committed {a.git['commit'][:10]} on {a.git['branch']} in {a.git['work_tree']}")
