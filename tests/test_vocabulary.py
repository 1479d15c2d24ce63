"""patchkit.core.vocabulary: one table, and everything that knows the words reads it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from patchkit.runtime import backends
from patchkit.core import model
from patchkit.core import vocabulary
from patchkit.core.errors import OverrideError
from patchkit.recipe.load import load, load_recipe
from patchkit.core.vocabulary import SETTING, SETTINGS, problem


@pytest.mark.parametrize("setting", SETTINGS, ids=[s.key for s in SETTINGS])
def test_each_default_is_a_valid_value_of_its_setting(setting):
    assert setting.section in vocabulary.SECTIONS
    assert problem(setting, setting.default) is None
    if setting.values:
        assert len(set(setting.values)) == len(setting.values)
        assert problem(setting, "no-such-word") is not None


def test_the_model_records_are_the_table_sections_with_its_defaults():
    assert model.Profiler._fields == vocabulary.PROFILER_KEYS
    assert model.Schedule._fields == vocabulary.SCHEDULE_KEYS
    assert model.Profiler()._asdict() == {k: vocabulary.DEFAULTS[k] for k in vocabulary.PROFILER_KEYS}
    assert model.Schedule()._asdict() == {k: vocabulary.DEFAULTS[k] for k in vocabulary.SCHEDULE_KEYS}


def test_the_runtime_settings_are_the_backend_then_the_table_in_its_order():
    s = load("verl-fsdp-update", ["backend=torch", "profiler.level=level2", "schedule.active=4"])
    runtime = s.runtime_settings()
    assert list(runtime) == ["backend", *SETTING] == list(backends.KEYS)
    assert runtime["backend"] == "torch" and runtime["level"] == "level2" and runtime["active"] == 4
    assert backends.validate(runtime) == []


def test_a_recipe_that_says_nothing_gets_the_table_defaults(tmp_path):
    path = tmp_path / "plain.yaml"
    path.write_text("id: plain\ndescription: d\ntarget: {package: pkg, files: [pkg/m.py]}\n"
                    "points: [{class: A, method: run, at: method_start}]\n")
    runtime = load_recipe(path).runtime_settings()
    expected = dict(backends.DEFAULTS, save_path=vocabulary.DEFAULTS["save_path"] + "/plain")
    assert runtime == expected
    assert load_recipe(path).recipe.points[0].action == vocabulary.DEFAULT_ACTION


def _other_value(setting):
    """A value of ``setting`` other than its default, as typed on the command line and as loaded."""
    if setting.kind == vocabulary.WORD:
        word = setting.values[-1]
        return word, word
    if setting.kind == vocabulary.WORDS:
        return f"[{setting.values[-1]}]", (setting.values[-1],)
    if setting.kind == vocabulary.FLAG:
        return ("false", False) if setting.default else ("true", True)
    return {vocabulary.COUNT: (str(setting.minimum + 2), setting.minimum + 2),
            vocabulary.PATH: ("./elsewhere", "./elsewhere"), vocabulary.RANKS: ("[2, 0]", (0, 2)),
            vocabulary.STEPS: ("[5, 1]", (1, 5)), vocabulary.THRESHOLD: ("2.5", 2.5)}[setting.kind]


@pytest.mark.parametrize("setting", SETTINGS, ids=[s.key for s in SETTINGS])
def test_every_setting_of_the_table_is_an_override_key(setting):
    typed, loaded = _other_value(setting)
    assert loaded != setting.default
    recipe = "vllm-decode" if setting.name == "replicas" else "verl-fsdp-update"  # replicas: rollout workers only
    s = load(recipe, [f"{setting.key}={typed}", "backend=torch"])
    assert s.runtime_settings()[setting.name] == loaded


def test_an_unknown_override_lists_exactly_the_table_keys_and_options():
    with pytest.raises(OverrideError) as info:
        load("verl-fsdp-update", ["schedule.wiat=2"])
    listed, also = info.value.hint.split("valid keys: ")[1].split("; also read: ")
    assert listed.split(", ") == ["backend", *(s.key for s in SETTINGS if s.section == "profiler"),
                                  *(s.key for s in SETTINGS if s.section == "schedule"), "granularity"]
    assert "profiler.profile_level" in also.split(", ")  # other tools' names (patchkit.core.spellings)
    assert "did you mean schedule.wait=2?" in info.value.hint


def test_every_kind_of_point_allows_only_actions_of_the_table():
    from patchkit.engine import points

    assert vocabulary.DEFAULT_ACTION in vocabulary.ACTIONS
    for kind in points.KINDS.values():
        assert kind.actions and set(kind.actions) <= set(vocabulary.ACTIONS), kind.name


def test_importing_it_imports_only_the_standard_library():
    check = ("import sys, patchkit; before = set(sys.modules); import patchkit.core.vocabulary; "
             "new = set(sys.modules) - before; "
             "ours = {m for m in new if m.startswith('patchkit')}; "
             "assert ours == {'patchkit.core', 'patchkit.core.vocabulary'}, ours; "
             "assert all(m.partition('.')[0] in sys.stdlib_module_names for m in new - ours), new")
    subprocess.run([sys.executable, "-c", check], check=True)


def test_a_save_path_that_is_not_utf8_is_refused_in_a_recipe_and_in_the_job(tmp_path, clean_runtime, capsys):
    """A lone surrogate (bytes that were not UTF-8, as os.fsdecode hands them on) is a problem of the setting:
    a recipe's ``"\\uDCFF"`` is refused at its place (by the YAML reader already), and the job, handed one by its
    own configure(), says one line, creates no folder and runs on."""
    from patchkit.core.errors import RecipeError

    assert problem(SETTING["save_path"], "/tmp/out-\udcff") == \
        "profiler.save_path is not valid UTF-8: '/tmp/out-\\udcff'"
    path = tmp_path / "odd.yaml"
    path.write_text('id: odd\ndescription: d\ntarget: {package: pkg, files: [pkg/m.py]}\n'
                    'points: [{class: A, method: run, at: method_start}]\nprofiler:\n  save_path: "/tmp/out-\\uDCFF"\n')
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert info.value.render().startswith(f"{path}:6:")
    out = tmp_path / "out-\udcff"
    clean_runtime.configure("m", backend="torch", save_path=str(out), wait=0, warmup=0, active=1)
    for _ in range(3):
        clean_runtime.step("m")
    said = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("[patchkit]")]
    assert len(said) == 1 and "profiler.save_path is not valid UTF-8" in said[0], said
    assert not out.exists()
