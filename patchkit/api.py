"""The importable API in one place: resolve -> transform -> verify -> back up -> write.

The work is done in modules of one concern each, in this order::

    recipe        a recipe file (or built-in id) and KEY=VALUE overrides -> Settings
    planning      Settings -> Plan: the files, and each one's transform (writes nothing)
    review        the git checkout: uncommitted changes, apply --commit's branch
    transaction   apply and revert: every file or none, one FileOutcome per file
    state         status: what is applied where
    examples      a recipe's own before/after examples

The command line (:mod:`patchkit.cli.commands`) and the Ray layer
(:mod:`patchkit.cluster.ray`) call these functions; everything here returns data
and raises :class:`~patchkit.core.errors.PatchkitError` for what the user can fix.
"""

from __future__ import annotations

from typing import Optional

from patchkit.engine.examples import ExampleOutcome, example_points, run_examples  # noqa: F401
from patchkit.engine.marks import decode  # noqa: F401
from patchkit.core.model import Settings
from patchkit.core.outcome import FileOutcome, Outcome, Status  # noqa: F401
from patchkit.state.planning import FilePlan, Plan, files_to_patch, own_dependency, plan  # noqa: F401
from patchkit.recipe.catalogue import builtin_dir, builtin_ids  # noqa: F401
from patchkit.recipe.load import all_recipes, load, load_recipe, recipe_path  # noqa: F401
from patchkit.state.status import FileStatus, status  # noqa: F401
from patchkit.state.transaction import apply, revert  # noqa: F401


def diff(settings: Settings, root: Optional[str] = None, skip_version_check: bool = False) -> str:
    """The unified diff apply would write, with paths from the top of the checkout (or root) holding each file."""
    return plan(settings, root, skip_version_check).diff()
