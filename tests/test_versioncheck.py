"""versioncheck: the range a recipe is proven on informs, the structure decides.

A version past the range is patched when every point fits, with one note; an older one, one the recipe excludes,
and (strict) anything outside the range are refused; code with no version is patched.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import patchkit
from patchkit.cli.commands import main
from patchkit.core.errors import TargetError
from patchkit.core.model import Target
from patchkit.state.targets import Installed
from patchkit.state.versioncheck import STRICT_ENV, check_version

from conftest import RECIPES, snapshot

DP = "verl/workers/actor/dp_actor.py"
LEGACY = Target("verl", "verl", ">=0.4,<=0.7.1", (DP,), instead="verl-engine-update")


def installed(version, **kw) -> Installed:
    return Installed(Path("/site"), Path("/site/verl"), version, "verl metadata in /site", **kw)


@pytest.fixture(autouse=True)
def not_strict(monkeypatch):
    monkeypatch.delenv(STRICT_ENV, raising=False)


def run(*args, code=0, env=None):
    result = CliRunner().invoke(main, [str(a) for a in args], env=env)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result


def release(tree, version: str) -> Path:
    """verl 0.6's files, declared as ``version`` by their metadata."""
    root = tree("verl-0.6")
    info = next(root.glob("*.dist-info"))
    meta = info / "METADATA"
    meta.write_text(meta.read_text().replace("Version: 0.6.1", f"Version: {version}"))
    info.rename(root / f"verl-{version}.dist-info")
    return root


# ---------------------------------------------------------------- the verdicts

@pytest.mark.parametrize("version", ["0.4.0", "0.7.1", "0.7.1rc1", "0.5.0.dev3", "0.7.1+cpu"])
def test_a_version_in_the_proven_range_is_patched_with_nothing_to_say(version):
    assert check_version(installed(version), LEGACY, "r") == ""


@pytest.mark.parametrize("version", ["0.7.2", "0.8.0", "0.8.0rc1", "0.8.0.dev0", "1.0", "0.7.1.post1"])
def test_a_version_past_the_range_is_patched_with_a_note_naming_it_and_the_newest_proven(version):
    note = check_version(installed(version), LEGACY, "r")
    assert note == (f"verl {version} is newer than the releases r is proven on (>=0.4,<=0.7.1, newest 0.7.1): its "
                    "places were found by their structure; review them with `patchkit diff` (--strict-versions "
                    "refuses such versions)")


@pytest.mark.parametrize("version", ["0.3.1", "0.3.0rc1", "0.3.9.post2"])
def test_a_version_older_than_the_range_is_refused_with_the_recipes_that_take_it(version):
    with pytest.raises(TargetError) as info:
        check_version(installed(version), LEGACY, "r")
    assert f"verl {version} is installed" in info.value.message and "r is proven on verl >=0.4,<=0.7.1" in info.value.message
    assert "--skip-version-check" in info.value.hint


def test_strict_refuses_a_version_past_the_range_and_names_the_recipe_to_use(monkeypatch):
    with pytest.raises(TargetError) as info:
        check_version(installed("0.9.1"), LEGACY, "r", strict=True)
    assert "only releases it is proven on are patched (--strict-versions or PATCHKIT_STRICT_VERSIONS)" in info.value.message
    assert "use verl-engine-update (verl >=0.6,<=0.9.1) for this version" in info.value.hint
    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(TargetError):
        check_version(installed("0.9.1"), LEGACY, "r")
    monkeypatch.setenv(STRICT_ENV, "off")
    assert check_version(installed("0.9.1"), LEGACY, "r")
    assert check_version(installed("0.7.0"), LEGACY, "r", strict=True) == ""  # proven: strict has nothing to refuse


def test_a_strict_setting_that_is_neither_on_nor_off_is_an_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv(STRICT_ENV, "maybe")
    with pytest.raises(TargetError) as info:
        check_version(installed("0.7.0"), LEGACY, "r")
    assert "PATCHKIT_STRICT_VERSIONS='maybe' is neither on nor off" in info.value.message


