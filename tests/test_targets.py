"""targets: where a recipe's package is (find_spec, --root, $PATCHKIT_ROOT), its version, and its files."""

from __future__ import annotations

import sys

import pytest

import patchkit
from patchkit.core.errors import TargetError
from patchkit.core.model import Target
from patchkit.state.targets import locate
from patchkit.state.versioncheck import check_version
from script_helpers import script_recipe as recipe_text

DP = "verl/workers/actor/dp_actor.py"


def test_patchkit_root_environment_variable_is_the_default_root(tree, monkeypatch):
    root = tree("verl-0.6")
    monkeypatch.setenv("PATCHKIT_ROOT", str(root))
    plan = patchkit.plan(patchkit.load("verl-fsdp-update"))
    assert plan.installed.root == root.resolve() and plan.installed.version == "0.6.1"


def test_the_package_is_found_on_sys_path_without_being_imported(tree, monkeypatch):
    root = tree("verl-0.6")
    (root / "verl" / "__init__.py").write_text("raise RuntimeError('imported!')\n")
    monkeypatch.syspath_prepend(str(root))
    installed = locate(Target("verl", "verl", ">=0.4", ("x.py",)))
    assert installed.package_dir == (root / "verl").resolve()
    assert installed.version == "0.6.1"
    assert "verl" not in sys.modules


def test_versions_outside_the_range_and_unknown_versions_are_refused(tree, tmp_path):
    root = tree("verl-0.6")
    target = Target("verl", "verl", ">=0.7", ("x.py",), instead="other-recipe")
    with pytest.raises(TargetError) as info:
        check_version(locate(target, str(root)), target, "r")
    assert "verl 0.6.1 is installed" in info.value.message and "r is proven on verl >=0.7" in info.value.message
    # "instead" names no built-in recipe, so it is not offered; the built-in ones that take 0.6.1 are
    assert "other-recipe" not in info.value.hint
    assert "built-in recipes for verl 0.6.1: verl-engine-update (verl >=0.6,<=0.9.1), " in info.value.hint
    assert "--skip-version-check" in info.value.hint
    bare = tmp_path / "bare"
    (bare / "verl").mkdir(parents=True)
    with pytest.raises(TargetError) as info:
        check_version(locate(target, str(bare)), target, "r", strict=True)
    assert "cannot tell which version of verl" in info.value.message and "only releases it is proven on" in info.value.message


def test_prereleases_inside_the_range_are_accepted(tree):
    root = tree("verl-0.6")
    meta = next(root.glob("*.dist-info")) / "METADATA"
    meta.write_text(meta.read_text().replace("Version: 0.6.1", "Version: 0.6.1rc1"))
    target = Target("verl", "verl", ">=0.4,<0.8", ("x.py",))
    check_version(locate(target, str(root)), target, "r")


def test_root_that_is_not_a_folder_or_lacks_the_package(tmp_path):
    target = Target("verl", "verl", "", ("x.py",))
    with pytest.raises(TargetError, match="is not a directory"):
        locate(target, str(tmp_path / "nope"))
    with pytest.raises(TargetError, match="no package verl under"):
        locate(target, str(tmp_path))


def test_a_recipe_whose_files_are_all_missing_says_so(tree, tmp_path):
    root = tree("verl-0.9")
    path = tmp_path / "x.yaml"
    path.write_text("id: x\ndescription: d\ntarget: {package: verl, files: [verl/nothing.py]}\n"
                    "points: [{class: A, method: b, at: method_start}]\n")
    with pytest.raises(TargetError, match="none of the recipe's files is in"):
        patchkit.plan(patchkit.load(str(path)), str(root))


def test_a_symlinked_target_is_patched_at_its_real_place_and_said_so(tree, tmp_path):
    root = tree("verl-0.6")
    real = root / "verl" / "elsewhere.py"  # inside the root: a link out of it is refused (tests/test_hostile_targets.py)
    link = root / DP
    real.write_bytes(link.read_bytes())
    link.unlink()
    link.symlink_to(real)
    original = real.read_bytes()
    [outcome] = patchkit.apply(patchkit.load("verl-fsdp-update"), str(root))
    assert outcome.path == real.resolve() and "through symlink" in outcome.detail
    assert link.is_symlink() and b"patchkit" in real.read_bytes()
    patchkit.revert([], everything=True)
    assert link.is_symlink() and real.read_bytes() == original


# ---------------------------------------------------------------- a script as the target

SCRIPT = "class Tiny:\n    def training_step(self, i):\n        return i * 2\n"


def script_recipe(folder, script="train.py"):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ts.yaml"
    path.write_text(recipe_text(script))
    return patchkit.load(str(path)).recipe.target


def test_a_script_is_found_from_the_recipe_s_folder_or_in_root_with_no_version(tmp_path, monkeypatch):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "train.py").write_text(SCRIPT)
    monkeypatch.chdir("/")
    monkeypatch.setenv("PATCHKIT_ROOT", str(tmp_path / "site-packages"))  # names a site-packages: not for scripts
    installed = locate(script_recipe(tmp_path, "jobs/train.py"))
    assert (installed.root, installed.version, installed.kind) == (tmp_path / "jobs", None, "script")
    other = tmp_path / "copy"
    other.mkdir()
    (other / "train.py").write_text(SCRIPT)
    assert locate(script_recipe(tmp_path, "jobs/train.py"), str(other)).root == other  # --root: the folder holding it
    absolute = locate(script_recipe(tmp_path / "r", str(other / "train.py")))
    assert absolute.root == other


def test_a_missing_script_is_said_at_the_recipe_s_line_with_where_it_looked(tmp_path):
    target = script_recipe(tmp_path)
    with pytest.raises(TargetError) as info:
        locate(target)
    e = info.value
    assert e.message == f"no script train.py: {tmp_path / 'train.py'} is not there (taken from the recipe's folder " \
                        f"{tmp_path})"
    assert (e.where.path, e.where.line) == (str(tmp_path / "ts.yaml"), 4) and "--root DIR" in e.hint
    with pytest.raises(TargetError, match=f"taken from --root {tmp_path / 'x'}"):
        (tmp_path / "x").mkdir()
        locate(target, str(tmp_path / "x"))
    (tmp_path / "train.py").mkdir()
    with pytest.raises(TargetError, match="is not a plain file"):
        locate(target)


def test_a_script_that_is_a_link_out_of_its_folder_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text(SCRIPT)
    recipes = tmp_path / "recipes"
    target = script_recipe(recipes, "jobs/train.py")
    (recipes / "jobs").symlink_to(outside)  # a folder on the way
    with pytest.raises(TargetError, match="outside") as info:
        (outside / "train.py").symlink_to(outside / "secret.py")
        locate(target)
    assert info.value.where.line == 4
    (recipes / "jobs").unlink()
    (recipes / "jobs").mkdir()
    (recipes / "jobs" / "train.py").symlink_to(outside / "secret.py")  # the file itself
    with pytest.raises(TargetError, match="is a symbolic link to .*secret.py, outside"):
        locate(target)
    (recipes / "jobs" / "real.py").write_text(SCRIPT)  # a link inside the folder is the file it names
    (recipes / "jobs" / "train.py").unlink()
    (recipes / "jobs" / "train.py").symlink_to("real.py")
    assert locate(target).root == recipes / "jobs"
