"""recipe_files: a RECIPE argument and its file, read with bounds; any path gives a located error, never an OSError."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchkit.cli.commands import main
from patchkit.core.errors import RecipeError
from patchkit.recipe.files import MAX_BYTES, read_text, recipe_path, shown

from conftest import RECIPES, snapshot

LONG = "a" * 300 + ".yaml"  # the 300-character recipe file name


def test_shown_keeps_short_paths_and_shortens_long_ones():
    assert shown("r.yaml") == "r.yaml"
    long = shown("/x/" + LONG)
    assert len(long) <= 80 and long.startswith("/x/aaa") and long.endswith("a.yaml") and "..." in long


@pytest.mark.parametrize("command", ["validate", "show", "diff", "apply"])
def test_a_300_character_file_name_is_a_located_error_and_nothing_is_written(tmp_path, tree, patchkit_home, command):
    root = tree("verl-0.6")
    before = snapshot(root)
    path = tmp_path / LONG
    args = [command, str(path)] + (["--root", str(root)] if command in ("diff", "apply") else [])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "Errno" not in result.output
    assert "cannot read recipe: the path is too long" in result.output
    assert "hint: a file name has at most 255 bytes" in result.output
    assert "a" * 100 not in result.output  # the path is shortened for display
    assert snapshot(root) == before
    assert list(Path(patchkit_home).iterdir()) == []


def test_a_300_character_built_in_id_is_no_built_in_recipe():
    result = CliRunner().invoke(main, ["show", "a" * 300])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "no built-in recipe 'aaaa" in result.output and "a" * 100 not in result.output
    with pytest.raises(RecipeError, match="no built-in recipe 'Verl"):
        recipe_path("Verl-fsdp-update")  # not an id: not looked up as a file name


def test_a_built_in_id_and_a_path_are_found():
    found = recipe_path("verl-fsdp-update")
    assert found.name == "verl-fsdp-update.yaml" and found.read_bytes() == (RECIPES / found.name).read_bytes()
    path = RECIPES / "verl-fsdp-update.yaml"
    assert recipe_path(str(path)) == path
    with pytest.raises(RecipeError, match="no recipe file"):
        recipe_path(str(RECIPES / "nothing-here.yaml"))


def test_a_folder_is_said_to_be_a_folder(tmp_path):
    folder = tmp_path / "r.yaml"
    folder.mkdir()
    with pytest.raises(RecipeError) as info:
        read_text(folder)
    assert "it is a folder" in info.value.message and info.value.where.path == str(folder)


def test_a_file_over_the_bound_is_refused_without_reading_it_all(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * MAX_BYTES + b"\n")
    with pytest.raises(RecipeError) as info:
        read_text(big)
    assert f"larger than {MAX_BYTES} bytes" in info.value.message and "split" in info.value.hint
    big.write_bytes(b"id: big\n" + b"#" * (MAX_BYTES - 9) + b"\n")
    assert read_text(big).startswith("id: big\n")  # exactly the bound is fine


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_an_endless_file_is_refused_at_the_bound():
    result = CliRunner().invoke(main, ["validate", "/dev/zero"])
    assert result.exit_code == 1 and f"larger than {MAX_BYTES} bytes" in result.output


def test_nul_bytes_and_bad_utf8_keep_their_errors(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_bytes(b"id: r\x00\n")
    with pytest.raises(RecipeError, match="NUL bytes"):
        read_text(path)
    path.write_bytes(b"id: r\nnotes: [caf\xe9]\n")
    with pytest.raises(RecipeError) as info:
        read_text(path)
    assert info.value.message == "not UTF-8 text" and info.value.where.line == 2