def test_an_excluded_release_is_refused_with_the_recipes_reason_whatever_the_range():
    target = LEGACY._replace(excluded="==0.5.0,>=0.5.0rc1", excluded_reason="0.5.0 calls the step before the loss")
    with pytest.raises(TargetError) as info:
        check_version(installed("0.5.0"), target, "r")
    assert info.value.message == ("r excludes verl ==0.5.0,>=0.5.0rc1 and verl 0.5.0 is installed (verl metadata in "
                                  "/site): 0.5.0 calls the step before the loss")
    with pytest.raises(TargetError):  # strict or not, and with no reason given
        check_version(installed("0.5.0rc2"), target._replace(excluded_reason=""), "r", strict=False)
    assert check_version(installed("0.5.1"), target, "r") == ""


@pytest.mark.parametrize("version", [None, "main", "unknown", ""])
def test_code_with_no_version_is_patched_with_a_note_and_refused_when_strict(version):
    note = check_version(installed(version), LEGACY, "r")
    assert "r is proven on verl >=0.4,<=0.7.1, newest 0.7.1: its places were found by their structure" in note
    if version is None:
        assert note.startswith("cannot tell which version of verl is in /site")
    else:
        assert note.startswith(f"verl declares the version {version!r} (verl metadata in /site), which is not a PEP 440")
    with pytest.raises(TargetError) as info:
        check_version(installed(version), LEGACY, "r", strict=True)
    assert "only releases it is proven on are patched" in info.value.message


def test_a_recipe_with_no_range_patches_any_version_and_says_nothing():
    anything = Target("mine", "mine", "", ("mine/a.py",))
    for version in (None, "main", "0.1", "99"):
        assert check_version(installed(version), anything, "r", strict=True) == ""


def test_a_checkout_known_only_from_below_may_be_past_the_range():
    note = check_version(installed("0.6.0", at_least=True, kind="forked"), LEGACY, "r")
    assert note.startswith("verl 0.6.0 or later may be past the releases r is proven on")
    with pytest.raises(TargetError):
        check_version(installed("0.3.0", at_least=True, kind="forked"), LEGACY, "r")


# ---------------------------------------------------------------- through the command line

def test_diff_past_the_range_is_the_skipped_checks_diff_with_one_note(tree):
    root = release(tree, "0.9.0rc1")
    before = snapshot(root)
    proven = run("diff", "verl-fsdp-update", "--root", root, "--strict-versions", "--skip-version-check")
    result = run("diff", "verl-fsdp-update", "--root", root)
    assert result.stdout == proven.stdout and "+++ b/verl/workers/actor/dp_actor.py" in result.stdout
    assert result.stderr.count("note: verl 0.9.0rc1 is newer than the releases verl-fsdp-update is proven on") == 1
    strict = run("diff", "verl-fsdp-update", "--root", root, code=1, env={STRICT_ENV: "1"})
    assert "only releases it is proven on are patched" in strict.stderr and not strict.stdout
    assert snapshot(root) == before


def test_every_command_that_checks_a_version_says_the_note(tree):
    root = release(tree, "0.8.0.dev0")
    said = "verl 0.8.0.dev0 is newer than the releases verl-fsdp-update is proven on"
    assert said in run("show", "verl-fsdp-update", "--root", root).stdout
    printed = run("run", "verl-fsdp-update", "--root", root, "--print-env")
    assert said in printed.stderr and json.loads(printed.stdout)["env_vars"]["PATCHKIT_RUN"]
    applied = run("apply", "verl-fsdp-update", "--root", root, "--json")
    report = json.loads(applied.stdout)
    assert said in report["version_note"] and report["version"] == "0.8.0.dev0"
    assert [f["outcome"] for f in report["files"]] == ["patched"] and applied.stderr.count(said) == 1
    run("revert", "verl-fsdp-update")
    assert patchkit.plan_recipe("verl-fsdp-update", root=str(root)).version_note.startswith(said)
    with pytest.raises(TargetError):
        patchkit.plan_recipe("verl-fsdp-update", root=str(root), strict_versions=True)


