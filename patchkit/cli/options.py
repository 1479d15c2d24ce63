"""The options several commands share: KEY=VALUE overrides, --root, --backend, the version checks, --ray, -o FILE,
completion.  Each is a decorator that declares the option and hands the command what it means."""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import click

ROOT_HELP = "folder that plays site-packages, or a source checkout (default: $PATCHKIT_ROOT, else this environment)"
RAY_HELP = "run on every alive node of this Ray cluster (or auto)"

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


def ray_option(on_cluster: Callable[..., None], refuse: Sequence[str] = (), help: str = RAY_HELP):
    """``--ray ADDRESS``: the command on every alive node of a Ray cluster.

    Without it the command runs here.  With it, ``on_cluster(address, **the command's own arguments)`` runs
    instead: the same operation on every node, said as one line per node (:mod:`patchkit.cli.cluster`).  The
    options named in ``refuse`` mean nothing there: given with ``--ray``, they are a usage error.  Put it below
    :func:`version_options`, which hands both the same ``versions``.
    """
    def decorate(f):
        @functools.wraps(f)
        def command(*args, ray_address=None, **kwargs):
            if not ray_address:
                return f(*args, **kwargs)
            given = ["--" + name.replace("_", "-") for name in refuse if kwargs.pop(name, None)]
            if given:
                named = ", ".join(given[:-1]) + " and " + given[-1] if len(given) > 1 else given[0]
                raise click.UsageError(f"{named} {'are' if len(given) > 1 else 'is'} not available with --ray")
            return on_cluster(ray_address, *args, **kwargs)

        return click.option("--ray", "ray_address", metavar="ADDRESS", help=help)(command)

    return decorate


def write_output(path: str, text: str) -> None:
    """``-o FILE``: ``text`` written whole, through no link another user made (:func:`patchkit.core.reach.write_file`);
    any failure is one located error, with nothing written."""
    from patchkit.core.errors import Location, PatchkitError
    from patchkit.core.reach import explain, write_file

    try:
        write_file(path, text.encode("utf-8"))
    except OSError as exc:
        what, hint = explain(exc, path)
        raise PatchkitError(f"{what}; the patch was not written", Location(path), hint) from None


def version_options(f):
    """--skip-version-check and --strict-versions; the command gets ``versions``: (skip, strict or None for the
    environment's $PATCHKIT_STRICT_VERSIONS)."""
    f = click.option("--strict-versions", "strict", is_flag=True, help="patch only releases the recipe is proven on "
                     "(also $PATCHKIT_STRICT_VERSIONS=1): refuse newer ones and code with no version")(f)
    f = click.option("--skip-version-check", "skip", is_flag=True,
                     help="patch a version the recipe refuses; its points must still match")(f)
    return _pass_versions(f)


def _pass_versions(f):
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
