"""The command line: thin, printing only.  Diffs go to stdout, messages to stderr."""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path
from typing import List, Optional, Sequence

import click

from . import DISTRIBUTION, __version__
from .errors import PatchkitError

_HERE = str(Path(__file__).resolve().parent)

ROOT_HELP = "folder that plays site-packages, or a source checkout (default: $PATCHKIT_ROOT, else this environment)"

OVERRIDES_HELP = ("KEY=VALUE: dotted recipe settings, values read as YAML: schedule.wait=2 profiler.level=level1 "
                  "profiler.contents=[npu,cpu] backend=torch, and the recipe's options: granularity=micro, role=ref. "
                  "`patchkit show RECIPE` lists a recipe's keys and options.")


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
            click.echo(f"error: {exc.render()}", err=True)
            ctx.exit(exc.exit_code)
        finally:
            if collecting:
                gc.enable()


def _say(message: str) -> None:
    click.echo(message, err=True)


def _ledger():
    """The ledger a command uses; anything it recovers from a crashed run is said on stderr."""
    from .ledger import Ledger

    class Said(Ledger):
        def recover(self) -> None:
            super().recover()
            while self.recovered:
                _say(f"note: {self.recovered.pop(0)}")

    return Said()


def _complete_recipes(ctx, param, incomplete: str):
    """Shell completion: built-in recipe ids, or file names once it looks like a path."""
    from click.shell_completion import CompletionItem

    if "/" in incomplete or incomplete.endswith((".yaml", ".yml")):
        return [CompletionItem(incomplete, type="file")]
    from .recipe import builtin_ids

    return [CompletionItem(rid) for rid in builtin_ids() if rid.startswith(incomplete)]


def _complete_applied(ctx, param, incomplete: str):
    """Shell completion for revert: the recipes the ledger says are applied."""
    from click.shell_completion import CompletionItem

    try:
        from .ledger import Ledger

        ids = sorted({rid for rec in Ledger().load().files.values() for rid in rec.recipes})
    except Exception:  # completion must never fail loudly
        ids = []
    return [CompletionItem(rid) for rid in ids if rid.startswith(incomplete)]


def overrides_argument(f):
    """The KEY=VALUE arguments, and a paragraph of the command's --help that says what they are."""
    import inspect

    f.__doc__ = inspect.cleandoc(f.__doc__ or "") + "\n\n" + OVERRIDES_HELP
    return click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")(f)


def root_option(f):
    return click.option("--root", type=click.Path(file_okay=False), default=None, help=ROOT_HELP)(f)


def skip_version_option(f):
    return click.option("--skip-version-check", "skip_version", is_flag=True,
                        help="patch a version outside the recipe's range; its points must still match")(f)


def _say_skipped(refusal: str) -> None:
    """What --skip-version-check let through, said plainly (nothing when the version was in range anyway)."""
    if refusal:
        _say(f"warning: version check skipped (--skip-version-check): {refusal}")


class BackendChoice(click.Choice):
    """``--backend``: the names registered in patchkit.backends, read when used (no backend module is imported)."""

    def __init__(self) -> None:  # no fixed list: a backend registered after this module is imported counts too
        self.case_sensitive = True

    @property
    def choices(self):  # type: ignore[override]
        from . import backends

        return backends.names()


