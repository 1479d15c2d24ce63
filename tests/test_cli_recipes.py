"""cli_recipes: what list, show, validate and test say about recipes."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from click.testing import CliRunner

from patchkit.cli.commands import main
from patchkit.core.vocabulary import SETTING
from patchkit.recipe.load import all_recipes

from conftest import RECIPES

PROBE = """\
id: probe
description: d
target: {package: pkg, files: [pkg/core.py]}
backend: torch
points: [{class: Trainer, method: step, at: method_start}]
"""
BEFORE = "class Trainer:\n    def step(self):\n        self.work()\n"
GOOD = BEFORE.replace("        self", '        _patchkit_runtime.step("probe")  # patchkit:probe\n        self')


def run(*args, code=0):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result


def test_list_as_text_and_as_json_name_the_same_recipes():
    text = run("list").stdout.splitlines()
    data = json.loads(run("list", "--json").stdout)
    assert [ln.split()[0] for ln in text] == [r["id"] for r in data] == [s.id for s in all_recipes()]
    for line, r in zip(text, data):
        assert f"{r['distribution']} {r['versions'] or '(any)'}" in line
        assert set(r) == {"id", "description", "package", "distribution", "versions", "files", "backend", "options"}


def test_show_lists_settings_options_and_the_inserted_code():
    out = run("show", "verl-fsdp-update", "granularity=micro").stdout
    assert out.startswith(f"verl-fsdp-update  ({RECIPES / 'verl-fsdp-update.yaml'})\n")
    assert "option granularity = micro  (choices: mini, micro)" in out
    assert "inserted at the top of each patched module:" in out
    assert '_patchkit_runtime.step("verl-fsdp-update")  # patchkit:verl-fsdp-update' in out


def test_validate_says_ok_or_the_problem_for_each_file_and_counts_them(tmp_path):
    good = tmp_path / "probe.yaml"
    good.write_text(PROBE)
    bad = tmp_path / "bad.yaml"
    bad.write_text(PROBE.replace("id: probe", "id: bad").replace("backend: torch", "backend: torch\nbogus: 1"))
    result = run("validate", good, bad, code=1)
    lines = result.stderr.splitlines()
    assert lines[0] == f"ok: {good}"
    assert lines[1].startswith(f"error: {bad}:5:1: ") and "'bogus'" in lines[1]  # the key's own line
    assert lines[-1] == "1 valid, 1 invalid"
    assert run("validate", good).stderr.splitlines()[-1] == "1 valid, 0 invalid"


def test_test_says_pass_or_fail_per_example_and_the_total_on_stdout(tmp_path):
    path = tmp_path / "probe.yaml"
    path.write_text(PROBE + yaml.safe_dump({"examples": [{"name": "holds", "before": BEFORE, "after": GOOD},
                                                         {"name": "does not", "before": BEFORE, "after": BEFORE}]}))
    result = run("test", path, code=1)
    assert result.stdout == "1 passed, 1 failed\n"
    lines = result.stderr.splitlines()
    assert lines[0] == "PASS probe: holds"
    assert lines[1].startswith(f"FAIL {path}:") and lines[1].endswith("probe: does not: the output differs from `after`:")
    assert run("test", "verl-fsdp-update").stdout.endswith(" passed, 0 failed\n")


SETTING_LINE = re.compile(r"^(?:  ([a-z_]+\.[a-z0-9_]+): (.*)|(backend):  (\S+)|option (\w+) = (\S+)  \(choices: .*)$")


def printed_settings(text: str) -> list:
    """Every ``KEY: VALUE`` show printed (settings, the backend, the options), as ``KEY=VALUE`` arguments."""
    found = []
    for line in text.splitlines():
        m = SETTING_LINE.match(line)
        if m:
            key, value = next((m.group(i), m.group(i + 1)) for i in (1, 3, 5) if m.group(i))
            found.append(f"{key}={value}")
    return found


@pytest.mark.parametrize("recipe", [s.id for s in all_recipes()])
def test_every_value_show_prints_is_one_the_command_line_takes_back(recipe):
    """What show prints is what a user copies into KEY=VALUE: each value is read back as the same setting
    (none, not None; true, not True), and the recipe shown with all of them given is the recipe shown."""
    shown = run("show", recipe).stdout
    typed = printed_settings(shown)
    settings = next(s for s in all_recipes() if s.id == recipe)
    every = {SETTING[k].key if k in SETTING else k for k in settings.runtime_settings()}
    every |= {o.name for o in settings.recipe.options}
    assert {t.split("=")[0] for t in typed} == every  # every setting and option, each once
    for one in typed:
        assert run("show", recipe, one).stdout == shown, one
    assert run("show", recipe, *typed).stdout == shown


@pytest.mark.parametrize("schedule, left_out", [
    ("{wait: 2, active: 3}", ""),
    ("{steps: [1, 4]}", "schedule.wait"),
    ("{trigger: manual}", "schedule.steps"),
])
def test_show_prints_the_schedule_keys_in_use_each_typed_back_unchanged(tmp_path, schedule, left_out):
    recipe = tmp_path / "probe.yaml"
    recipe.write_text(PROBE + f"schedule: {schedule}\n")
    shown = run("show", recipe).stdout
    typed = printed_settings(shown)
    assert not left_out or f"{left_out}=" not in " ".join(typed)
    for one in typed:
        assert run("show", recipe, one).stdout == shown, one
    assert run("show", recipe, *typed).stdout == shown


def test_a_value_yaml_would_read_otherwise_is_shown_quoted(tmp_path):
    recipe = tmp_path / "probe.yaml"
    recipe.write_text(PROBE + "profiler: {save_path: 'yes'}\n")
    shown = run("show", recipe).stdout
    assert "  profiler.save_path: 'yes'\n" in shown and "  profiler.gc_detect_threshold: none\n" in shown
    assert run("show", recipe, "profiler.save_path='yes'").stdout == shown
