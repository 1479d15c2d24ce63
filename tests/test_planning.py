"""planning: the files a recipe patches here, and each one's transform, read and never written."""

from __future__ import annotations

import pytest

from patchkit.state import planning
from patchkit.core.errors import AnchorError, TargetError
from patchkit.core.model import AlreadyApplied, Applied
from patchkit.recipe.load import load, load_recipe

from conftest import RECIPES, snapshot

DP = "verl/workers/actor/dp_actor.py"


def test_a_plan_reads_transforms_and_writes_nothing(tree):
    root = tree("verl-0.6")
    before = snapshot(root)
    p = planning.plan(load("verl-fsdp-update"), str(root))
    assert snapshot(root) == before
    [f] = p.files
    assert (f.relpath, f.path, f.changes, f.via, f.work_tree, f.tracked) == (DP, (root / DP).resolve(), True, "", None, False)
    assert isinstance(f.result, Applied) and f.data == (root / DP).read_bytes() and f.encoding == "utf-8"
    assert f.new_bytes() == f.result.text.encode("utf-8")
    assert f.diffpath == DP  # outside git: from the root, as `patch -p1` there takes it
    assert p.diff() == f.diff() and f.diff().startswith(f"--- a/{DP}\n+++ b/{DP}\n")
    assert p.patch_bases() == [root]
    assert (p.installed.root, p.installed.version, p.version_skipped) == (root.resolve(), "0.6.1", "")


def test_a_file_already_patched_plans_no_change_and_an_empty_diff(tree):
    root = tree("verl-0.6")
    first = planning.plan(load("verl-fsdp-update"), str(root)).files[0]
    (root / DP).write_bytes(first.new_bytes())
    [again] = planning.plan(load("verl-fsdp-update"), str(root)).files
    assert isinstance(again.result, AlreadyApplied) and not again.changes
    assert again.diff() == ""
    assert planning.plan(load("verl-fsdp-update"), str(root)).patch_bases() == []


def test_the_first_candidate_where_every_point_resolves_is_picked(tree):
    """vllm-ascend 0.11 ships worker_v1.py only; the recipe lists it before worker.py."""
    root = tree("vllm-ascend-0.11")
    [f] = planning.plan(load("vllm-ascend-decode"), str(root)).files
    assert f.relpath == "vllm_ascend/worker/worker_v1.py"
    installed, paths = planning.files_to_patch(load("vllm-ascend-decode"), str(root))
    assert paths == [(root / f.relpath).resolve()] and installed.version == "0.11.0"


def test_a_recipe_whose_candidates_are_all_missing_names_them_and_the_version(tree):
    root = tree("verl-0.6")
    (root / DP).unlink()
    with pytest.raises(TargetError) as exc:
        planning.plan(load("verl-fsdp-update"), str(root))
    assert f"none of the recipe's files is in {root.resolve()}: {DP}" in exc.value.message
    assert exc.value.hint == "is verl 0.6.1 the package this recipe is for?"


def test_a_candidate_of_another_shape_is_refused_with_its_line_and_the_range(tree):
    root = tree("verl-0.6")
    (root / DP).write_text((root / DP).read_text().replace("self._optimizer_step()", "self._optimizer_stepped()"))
    with pytest.raises(AnchorError) as exc:
        planning.plan(load("verl-fsdp-update"), str(root))
    assert "no statement calling self._optimizer_step" in exc.value.message
    assert "(verl 0.6.1; verl-fsdp-update is proven on >=0.3,<=0.7.1)" in exc.value.message
    assert exc.value.where.path == str((root / DP).resolve()) and exc.value.where.line


def test_skip_version_check_keeps_the_refusal_it_let_through(tree, tmp_path):
    root = tree("verl-0.6")
    mine = tmp_path / "mine" / "verl-fsdp-update.yaml"
    mine.parent.mkdir()
    mine.write_text((RECIPES / "verl-fsdp-update.yaml").read_text().replace('">=0.3,<=0.7.1"', '">=0.7,<0.8"'))
    with pytest.raises(TargetError):
        planning.plan(load_recipe(mine), str(root))
    p = planning.plan(load_recipe(mine), str(root), skip_version_check=True)
    assert p.files[0].changes
    assert p.version_skipped.startswith("verl 0.6.1 is installed") and ">=0.7,<0.8" in p.version_skipped


