"""The importable API: ``patchkit`` is its one face (``__all__``), the calls behind it are ``patchkit._api``'s, the old
``patchkit.api`` still answers with a DeprecationWarning, and a whole round trip runs through the face."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import patchkit
from patchkit import _api

from conftest import snapshot

DP = "verl/workers/actor/dp_actor.py"
R = "verl-fsdp-update"


def test_a_round_trip_through_the_public_names(tree):
    root = tree("verl-0.6")
    before = snapshot(root)
    settings = patchkit.load(R, ["schedule.wait=2"])
    assert isinstance(settings, patchkit.Settings)
    plan = patchkit.plan(settings, str(root))
    assert isinstance(plan, patchkit.Plan) and plan.diff().startswith(f"--- a/{DP}")
    [done] = patchkit.apply(settings, str(root))
    assert isinstance(done, patchkit.FileOutcome) and done.state is patchkit.Outcome.PATCHED
    [row] = patchkit.status()
    assert isinstance(row, patchkit.FileStatus) and row.state is patchkit.Status.APPLIED
    assert row.to_json()["state"] == "applied"
    [gone] = patchkit.revert([R])
    assert gone.state is patchkit.Outcome.REVERTED and snapshot(root) == before
    assert all(o.ok for o in patchkit.run_examples(settings))
    with pytest.raises(patchkit.PatchkitError):
        patchkit.revert([R])


def test_every_public_name_is_the_one_its_module_defines():
    import importlib

    for name, where in patchkit._EXPORTS.items():
        assert getattr(patchkit, name) is getattr(importlib.import_module(f"patchkit.{where}"), name), name
    assert set(patchkit.__all__) == {"__version__", "DISTRIBUTION", *patchkit._EXPORTS}
    assert set(patchkit.__all__) <= set(dir(patchkit))
    with pytest.raises(AttributeError, match="module 'patchkit' has no attribute 'nope'"):
        patchkit.nope  # noqa: B018


def test_no_public_name_is_also_a_module_name():
    """`import patchkit.x` sets the attribute x on the package: a function of that name would be shadowed."""
    here = Path(patchkit.__file__).parent
    modules = {p.stem for p in here.glob("*.py")} | {p.name for p in here.iterdir() if (p / "__init__.py").exists()}
    assert not modules & set(patchkit._EXPORTS)


def test_importing_patchkit_imports_nothing_else_until_a_name_is_used():
    code = ("import sys; import patchkit; a = {m for m in sys.modules if m.startswith('patchkit')}; "
            "patchkit.status; b = {m for m in sys.modules if m.startswith('patchkit')}; "
            "print(sorted(a)); print('patchkit.state.status' in b, 'patchkit.engine.codemod' in b, "
            "bool({'libcst', 'git', 'torch'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["['patchkit']", "True False False"]


def test_the_face_names_each_layer_s_own_function_and_the_calls_of_the_commands():
    from patchkit.engine import examples
    from patchkit.recipe import load as recipe
    from patchkit.state import planning, transaction
    from patchkit.state import status as state

    assert (patchkit.plan, patchkit.files_to_patch) == (planning.plan, planning.files_to_patch)
    assert (patchkit.apply, patchkit.revert, patchkit.status) == (transaction.apply, transaction.revert, state.status)
    assert (patchkit.load, patchkit.all_recipes, patchkit.recipe_path) == (recipe.load, recipe.all_recipes,
                                                                          recipe.recipe_path)
    assert patchkit.run_examples is examples.run_examples
    for name in ("plan_recipe", "apply_recipe", "ApplyReport", "diff", "outline", "new_recipe"):
        assert getattr(patchkit, name) is getattr(_api, name) and name in patchkit.__all__


def test_the_old_api_module_still_answers_with_a_deprecation_warning():
    code = ("import warnings, patchkit; warnings.simplefilter('always')\n"
            "with warnings.catch_warnings(record=True) as seen:\n"
            "    from patchkit import api\n"
            "print([str(w.message) for w in seen if w.category is DeprecationWarning])\n"
            "from patchkit.engine.examples import example_points\n"
            "print(api.load is patchkit.load, api.apply_recipe is patchkit.apply_recipe, "
            "api.example_points is example_points, set(patchkit.__all__) <= set(dir(api)))\n"
            "try:\n    api.nope\nexcept AttributeError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "[\"patchkit.api is deprecated: its names are patchkit's own (`import patchkit; " \
                     "patchkit.load(...)`)\"]"
    assert out[1:] == ["True True True True", "module 'patchkit.api' has no attribute 'nope'"]


def _uses_the_deprecated_module(path: Path) -> bool:
    """Whether ``path`` imports ``patchkit.api`` (as ``from patchkit import ..., api`` too)."""
    import ast

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "patchkit" and any(a.name == "api" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("patchkit.api"):
            return True
        if isinstance(node, ast.Import) and any(a.name.startswith("patchkit.api") for a in node.names):
            return True
    return False


def test_nothing_in_the_package_uses_the_deprecated_module():
    here = Path(patchkit.__file__).parent
    users = [str(p.relative_to(here)) for p in here.rglob("*.py")
             if p.name != "api.py" and _uses_the_deprecated_module(p)]
    assert not users


def test_no_test_but_this_one_imports_the_deprecated_module():
    """The suite runs on the supported names (a DeprecationWarning of patchkit's own in its output would be a
    newcomer's first question); this module's subprocess above is the one check of the deprecation itself."""
    tests = Path(__file__).parent
    users = [p.name for p in tests.rglob("*.py") if p.name != Path(__file__).name and _uses_the_deprecated_module(p)]
    assert not users


def test_api_diff_is_the_plans_diff(tree):
    root = tree("verl-0.6")
    settings = patchkit.load(R)
    assert patchkit.diff(settings, str(root)) == patchkit.plan(settings, str(root)).diff() != ""


def test_one_call_per_command_loads_plans_and_applies(tree, monkeypatch):
    root = tree("verl-0.6")
    before = snapshot(root)
    p = patchkit.plan_recipe(R, ["schedule.wait=2"], None, str(root))
    assert p.settings.id == R and p.files[0].changes and snapshot(root) == before
    done = patchkit.apply_recipe(R, ["schedule.wait=2"], None, str(root))
    assert isinstance(done, patchkit.ApplyReport) and done.written and done.changed == 1
    assert (done.installed.version, done.version_skipped) == ("0.6.1", "")
    [warning] = done.warnings  # the tree is shaped like a site-packages folder with no patchkit in it
    assert warning.startswith(f"{root.resolve()} has no patchkit")
    again = patchkit.apply_recipe(R, ["schedule.wait=2"], None, str(root))
    assert again.changed == 0 and again.outcomes[0].state is patchkit.Outcome.ALREADY_APPLIED


def test_apply_recipe_says_when_the_target_is_patchkits_own_dependency(tree, monkeypatch):
    root = tree("verl-0.6")
    monkeypatch.setattr(_api, "own_dependency", lambda settings: "pyyaml")
    warning = patchkit.apply_recipe(R, (), None, str(root)).warnings[-1]
    assert "(pyyaml) is patchkit's own code or one of its dependencies" in warning


def test_a_declined_review_writes_nothing_and_says_so(tree):
    root = tree("verl-0.6")
    before = snapshot(root)
    seen = []
    done = patchkit.apply_recipe(R, (), None, str(root), review=lambda plan: seen.append(plan) or False)
    assert not done.written and snapshot(root) == before
    assert [f.relpath for f in seen[0].files if f.changes] == [DP]
