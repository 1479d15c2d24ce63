"""overrides: KEY=VALUE applied to a recipe's data before validation; the original data never changes."""

from __future__ import annotations

import pytest

from patchkit.core.errors import OverrideError
from patchkit.recipe.overrides import apply_overrides

DATA = {"id": "r", "schedule": {"wait": 1}, "profiler": {"level": "level0"}}
OPTIONS = {"granularity": {"choices": ["mini", "micro"], "default": "mini"}}


def test_sections_backend_and_options_are_set_and_remembered_as_typed():
    data, overridden, chosen = apply_overrides(
        DATA, ["schedule.active=3", "backend=npu", "granularity=micro", "profiler.mstx=true"], OPTIONS)
    assert data["schedule"] == {"wait": 1, "active": 3} and data["backend"] == "npu"
    assert data["profiler"] == {"level": "level0", "mstx": True}
    assert chosen == {"granularity": "micro"}
    assert overridden == {("schedule", "active"): "schedule.active=3", ("backend",): "backend=npu",
                          ("profiler", "mstx"): "profiler.mstx=true"}
    assert DATA == {"id": "r", "schedule": {"wait": 1}, "profiler": {"level": "level0"}}


def test_other_tools_key_names_are_taken_as_typed_for_the_loader_to_read():
    """verl's tool_config.npu.KEY is profiler.KEY; other names stay as written (patchkit.recipe.respell reads
    them), and a name no table knows is refused with the nearest."""
    data, overridden, _ = apply_overrides(
        DATA, ["profiler.tool_config.npu.level=ProfilerLevel.Level1", "profiler.profile_with_memory=true"], OPTIONS)
    assert data["profiler"] == {"level": "ProfilerLevel.Level1", "profile_with_memory": True}
    assert overridden == {("profiler", "level"): "profiler.tool_config.npu.level=ProfilerLevel.Level1",
                          ("profiler", "profile_with_memory"): "profiler.profile_with_memory=true"}
    with pytest.raises(OverrideError) as info:
        apply_overrides(DATA, ["schedule.profile_level=level1"], OPTIONS)  # other names are profiler keys only
    assert "did you mean profiler.profile_level=level1?" in info.value.hint


def test_values_are_yaml_and_options_take_words():
    data, _, chosen = apply_overrides({}, ["profiler.ranks=[0, 2]", "profiler.save_path=", "granularity=True"],
                                      OPTIONS)
    assert data["profiler"] == {"ranks": [0, 2], "save_path": ""}
    assert chosen == {"granularity": "true"}


@pytest.mark.parametrize("text,fragment,hint", [
    ("schedule.active", "is not KEY=VALUE", "schedule.active=3"),
    ("=3", "is not KEY=VALUE", "granularity=micro"),
    ("schedule.active=[1", "the value is not valid YAML", "quote it"),
    ("wait=2", "unknown override key 'wait'", "did you mean schedule.wait=2?"),
    ("schedule.level=level1", "unknown override key 'schedule.level'", "profiler.level=level1"),
    ("profiler.activ=2", "unknown override key", "valid keys: backend, "),
])
def test_bad_overrides_name_the_command_line_and_say_what_was_meant(text, fragment, hint):
    with pytest.raises(OverrideError) as info:
        apply_overrides(DATA, [text], OPTIONS)
    assert fragment in str(info.value) and info.value.where.path == "<command line>"
    assert hint in info.value.hint


def test_a_key_like_no_other_gets_the_list_without_a_guess():
    with pytest.raises(OverrideError) as info:
        apply_overrides(DATA, ["zzzz=1"], OPTIONS)
    assert "did you mean" not in info.value.hint and "granularity" in info.value.hint


@pytest.mark.parametrize("text,fragment", [
    ("schedule.wait=" + "9" * 5000, "is too large: patchkit reads whole numbers of at most 18 digits"),
    ("granularity=" + "9" * 5000, "is too large"),  # an option's value is read as YAML too
    ("profiler.ranks=[0, " + "9" * 5000 + "]", "is too large"),
    ("profiler.save_path=.inf", "'.inf' is not a finite number"),
    ("profiler.contents=" + "[" * 3000 + "]" * 3000, "nested too deeply"),
    ("profiler.contents=[&a [x, x, x, x, x, x, x, x, x, x], " + ", ".join(["*a"] * 20_000) + "]",
     "aliases expand the document too far"),
])
def test_values_past_a_recipe_s_bounds_are_command_line_errors(text, fragment):
    with pytest.raises(OverrideError) as info:
        apply_overrides(DATA, [text], OPTIONS)
    assert fragment in info.value.message and info.value.where.path == "<command line>" and info.value.hint
    assert len(info.value.message) < 300  # the override is shortened, not echoed whole


def test_a_huge_key_is_not_echoed_whole():
    with pytest.raises(OverrideError) as info:
        apply_overrides(DATA, ["k" * 100_000 + "=1"], OPTIONS)
    assert "unknown override key 'kkkk" in info.value.message and len(info.value.message) < 200


# a save_path whose bytes are not UTF-8: a name as os.fsdecode hands it over from argv or the environment
NOT_UTF8 = "/tmp/out-\udcff\udcfe"


@pytest.mark.parametrize("command", [["show"], ["diff"], ["apply"], ["run", "--print-env"]])
def test_a_save_path_that_is_not_utf8_is_an_error_at_its_key_not_a_traceback(tree, command):
    from click.testing import CliRunner

    from patchkit.cli.commands import main

    from conftest import snapshot

    root = tree("verl-0.6")
    before = snapshot(root)
    args = [command[0], "verl-fsdp-update", *command[1:], f"profiler.save_path={NOT_UTF8}"]
    if command[0] != "show":
        args += ["--root", str(root)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "error: <command line>: profiler.save_path=/tmp/out-\\udcff\\udcfe: the value is not valid UTF-8" \
        in result.stderr
    assert "hint: " in result.stderr and snapshot(root) == before


def test_a_value_that_is_not_utf8_is_refused_for_any_key():
    with pytest.raises(OverrideError) as info:
        apply_overrides(DATA, ["profiler.level=level\udcff"], OPTIONS)
    assert info.value.render().startswith("<command line>: profiler.level=level\\udcff: the value is not valid UTF-8")