def backend_option(f):
    return click.option("--backend", type=BackendChoice(), default=None,
                        help="profiler backend (overrides the recipe's)")(f)


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
    """
    ctx.obj = {"debug": debug}


@main.command("list")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def list_cmd(as_json: bool) -> None:
    """The built-in recipes: id, package, versions."""
    if as_json:
        from .recipe import all_recipes

        click.echo(json.dumps([_recipe_json(s) for s in all_recipes()], indent=2))
        return
    from .catalogue import entries

    rows = [(e.id, f"{e.distribution} {e.versions or '(any)'}", _first_sentence(e.description)) for e in entries()]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    for rid, package, description in rows:
        click.echo(f"{rid.ljust(widths[0])}  {package.ljust(widths[1])}  {description}")


def _first_sentence(text: str) -> str:
    head = text.split(". ")[0].split(": ")[0]
    return head if len(head) < 90 else head[:87] + "..."


def _recipe_json(s) -> dict:
    r = s.recipe
    return {
        "id": r.id, "description": r.description, "package": r.target.package,
        "distribution": r.target.distribution, "versions": r.target.versions, "files": list(r.target.files),
        "backend": r.backend, "options": {o.name: {"choices": list(o.choices), "default": o.default} for o in r.options},
    }


@main.command()
@click.argument("recipe", shell_complete=_complete_recipes)
@overrides_argument
@root_option
@backend_option
def show(recipe: str, overrides: Sequence[str], root: Optional[str], backend: Optional[str]) -> None:
    """The resolved recipe, the file it would patch here, and the code it inserts."""
    from . import codegen
    from .recipe import load
    from .vocabulary import SETTING

    s = load(recipe, overrides, backend)
    r = s.recipe
    out = [f"{r.id}  ({r.path})", "", r.description, "",
           f"target:   {r.target.distribution} {r.target.versions or '(any version)'}, import name {r.target.package}",
           "files:    " + ", ".join(r.target.files), _patches(s, root), f"backend:  {r.backend}"]
    for key, value in s.runtime_settings().items():
        if key != "backend":
            out.append(f"  {SETTING[key].key}: {_as_typed(value)}")
    for o in r.options:
        out.append(f"option {o.name} = {s.choice(o.name)}  (choices: {', '.join(o.choices)}){'  ' + o.help if o.help else ''}")
    out += ["", "inserted at the top of each patched module:"]
    out += ["    " + line for line in codegen.header_lines(s)]
    for p in s.active_points():
        out.append(f"{p.describe()}:")
        code = codegen.exit_decorator(s, p) if p.at == "on_exit" else codegen.call_statement(s, p)
        out.append("    " + code)
    for note in r.notes:
        out.append(f"note: {note}")
    try:
        from .backends import render

        out += ["", f"profiler code the runtime builds ({r.backend}):", render(s.runtime_settings())]
    except ImportError:
        pass
    click.echo("\n".join(out))


@main.command()
@click.argument("recipe", shell_complete=_complete_recipes)
@overrides_argument
@root_option
@backend_option
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), help="write the patch to this file")
@click.option("--stat", is_flag=True, help="a summary of the changes instead of the patch")
@click.option("--ray", "ray_address", metavar="ADDRESS", help="run on every alive node of this Ray cluster (or auto)")
@skip_version_option
def diff(recipe, overrides, root, backend, output, stat, ray_address=None, skip_version=False) -> None:
    """Unified diff of what apply would change; writes nothing to the targets."""
    if ray_address:
        from . import cluster

        return cluster.diff_command(ray_address, recipe, overrides, root, backend, output, stat, skip_version)
    from . import api
    from .diff import colour
    from .diff import stat as diffstat

    s = api.load(recipe, overrides, backend)
    plan = api.plan(s, root, skip_version)
    _say_skipped(plan.version_skipped)
    text = plan.diff()
    if stat:
        click.echo(diffstat((f.diffpath, f.diff()) for f in plan.files if f.changes), nl=False)
    elif output:
        Path(output).write_text(text, encoding="utf-8", newline="")
        _say(f"wrote {output}")
    elif text:
        click.echo(colour(text) if sys.stdout.isatty() else text, nl=False)
    changed = sum(f.changes for f in plan.files)
    for f in plan.files:
        if f.work_tree is not None:
            _say(f"git: {f.diffpath} is " + (f"tracked in the git work tree {f.work_tree}" if f.tracked else
                                              f"in the git work tree {f.work_tree} but not tracked there"))
    _say(f"{s.id}: {changed} file(s) would change, {len(plan.files) - changed} already applied "
         f"({s.recipe.target.distribution} {plan.installed.shown}, from {plan.installed.version_from})")
    if changed:
        _say("apply the patch with `git apply` or `patch -p1` run in " + " and ".join(map(str, plan.patch_bases())))


@main.command()
@click.argument("recipe", shell_complete=_complete_recipes)
@overrides_argument
@root_option
@backend_option
@click.option("--allow-dirty", is_flag=True, help="patch files that have uncommitted changes in their git checkout")
@click.option("--commit", is_flag=True, help="in a git checkout, commit the patch on a new branch patchkit/RECIPE")
@click.option("--interactive", "-i", is_flag=True, help="show each file's diff and ask y/n/q before writing")
@click.option("--ray", "ray_address", metavar="ADDRESS", help="run on every alive node of this Ray cluster (or auto)")
@skip_version_option
def apply(recipe, overrides, root, backend, allow_dirty=False, commit=False, interactive=False, ray_address=None,
          skip_version=False) -> None:
    """Patch the target files, back them up and record it.

    In a git checkout, a file with uncommitted changes is refused unless
    --allow-dirty.  A recipe's files are written all together or not at
    all: with --interactive, answering n for any file (or q) writes nothing.
    """
    if ray_address:
        if allow_dirty or commit or interactive:
            raise click.UsageError("--allow-dirty, --commit and --interactive are not available with --ray")
        from . import cluster

        return cluster.apply_command(ray_address, recipe, overrides, root, backend, skip_version)
    from . import api
    from .targets import locate

    s = api.load(recipe, overrides, backend)
    if skip_version:  # said before anything is written (or asked with --interactive)
        _say_skipped(_refusal(locate(s.recipe.target, root), s))
    outcomes = api.apply(s, root, ledger=_ledger(), allow_dirty=allow_dirty, commit=commit,
                         skip_version_check=skip_version, review=_review if interactive else None)
    for o in outcomes:
        _say(f"{o.state}: {o.path}" + (f" ({o.detail})" if o.detail else ""))
    _say_git(outcomes)
    if any(o.state == "not written" for o in outcomes):
        _say(f"{s.id}: nothing written")
        sys.exit(1)
    changed = sum(o.state in ("patched", "updated") for o in outcomes)
    installed = locate(s.recipe.target, root)
    if changed:
        from .environment import runtime_missing

        missing = runtime_missing(installed.root)
        if missing:
            _say(f"warning: {missing}")
    own = api.own_dependency(s)
    if own:
        _say(f"warning: {s.recipe.target.package} ({own}) is patchkit's own code or one of its dependencies: "
             f"every patchkit command now runs the patched lines and profiles patchkit itself; "
             f"`patchkit revert {s.id}` when done")
    _say(f"{s.id}: {changed} file(s) patched, {len(outcomes) - changed} already applied "
         f"({s.recipe.target.distribution} {installed.shown}, from {installed.version_from}); "
         f"traces go to {s.recipe.profiler.save_path}; undo with `patchkit revert {s.id}`")
    for note in s.recipe.notes:  # after the outcome: a failing apply shows its error first, and only that
        _say(f"note: {note}")


def _as_typed(value) -> str:
    """A setting as it is written in KEY=VALUE: true, [npu, cpu]."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def _patches(s, root: Optional[str]) -> str:
    """show's line naming the file that diff/apply would change here, or why none is named.

    Finding the package reads no file of it (``find_spec``); only when it is
    there in a supported version are its candidate files parsed to pick one.
    """
    from . import api

    try:
        installed, paths = api.files_to_patch(s, root)
    except PatchkitError as exc:
        where = f"{exc.where}: " if exc.where and exc.where.line is not None else ""
        return f"patches:  no file shown: {where}{exc.message}" + (f"\n          hint: {exc.hint}" if exc.hint else "")
    return (f"patches:  {', '.join(map(str, paths))}\n"
            f"          ({s.recipe.target.distribution} {installed.version or '(version unknown)'}, "
            f"from {installed.version_from})")


