"""Hostile recipes and overrides (issue 21): huge numbers, huge names, huge documents, empty values.

Each is refused by `patchkit validate` / `show` with exit 1, `file:line:col`
(or `<command line>`), a hint, no traceback, and nothing written.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchkit.cli.commands import main
from patchkit.recipe.points import MAX_POINTS
from patchkit.recipe.yamlpos import MAX_CHARS

GOOD = textwrap.dedent("""\
    id: r
    description: a recipe
    target:
      package: pkg
      files: [pkg/mod.py]
    backend: torch
    profiler: {save_path: ./out}
    schedule: {wait: 0, warmup: 0, active: 1, repeat: 1}
    options:
      role: {choices: [actor, ref, all], default: all}
    roles:
      actor: self.opt is not None
      ref: self.opt is None
    points:
      - class: A
        method: run
        at: after_call
        call: self.work
    """)
BIG = "9" * 5000  # the 5,000-digit integer
HUGE = "p" * 100_000  # the 100k-character target.package


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def refused(args, patchkit_home=None):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "Exceeds the limit" not in result.output, result.output
    assert "hint: " in result.output
    assert len(result.output) < 3000, result.output[:400]  # nothing huge is echoed back
    if patchkit_home is not None:
        assert list(Path(patchkit_home).iterdir()) == []
    return result.output


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


NUMBERS = [
    ("a schedule value", "wait: 0", f"wait: {BIG}"),
    ("a negative one", "wait: 0", f"wait: -{BIG}"),
    ("a hexadecimal one", "wait: 0", "wait: 0x" + "f" * 5000),
    ("one in a list", "ref: self.opt is None\n", f"ref: self.opt is None\nnotes: [a, {BIG}]\n"),
    ("a key", "ref: self.opt is None\n", f"ref: self.opt is None\nnotes:\n  ? {BIG}\n  : x\n"),  # 5000: an explicit key
    ("one digit too many", "wait: 0", "wait: 1000000000000000000"),
]


@pytest.mark.parametrize("what,old,new", NUMBERS, ids=[n[0] for n in NUMBERS])
def test_a_huge_integer_anywhere_in_a_recipe_is_a_located_error(tmp_path, patchkit_home, what, old, new):
    text = GOOD.replace(old, new, 1)
    path = write(tmp_path, text)
    out = refused(["validate", str(path)], patchkit_home)
    number = new.split("wait: ")[-1] if "wait" in new else BIG
    assert re.search(rf"{re.escape(str(path))}:{line_of(text, number)}:\d+: the whole number .* is too large: "
                     r"patchkit reads whole numbers of at most 18 digits", out), out


def test_the_largest_allowed_integer_loads(tmp_path):
    result = CliRunner().invoke(main, ["validate", str(write(tmp_path, GOOD.replace("wait: 0", "wait: " + "9" * 18)))])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("override", [f"schedule.wait={BIG}", f"role={BIG}", f"profiler.ranks=[0, {BIG}]",
                                      "schedule.active=0x" + "f" * 5000])
def test_a_huge_integer_in_an_override_is_a_command_line_error(tmp_path, patchkit_home, override):
    out = refused(["show", str(write(tmp_path, GOOD)), override], patchkit_home)
    assert "error: <command line>: " in out and "is too large: patchkit reads whole numbers of at most 18 digits" in out
    assert "hint: write a smaller number" in out


@pytest.mark.parametrize("value,fragment", [(".nan", "'.nan' is not a finite number"),
                                            ("1.0e+400", "'1.0e+400' is not a finite number"),
                                            ("2001-13-40", "cannot read '2001-13-40' as !!timestamp: month must be")])
def test_values_python_cannot_hold_are_located_errors(tmp_path, value, fragment):
    text = GOOD.replace("ref: self.opt is None\n", f"ref: self.opt is None\nnotes: [{value}]\n")
    out = refused(["validate", str(write(tmp_path, text))])
    assert f"r.yaml:{line_of(text, value)}:" in out and fragment in out
    out = refused(["show", str(write(tmp_path, GOOD)), f"profiler.save_path={value}"])
    assert "<command line>: profiler.save_path=" in out and fragment in out


NAMES = [
    ("package", "  package: pkg\n", f"  package: {HUGE}\n", "package 'ppp"),
    ("distribution", "  package: pkg\n", f"  package: pkg\n  distribution: {HUGE}\n", "distribution 'ppp"),
    ("class", "  - class: A\n", f"  - class: {HUGE}\n", "class 'ppp"),
    ("call", "call: self.work", f"call: self.{HUGE}", "call 'self.ppp"),
    ("role name", "  ref: self.opt is None\n", f"  ? {HUGE}\n  : self.opt is None\n", "role name 'ppp"),
]


@pytest.mark.parametrize("what,old,new,fragment", NAMES, ids=[n[0] for n in NAMES])
def test_a_100k_character_name_is_refused_at_validation(tmp_path, tree, patchkit_home, what, old, new, fragment):
    text = GOOD.replace(old, new, 1)
    path = write(tmp_path, text)
    out = refused(["validate", str(path)], patchkit_home)
    assert re.search(rf"r\.yaml:{line_of(text, HUGE)}:\d+: {re.escape(fragment)}\w*\.\.\.\w*' is 1000\d\d characters long; "
                     r"a name has at most 200", out), out
    root = tree("verl-0.6")
    assert "File name too long" not in refused(["diff", str(path), "--root", str(root)], patchkit_home)


@pytest.mark.parametrize("what,old,new,fragment", [
    ("distribution", "  package: pkg\n", "  package: pkg\n  distribution: 'a b'\n", "is not a distribution name"),
    ("file", "files: [pkg/mod.py]", f"files: [pkg/{'m' * 300}.py]", "is too long (307 characters)"),
    ("file path", "files: [pkg/mod.py]", f"files: [{'a/' * 600}m.py]", "is too long (1204 characters)"),
    ("save_path", "{save_path: ./out}", f"{{save_path: ./{'o' * 300}}}", "profiler.save_path is too long"),
])
def test_names_and_paths_no_file_system_holds_are_refused(tmp_path, what, old, new, fragment):
    text = GOOD.replace(old, new, 1)
    out = refused(["validate", str(write(tmp_path, text))])
    assert fragment in out and f"r.yaml:{line_of(text, new.strip().split(' ')[-1][:8])}:" in out


def test_200k_points_are_refused_for_their_size_not_for_aliases(tmp_path):
    point = "  - {class: A, method: run, at: after_call, call: self.work}\n"
    text = GOOD[: GOOD.index("points:\n")] + "points:\n" + point * 200_000
    out = refused(["validate", str(write(tmp_path, text))])
    assert f"the recipe file is larger than {MAX_CHARS} bytes" in out and "alias" not in out


def test_more_points_than_the_bound_are_refused_with_their_count(tmp_path):
    text = GOOD[: GOOD.index("points:\n")] + "points:\n" + "- {}\n" * 200_000
    out = refused(["validate", str(write(tmp_path, text))])
    assert f"r.yaml:{line_of(text, '- {}')}:1: the recipe has 200000 points; a recipe has at most {MAX_POINTS}" in out
    assert "alias" not in out


def test_many_plain_points_are_no_alias_expansion(tmp_path):
    point = "  - {class: A, method: run, at: after_call, call: self.work}\n"
    text = GOOD[: GOOD.index("points:\n")] + "points:\n" + point * MAX_POINTS
    result = CliRunner().invoke(main, ["validate", str(write(tmp_path, text))])
    assert result.exit_code == 0, result.output  # about 4,000 values: the old count refused far fewer than 200k


def test_points_copied_by_an_alias_are_alias_expansion(tmp_path):
    text = (GOOD[: GOOD.index("points:\n")] + "points:\n  - &p {class: A, method: run, at: after_call, call: self.work}\n"
            + "  - *p\n" * 200_000)
    out = refused(["validate", str(write(tmp_path, text))])
    assert "aliases expand the document too far (more than 100000 copied values)" in out


@pytest.mark.parametrize("override", ["profiler.save_path=", "profiler.save_path=' '"])
def test_an_empty_save_path_must_not_be_empty(tmp_path, override):
    out = refused(["show", str(write(tmp_path, GOOD)), override])
    assert f"error: <command line>: {override}: profiler.save_path must not be empty" in out
    assert "not a string" not in out


def test_an_empty_string_in_the_recipe_must_not_be_empty(tmp_path):
    text = GOOD.replace("{save_path: ./out}", "{save_path: ''}")
    out = refused(["validate", str(write(tmp_path, text))])
    assert f"r.yaml:{line_of(text, 'save_path')}:" in out and "profiler.save_path must not be empty" in out
    out = refused(["validate", str(write(tmp_path, GOOD.replace("description: a recipe", "description: ''")))])
    assert "description must not be empty" in out


@pytest.mark.parametrize("old,new,fragment", [
    ("  - class: A\n", "  - class: A\n    when: {role: " + "r" * 100_000 + "}\n", "is not a choice of option role"),
    ("at: after_call", "at: " + "x" * 100_000, "points[0].at must be one of"),
    ("{save_path: ./out}", "{save_path: ./out, ranks: [" + ", ".join(["-1"] * 50_000) + "]}",
     "profiler.ranks must be `all` or a list of ranks, not [-1, -1"),
])
def test_a_huge_wrong_value_is_quoted_shortened(tmp_path, old, new, fragment):
    out = refused(["validate", str(write(tmp_path, GOOD.replace(old, new, 1)))])
    assert fragment in out and "..." in out


def test_a_huge_option_value_on_the_command_line_is_quoted_shortened(tmp_path):
    out = refused(["show", str(write(tmp_path, GOOD)), "role=" + "r" * 100_000])
    assert "error: <command line>: role=rrr" in out and "...r" in out and ": not one of actor, ref, all" in out