def test_a_recipe_that_excludes_the_installed_release_refuses_it_and_changes_nothing(tree, tmp_path):
    root = tree("verl-0.6")
    mine = tmp_path / "verl-fsdp-update.yaml"
    mine.write_text((RECIPES / "verl-fsdp-update.yaml").read_text().replace(
        '  versions: ">=0.3,<=0.7.1"',
        '  versions: ">=0.3,<=0.7.1"\n  excluded: {versions: "==0.6.1", reason: "0.6.1 steps inside the loss"}'))
    before = snapshot(root)
    for command in ("diff", "apply", "show"):
        result = run(command, mine, "--root", root, code=1 if command != "show" else 0)
        assert "verl-fsdp-update excludes verl ==0.6.1 and verl 0.6.1 is installed" in result.output
        assert "0.6.1 steps inside the loss" in result.output
    assert snapshot(root) == before


@pytest.mark.parametrize("text,line,col,words", [
    ('  excluded: "=>0.6"\n', 12, 13, "not a PEP 440 version specifier: '=>0.6'"),
    ('  excluded: {versions: "==0.6.1"}\n', 12, 13, "missing the required key 'reason'"),
    ('  excluded: {versions: "<0.6.1.dev0", reason: r}\n', 12, 24, "not a PEP 440 version specifier"),
    ('  excluded: {versions: "==0.6.1", reason: r, when: x}\n', 12, 46, "unknown key 'when' in target.excluded"),
])
def test_a_bad_excluded_is_an_error_at_its_line_and_column(tmp_path, text, line, col, words):
    mine = tmp_path / "verl-fsdp-update.yaml"
    mine.write_text((RECIPES / "verl-fsdp-update.yaml").read_text().replace(
        "  instead: verl-engine-update", text.rstrip("\n") + "\n  instead: verl-engine-update"))
    result = run("validate", mine, code=1)
    assert f"{mine}:{line}:{col}: " in result.stderr and words in result.stderr, result.stderr


def test_the_newest_release_of_a_package_without_the_recipes_files_names_the_recipe_for_it(tree):
    root = tree("verl-0.9")
    result = run("diff", "verl-fsdp-update", "--root", root, code=1)
    assert "none of the recipe's files is in" in result.stderr
    assert "use verl-engine-update (verl >=0.6,<=0.9.1) for this version" in result.stderr
    engine = run("diff", "verl-engine-update", "--root", root)
    assert "verl-fsdp-update" not in engine.stderr  # no note or hint sends the user back


def test_new_on_code_with_no_metadata_writes_a_recipe_without_a_range_that_tests_and_applies(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(Path(__file__).resolve().parent / "own_code" / "installed" / "tinytrain", src / "tinytrain")
    out = tmp_path / "mine.yaml"
    run("new", "mine", "--point", "tinytrain.loop:Trainer.fit at: method_start action: start", "--root", src,
        "-o", out)
    text = out.read_text()
    assert "  versions:" not in text and "# no versions: tinytrain has no version here" in text
    run("test", out)
    before = snapshot(src)
    applied = run("apply", out, "--root", src)
    assert "patched:" in applied.stderr and "note:" not in applied.stderr.split("traces go to")[0]
    run("revert", "mine")
    assert snapshot(src) == before


@pytest.mark.parametrize("declared", ["unknown", "main"])
def test_installed_metadata_with_a_version_that_is_not_pep_440_is_no_version_with_a_note(tree, declared):
    root = release(tree, declared)
    result = run("diff", "verl-fsdp-update", "--root", root)
    assert f"note: verl declares the version {declared!r} (verl metadata in" in result.stderr
    assert "which is not a PEP 440 version: read as no version" in result.stderr and "+++ b/" in result.stdout
