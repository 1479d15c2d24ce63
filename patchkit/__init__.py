"""patchkit: reversible profiler patches for RL training stacks.

This module is the public API, every name of it in ``__all__``; the command line (:mod:`patchkit.cli`) is a thin
layer over the same names::

    import patchkit

    settings = patchkit.load("verl-fsdp-update", ["schedule.wait=2"])
    print(patchkit.plan(settings).diff())        # what apply would change
    for outcome in patchkit.apply(settings):     # patch, back up, record
        print(outcome.state, outcome.path)
    patchkit.status()                            # what is applied where
    patchkit.revert(["verl-fsdp-update"])        # the original bytes back

    report = patchkit.apply_recipe("verl-fsdp-update", ["schedule.wait=2"])   # what `patchkit apply` calls

The work is done below: in the layers' modules, and, for the calls that are one command each
(:func:`plan_recipe`, :func:`apply_recipe`, :func:`outline`, :func:`new_recipe`), in the private ``_api``.
Each name loads its module on first use, so ``import patchkit`` (and ``patchkit --help``) imports no parser,
git or torch.  (``patchkit.api``, the same names gathered a second time, is deprecated.)
"""

__version__ = "0.2.0"

# The name on the package registry.  Import name and command are ``patchkit``,
# but the registry's "patchkit" is an unrelated project: install this one by
# this name (or from a wheel built from the checkout).
DISTRIBUTION = "patchkit-profiler"

# Each public name, and the module (under patchkit) that defines it.
_EXPORTS = {
    # recipes: a built-in id or a file, with KEY=VALUE overrides
    "load": "recipe.load", "load_recipe": "recipe.load", "all_recipes": "recipe.load", "recipe_path": "recipe.load",
    "builtin_ids": "recipe.catalogue", "Settings": "core.model", "Recipe": "core.model",
    # one call per command: diff, apply, points, new
    "plan_recipe": "_api", "diff": "_api", "apply_recipe": "_api", "ApplyReport": "_api",
    "outline": "_api", "new_recipe": "_api",
    # plan, apply, revert, status
    "plan": "state.planning", "Plan": "state.planning", "FilePlan": "state.planning", "files_to_patch": "state.planning",
    "apply": "state.transaction", "revert": "state.transaction",
    "status": "state.status", "FileStatus": "state.status",
    "FileOutcome": "core.outcome", "Outcome": "core.outcome", "Status": "core.outcome",
    "Ledger": "state.ledger",
    # a recipe's own examples
    "run_examples": "engine.examples", "ExampleOutcome": "engine.examples",
    # errors
    "PatchkitError": "core.errors", "RecipeError": "core.errors", "OverrideError": "core.errors", "TargetError": "core.errors",
    "AnchorError": "core.errors", "LedgerError": "core.errors", "LockedError": "core.errors", "Location": "core.errors",
}

__all__ = ["__version__", "DISTRIBUTION", *_EXPORTS]


def __getattr__(name: str):
    try:
        where = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value  # later look-ups find it without coming back here
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