def _refusal(installed, s) -> str:
    """The version check's refusal for ``installed``, or "" when its version is in the recipe's range."""
    from .targets import check_version

    try:
        check_version(installed, s.recipe.target, s.id, s.recipe.path)
    except PatchkitError as exc:
        return exc.message
    return ""


def _say_git(outcomes) -> None:
    """Each distinct git note once (files of one checkout share them)."""
    seen = set()
    for o in outcomes:
        if o.git and o.git not in seen:
            seen.add(o.git)
            _say(f"git: {o.git}")


def _review(files) -> bool:
    """apply --interactive: each file's diff, then y/n/q; any n or q means nothing is written."""
    from .diff import colour

    declined = []
    for number, f in enumerate(files, 1):
        text = f.diff()
        click.echo(colour(text) if sys.stdout.isatty() else text, nl=False)
        answer = click.prompt(f"({number}/{len(files)}) write {f.diffpath}? [y,n,q]", err=True, show_choices=False,
                              type=click.Choice(["y", "n", "q"], case_sensitive=False)).lower()
        if answer == "q":
            _say("quit: nothing written")
            return False
        if answer == "n":
            declined.append(f.diffpath)
            if len(files) > 1 and number < len(files):
                _say("note: a recipe writes all its files or none, so nothing will be written; the remaining files follow")
    if declined:
        _say(f"declined {', '.join(declined)}: nothing written")
    return not declined