def test_a_plan_that_fails_after_a_skipped_check_says_what_the_check_let_through(tree, tmp_path):
    root = tree("verl-0.6")
    (root / DP).write_text((root / DP).read_text().replace("self._optimizer_step()", "self._optimizer_stepped()"))
    mine = tmp_path / "mine" / "verl-fsdp-update.yaml"
    mine.parent.mkdir()
    mine.write_text((RECIPES / "verl-fsdp-update.yaml").read_text().replace('">=0.3,<=0.7.1"', '">=0.7,<0.8"'))
    with pytest.raises(AnchorError) as exc:
        planning.plan(load_recipe(mine), str(root), skip_version_check=True)
    [said] = exc.value.warnings
    assert said.startswith("version check skipped (--skip-version-check): verl 0.6.1 is installed")
    with pytest.raises(AnchorError) as exc:  # in range: nothing was let through, nothing to say
        planning.plan(load("verl-fsdp-update"), str(root), skip_version_check=True)
    assert exc.value.warnings == []


def test_a_symlinked_file_is_planned_at_its_real_place_inside_the_root_and_refused_outside_it(tree, tmp_path):
    root = tree("verl-0.6")
    real = root / "verl" / "workers" / "actor" / "dp_actor_impl.py"
    (root / DP).rename(real)
    (root / DP).symlink_to(real)
    [f] = planning.plan(load("verl-fsdp-update"), str(root)).files
    assert f.path == real.resolve() and f.via == f"through symlink {root / DP}"
    outside = tmp_path / "system" / "verl" / "workers" / "actor"
    outside.mkdir(parents=True)
    real.rename(outside / "dp_actor.py")
    (root / DP).unlink()
    (root / DP).symlink_to(outside / "dp_actor.py")
    with pytest.raises(TargetError) as info:
        planning.plan(load("verl-fsdp-update"), str(root))
    assert f"is reached through a symbolic link to {(outside / 'dp_actor.py').resolve()}, outside" in info.value.message
    assert f"--root {(tmp_path / 'system').resolve()}" in info.value.hint


def test_files_to_patch_reads_no_target_when_the_version_is_refused(tree, monkeypatch):
    root = tree("verl-0.9")

    def no_reading(*args, **kwargs):
        raise AssertionError("a target file was read")

    monkeypatch.setattr(planning, "_file_plan", no_reading)
    with pytest.raises(TargetError, match="verl 0.9.1 is installed"):
        planning.files_to_patch(load("verl-fsdp-update"), str(root), strict_versions=True)
    with pytest.raises(TargetError, match="none of the recipe's files"):  # past the range: the files decide
        planning.files_to_patch(load("verl-fsdp-update"), str(root))


@pytest.mark.parametrize("package,expected", [("click", "click"), ("yaml", "pyyaml"), ("git", "gitpython"),
                                              ("patchkit", "patchkit-profiler"), ("verl", None)])
def test_own_dependency_names_patchkits_own_distributions(tmp_path, package, expected):
    recipe = tmp_path / "probe.yaml"
    recipe.write_text(f"id: probe\ndescription: d\ntarget: {{package: {package}, files: [{package}/a.py]}}\n"
                      "backend: torch\npoints: [{class: A, method: m, at: method_start}]\n")
    assert planning.own_dependency(load_recipe(recipe)) == expected


def test_every_dependency_of_patchkit_counts_as_its_own():
    """Patching any of them would make patchkit profile itself: the warning must know them all."""
    import re

    from conftest import REPO
    from patchkit.state.planning import OWN_DEPENDENCIES

    text = (REPO / "pyproject.toml").read_text()
    block = text[text.index("dependencies = ["):]
    block = block[: block.index("]")]
    required = {re.match(r"[A-Za-z0-9_.-]+", item).group(0).lower() for item in re.findall(r'"([^"]+)"', block)}
    assert required <= set(OWN_DEPENDENCIES.values())


# ---------------------------------------------------------------- a line of the user's own that ends in the marker

def _with_user_line(root, line: str, after: int = 10) -> int:
    lines = (root / DP).read_text().splitlines(keepends=True)
    lines.insert(after, line + "\n")
    (root / DP).write_text("".join(lines))
    return after + 1


