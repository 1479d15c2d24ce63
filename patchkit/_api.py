"""The calls the commands make, one each: the work behind ``patchkit``'s public names that are more than one
layer's function.  Import them from ``patchkit`` (``patchkit.plan_recipe``), not from here.

Each command of the command line is one call: :func:`plan_recipe` (diff), :func:`apply_recipe` (apply),
:func:`patchkit.revert`, :func:`patchkit.status`, :func:`outline` (points), :func:`new_recipe` (new).  The work is
done in modules of one concern each, in this order::

    recipe        a recipe file (or built-in id) and KEY=VALUE overrides -> Settings
    planning      Settings -> Plan: the files, and each one's transform (writes nothing)
    review        the git checkout: uncommitted changes, apply --commit's branch
    transaction   apply and revert: every file or none, one FileOutcome per file
    status        what is applied where
    examples      a recipe's own before/after examples
    authoring     module:Class.method -> the file and the function's outline (points); a new recipe (new)

The command line (:mod:`patchkit.cli`) and the Ray layer (:mod:`patchkit.cluster.node`) call these through
``patchkit``; everything here returns data and raises :class:`~patchkit.core.errors.PatchkitError` for what the
user can fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, List, NamedTuple, Optional, Sequence, Tuple

from patchkit.core.errors import PatchkitError
from patchkit.core.model import Settings
from patchkit.core.outcome import FileOutcome, Outcome
from patchkit.recipe.load import load
from patchkit.state.planning import Plan, own_dependency, plan, skipped_note
from patchkit.state.targets import Installed
from patchkit.state.transaction import apply

if TYPE_CHECKING:  # points and new load their modules when they run (diff and apply need neither)
    from patchkit.authoring.funcref import FunctionRef
    from patchkit.authoring.newrecipe import Written


def diff(settings: Settings, root: Optional[str] = None, skip_version_check: bool = False,
         strict_versions: Optional[bool] = None) -> str:
    """The unified diff apply would write, with paths from the top of the checkout (or root) holding each file."""
    return plan(settings, root, skip_version_check, strict_versions).diff()


def plan_recipe(recipe: str, overrides: Sequence[str] = (), backend: Optional[str] = None, root: Optional[str] = None,
                skip_version_check: bool = False, strict_versions: Optional[bool] = None) -> Plan:
    """``patchkit diff``: load the recipe (a built-in id or a file) with its overrides and plan it; writes nothing.

    A version past the recipe's proven range is planned when every point fits, and ``Plan.version_note`` says so;
    ``strict_versions`` (None: ``$PATCHKIT_STRICT_VERSIONS``) refuses it instead."""
    return plan(load(recipe, overrides, backend), root, skip_version_check, strict_versions)


class ApplyReport(NamedTuple):
    """What ``patchkit apply`` did: each file's outcome, where the package is, and what the user should know."""

    settings: Settings
    outcomes: List[FileOutcome]
    installed: Installed
    version_skipped: str  # with skip_version_check: the refusal that was let through ("" when the version fits)
    warnings: List[str]  # the runtime cannot be imported where the package is; the package is patchkit's own
    version_note: str = ""  # a version past the proven range, or none: what to say once ("" when proven)

    def to_json(self) -> dict:
        """``patchkit apply --json``: the recipe, the package's version, each file's outcome, and the notes."""
        return {"recipe": self.settings.id, "distribution": self.settings.recipe.target.distribution,
                "version": self.installed.shown, "version_from": self.installed.version_from,
                "root": str(self.installed.root), "version_note": self.version_note,
                "version_skipped": self.version_skipped, "warnings": list(self.warnings),
                "files": [{"path": str(o.path), "outcome": o.state.value, "detail": o.detail} for o in self.outcomes]}

    @property
    def written(self) -> bool:
        """False when a review declined: nothing was written."""
        return not any(o.state is Outcome.NOT_WRITTEN for o in self.outcomes)

    @property
    def changed(self) -> int:
        return sum(o.state.written for o in self.outcomes)


def apply_recipe(recipe: str, overrides: Sequence[str] = (), backend: Optional[str] = None,
                 root: Optional[str] = None, *, ledger=None, allow_dirty: bool = False, commit: bool = False,
                 skip_version_check: bool = False, strict_versions: Optional[bool] = None,
                 review: Optional[Callable[[Plan], bool]] = None) -> ApplyReport:
    """``patchkit apply``: load the recipe, patch every file of it or none, and say what to know about the result.

    ``review`` is shown the plan (its changing files) after every check and before anything is written; if it
    returns False nothing is written.  Everything else is :func:`patchkit.state.transaction.apply`.
    """
    from patchkit.state.environment import runtime_missing

    settings = load(recipe, overrides, backend)
    plans: List[Plan] = []
    reviewed: List[bool] = []

    def reviewing(files) -> bool:
        reviewed.append(review(plans[-1]))
        return reviewed[-1]

    try:
        outcomes = apply(settings, root, ledger, allow_dirty=allow_dirty, commit=commit,
                         skip_version_check=skip_version_check, strict_versions=strict_versions, planned=plans.append,
                         review=reviewing if review is not None else None)
    except PatchkitError as exc:  # a check after the plan refused: the error says what the skipped check let through
        if plans and plans[-1].version_skipped and not reviewed:
            exc.warnings.append(skipped_note(plans[-1].version_skipped))
        raise
    p = plans[-1]
    warnings = []
    missing = runtime_missing(p.installed.root) if any(o.state.written for o in outcomes) else None
    if missing:
        warnings.append(missing)
    own = own_dependency(settings)
    if own:
        warnings.append(f"{settings.recipe.target.package} ({own}) is patchkit's own code or one of its dependencies: "
                        f"every patchkit command now runs the patched lines and profiles patchkit itself; "
                        f"`patchkit revert {settings.id}` when done")
    return ApplyReport(settings, outcomes, p.installed, p.version_skipped, warnings, p.version_note)


def outline(target: str, root: Optional[str] = None) -> Tuple["FunctionRef", object]:
    """``patchkit points``: where TARGET (``module:Class.method``, ``module:function``, ``FILE.py::NAME``) lives,
    and its outline (:class:`patchkit.engine.points.outline.Outline`): each line with the points that fit there."""
    from patchkit.authoring.funcref import read_outline, resolve

    ref = resolve(target, root)
    return ref, read_outline(ref)[0]


def new_recipe(recipe_id: str, point_specs: Sequence[str], start_from: Optional[str] = None,
               root: Optional[str] = None, output: Optional[str] = None, backend: Optional[str] = None) -> "Written":
    """``patchkit new``: write the recipe ``recipe_id`` for the points asked (see
    :func:`patchkit.authoring.newrecipe.write_new`); nothing is written on any error."""
    from patchkit.authoring.newrecipe import write_new

    return write_new(recipe_id, point_specs, start_from, root, output, backend)