@main.command()
@click.argument("recipes", nargs=-1, shell_complete=_complete_applied)
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
        from . import cluster

        return cluster.revert_command(ray_address, recipes, everything, root, force)
    from . import api

    outcomes = api.revert(recipes, everything, root, ledger=_ledger(), force=force)
    for o in outcomes:
        _say(f"{o.state}: {o.path} ({o.detail})")
    _say_git(outcomes)
    _say(f"{len(outcomes)} file(s) handled" if outcomes else "nothing was applied")


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
        from . import cluster

        return cluster.status_command(ray_address, as_json, root)
    from . import api
    from .ledger import home

    rows = api.status(ledger=_ledger(), root=root)
    if as_json:
        click.echo(json.dumps({"home": str(home()), "files": [st.to_json() for st in rows]}, indent=2))
        return
    if not rows:
        click.echo("nothing applied")
        return
    for st in rows:
        if st.record is None:
            f = st.found
            click.echo(f"{st.state:10s}  {', '.join(f.recipes)}  {f.path}  ({f.distribution} {f.version or '?'})  "
                       f"[no record under {home()}: revert takes the marked lines out, without a backup]")
            continue
        recipes = ", ".join(sorted(st.record.recipes))
        warn = "" if st.backup_ok else "  [backup missing or corrupted: revert takes the marked lines out]"
        click.echo(f"{st.state:10s}  {recipes}  {st.record.path}  ({st.record.distribution} {st.record.version}){warn}")
        for rid, a in sorted(st.record.recipes.items()):
            if a.git:
                click.echo(f"{'':10s}  {rid}: committed {a.git['commit'][:10]} on {a.git['branch']} in {a.git['work_tree']}")


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path())
def validate(files) -> None:
    """Check recipe files; print each problem as file:line:col."""
    from .recipe import load_recipe

    bad = 0
    for name in files:
        try:
            load_recipe(Path(name))
        except PatchkitError as exc:
            bad += 1
            click.echo(f"error: {exc.render()}", err=True)
        else:
            _say(f"ok: {name}")
    _say(f"{len(files) - bad} valid, {bad} invalid")
    if bad:
        sys.exit(1)


@main.command("test")
@click.argument("recipes", nargs=-1, shell_complete=_complete_recipes)
def test_cmd(recipes) -> None:
    """Run recipes' own examples (all built-in recipes by default)."""
    from . import api

    settings = [api.load(r) for r in recipes] if recipes else api.all_recipes()
    passed = failed = 0
    for s in settings:
        for outcome in api.run_examples(s):
            if outcome.ok:
                passed += 1
                _say(f"PASS {s.id}: {outcome.example.name}")
            else:
                failed += 1
                where = outcome.example.where
                _say(f"FAIL {where}: {s.id}: {outcome.example.name}: {outcome.message}")
    click.echo(f"{passed} passed, {failed} failed")
    if failed:
        sys.exit(1)


@main.command()
@click.option("--keep", is_flag=True, help="keep the temporary folder")
def demo(keep: bool) -> None:
    """The whole loop on a bundled verl-shaped sample, on CPU: diff, apply, run, revert."""
    from .demo.runner import run_demo

    sys.exit(run_demo(keep=keep, echo=click.echo))


from . import cli_analysis  # noqa: E402  (after main: analyse, summary and compare attach to it)

main.add_command(cli_analysis.analyse_cmd)
main.add_command(cli_analysis.summary_cmd)
main.add_command(cli_analysis.compare_cmd)

if __name__ == "__main__":  # pragma: no cover
    main()