@pytest.mark.parametrize("marker", ["verl-fsdp-update", "someone-else"])
def test_a_user_line_ending_in_the_marker_is_refused_before_apply_with_its_place(tree, patchkit_home, marker):
    from pathlib import Path

    from click.testing import CliRunner

    from patchkit.cli.commands import main

    root = tree("verl-0.6")
    number = _with_user_line(root, f"USER_FLAG = 1  # patchkit:{marker}")
    before = snapshot(root)
    for command in ("apply", "diff"):
        result = CliRunner().invoke(main, [command, "verl-fsdp-update", "--root", str(root)])
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert (f"error: {(root / DP).resolve()}:{number}:16: this line ends in `# patchkit:{marker}`, patchkit's marker "
                "for its own lines, but patchkit did not write it") in result.stderr, result.stderr
        assert "revert could not give it back" in result.stderr
        assert "hint: remove that comment or change it" in result.stderr
    assert snapshot(root) == before
    assert [p.name for p in Path(patchkit_home).iterdir() if p.name != "lock"] == []  # no ledger, no backup
    with pytest.raises(AnchorError):
        planning.plan(load("verl-fsdp-update"), str(root))


def test_once_the_comment_is_changed_apply_and_revert_give_the_line_back(tree):
    from click.testing import CliRunner

    from patchkit.cli.commands import main

    root = tree("verl-0.6")
    _with_user_line(root, "USER_FLAG = 1  # patchkit verl-fsdp-update")
    before = snapshot(root)
    assert CliRunner().invoke(main, ["apply", "verl-fsdp-update", "--root", str(root)]).exit_code == 0
    assert CliRunner().invoke(main, ["apply", "verl-fsdp-update", "--root", str(root)]).exit_code == 0  # its own lines
    assert CliRunner().invoke(main, ["revert", "verl-fsdp-update", "--root", str(root)]).exit_code == 0
    assert snapshot(root) == before


def test_a_file_patched_by_another_recipe_still_plans(tree):
    root = tree("verl-0.6")
    first = planning.plan(load("verl-fsdp-update"), str(root)).files[0]
    (root / DP).write_bytes(first.new_bytes())
    [again] = planning.plan(load("verl-fsdp-logprob"), str(root)).files
    assert again.changes


def _older(tree, version="0.1.5"):
    """fixtures/verl-0.6 whose metadata says an older release than verl-fsdp-update's range."""
    root = tree("verl-0.6")
    (meta,) = root.glob("*.dist-info/METADATA")
    meta.write_text(meta.read_text().replace("Version: 0.6.1", "Version: " + version))
    return root


def test_a_release_older_than_the_range_is_refused_naming_what_its_structure_gives(tree):
    """Not the version alone: the point that does not resolve there, or that every point does (and where to look)."""
    root = _older(tree)
    before = snapshot(root)
    with pytest.raises(TargetError) as exc:
        planning.plan(load("verl-fsdp-update"), str(root))
    assert exc.value.message.startswith("verl 0.1.5 is installed") and "nor does its structure fit" not in exc.value.message
    assert exc.value.hint.endswith("every point of verl-fsdp-update resolves in this release's files, but they are not "
                                   "proven to be the same places: review `patchkit diff verl-fsdp-update "
                                   "--skip-version-check`")
    assert snapshot(root) == before
    (root / DP).write_text((root / DP).read_text().replace("self._optimizer_step()", "self._optimizer_stepped()"))
    before = snapshot(root)
    with pytest.raises(TargetError) as exc:
        planning.plan(load("verl-fsdp-update"), str(root))
    message = exc.value.message
    assert message.startswith("verl 0.1.5 is installed") and "is proven on verl >=" in message
    assert f"; nor does its structure fit: {(root / DP).resolve()}:" in message
    assert "no statement calling self._optimizer_step" in message and message.count("is proven on") == 1
    assert "resolves in this release's files" not in exc.value.hint
    assert snapshot(root) == before
    with pytest.raises(AnchorError):  # the check skipped: the structure's own error, as before
        planning.plan(load("verl-fsdp-update"), str(root), skip_version_check=True)
    (root / DP).unlink()
    with pytest.raises(TargetError) as exc:  # no file: said once, without the recipe's own path as a place
        planning.plan(load("verl-fsdp-update"), str(root))
    assert exc.value.message.endswith(f"; nor does its structure fit: none of the recipe's files is in {root.resolve()}: "
                                      f"{DP}")


def test_only_an_older_release_is_tried_for_its_structure(tree):
    """Newer than the range and strict, or no version: refused as before, nothing said of the structure."""
    root = _older(tree, "0.99.0")
    with pytest.raises(TargetError) as exc:
        planning.plan(load("verl-fsdp-update"), str(root), strict_versions=True)
    assert "resolves in this release's files" not in exc.value.hint and "structure fit" not in exc.value.message
