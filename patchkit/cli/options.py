"""The options several commands share: KEY=VALUE overrides, --root, --backend, the version checks, completion."""

from __future__ import annotations

import click

ROOT_HELP = "folder that plays site-packages, or a source checkout (default: $PATCHKIT_ROOT, else this environment)"

OVERRIDES_HELP = ("KEY=VALUE: dotted recipe settings, values read as YAML: schedule.wait=2 profiler.level=level1 "
                  "profiler.contents=[npu,cpu] backend=torch, and the recipe's options: granularity=micro, role=ref. "
                  "`patchkit show RECIPE` lists a recipe's keys and options.")


def complete_recipes(ctx, param, incomplete: str):
    """Shell completion: built-in recipe ids, or file names once it looks like a path."""
    from click.shell_completion import CompletionItem

    if "/" in incomplete or incomplete.endswith((".yaml", ".yml")):
        return [CompletionItem(incomplete, type="file")]
    from patchkit.recipe.catalogue import builtin_ids

    return [CompletionItem(rid) for rid in builtin_ids() if rid.startswith(incomplete)]


def complete_applied(ctx, param, incomplete: str):
    """Shell completion for revert: the recipes the ledger says are applied."""
    from click.shell_completion import CompletionItem

    try:
        from patchkit.state.ledger import Ledger

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


def version_options(f):
    """--skip-version-check and --strict-versions; the command gets ``versions``: (skip, strict or None for the
    environment's $PATCHKIT_STRICT_VERSIONS)."""
    f = click.option("--strict-versions", "strict", is_flag=True, help="patch only releases the recipe is proven on "
                     "(also $PATCHKIT_STRICT_VERSIONS=1): refuse newer ones and code with no version")(f)
    f = click.option("--skip-version-check", "skip", is_flag=True,
                     help="patch a version the recipe refuses; its points must still match")(f)
    return _pass_versions(f)


def _pass_versions(f):
    import functools

    @functools.wraps(f)
    def command(*args, skip: bool = False, strict: bool = False, **kwargs):
        return f(*args, versions=(skip, strict or None), **kwargs)

    return command


class BackendChoice(click.Choice):
    """``--backend``: the names registered in patchkit.runtime.backends, read when used (no backend module is imported)."""

    def __init__(self) -> None:  # no fixed list: a backend registered after this module is imported counts too
        self.case_sensitive = True

    @property
    def choices(self):  # type: ignore[override]
        from patchkit.runtime import backends

        return backends.names()


def backend_option(f):
    return click.option("--backend", type=BackendChoice(), default=None,
                        help="profiler backend (overrides the recipe's)")(f)
