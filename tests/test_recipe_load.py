"""Bad recipes and bad overrides: exit 1, `file:line:col: message`, a hint, no traceback, nothing written."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner

from patchkit.cli.commands import main
from patchkit.core.errors import OverrideError, RecipeError
from patchkit.recipe.load import load_recipe

GOOD = textwrap.dedent("""\
    id: bad
    description: a recipe
    target:
      package: pkg
      files: [pkg/mod.py]
    backend: torch
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


def write(tmp_path, text, name="bad.yaml"):
    path = tmp_path / name
    path.write_text(text) if isinstance(text, str) else path.write_bytes(text)
    return path


def error_of(tmp_path, text, overrides=(), name="bad.yaml"):
    path = write(tmp_path, text, name)
    with pytest.raises(RecipeError) as info:
        load_recipe(path, overrides)
    return info.value


def test_the_good_recipe_loads(tmp_path):
    assert load_recipe(write(tmp_path, GOOD)).id == "bad"


def test_a_byte_order_mark_is_allowed_and_bad_utf8_after_it_names_its_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert load_recipe(path).id == "bad"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode() + b"notes: [caf\xe9]\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert "not UTF-8" in info.value.message and info.value.where.line == GOOD.count("\n") + 1


CASES = [
    # (description, replace-this, with-this, expected line, message fragment)
    ("unknown top-level key", "backend: torch\n", "backend: torch\nbakend: npu\n", 7, "unknown key 'bakend'"),
    ("unknown target key", "  package: pkg\n", "  package: pkg\n  pakage: x\n", 5, "unknown key 'pakage' in target"),
    ("wrong type", "schedule: {wait: 0,", "schedule: {wait: zero,", 7, "schedule.wait must be an integer"),
    ("negative count", "schedule: {wait: 0,", "schedule: {wait: -1,", 7, "schedule.wait must be at least 0"),
    ("zero active", "active: 1", "active: 0", 7, "schedule.active must be at least 1"),
    ("float", "active: 1", "active: 1.5", 7, "schedule.active must be an integer"),
    ("boolean count", "active: 1", "active: true", 7, "must be an integer"),
    ("unknown backend", "backend: torch", "backend: cuda", 6, "backend must be one of "),
    ("unknown position", "at: after_call", "at: after_return", 16, "points[0].at must be one of"),
    ("missing call", "    call: self.work\n", "", 14, "needs `call:`"),
    ("bad call name", "call: self.work", "call: self.work()", 17, "is not a dotted name"),
    ("class not a name", "class: A", "class: A B", 14, "is not a Python name"),
    ("bad guard", "ref: self.opt is None", "ref: self.opt is", 12, "not a valid Python expression"),
    ("lambda guard", "ref: self.opt is None", "ref: '(lambda: 1)()'", 12, "lambda is not allowed"),
    ("walrus guard", "ref: self.opt is None", "ref: '(x := 1)'", 12, "assignment expression (:=) is not allowed"),
    ("statement guard", "ref: self.opt is None", "ref: 'import os'", 12, "not a valid Python expression"),
    ("two-line guard", "ref: self.opt is None", "ref: \"a\\nb\"", 12, "not a valid Python expression"),
    ("missing target", "target:\n  package: pkg\n  files: [pkg/mod.py]\n", "", 1, "missing the required key 'target'"),
    ("absolute file", "files: [pkg/mod.py]", "files: [/etc/passwd.py]", 5, "is absolute"),
    ("drive-letter file", "files: [pkg/mod.py]", "files: ['C:x.py']", 5, "is absolute"),
    ("escaping file", "files: [pkg/mod.py]", "files: [../../x.py]", 5, "leaves the root"),
    ("not a python file", "files: [pkg/mod.py]", "files: [pkg/mod.so]", 5, "is not a .py file"),
    ("bad versions", "  package: pkg\n", "  package: pkg\n  versions: '>>1'\n", 5, "not a PEP 440 version specifier"),
    ("post-release bound", "  package: pkg\n", "  package: pkg\n  versions: '>=1.0.post1'\n", 5, "release or pre-release bounds"),
    ("bad version in a range", "  package: pkg\n", "  package: pkg\n  versions: '>=0.4,<0.8x'\n", 5, "'0.8x' is not a PEP 440 version"),
    ("no clause", "  package: pkg\n", "  package: pkg\n  versions: ' , '\n", 5, "no version clause"),
    ("id mismatch", "id: bad", "id: other", 1, "does not match the file name"),
    ("bad id", "id: bad", "id: Bad Id", 1, "is not a valid recipe id"),
    ("default not a choice", "default: all", "default: both", 9, "default 'both' is not one of"),
    ("role without expression", "choices: [actor, ref, all]", "choices: [actor, ref, critic, all]", 9, "role 'critic' has no expression"),
    ("when unknown option", "    call: self.work\n", "    call: self.work\n    when: {granularity: mini}\n", 18, "unknown key 'granularity'"),
    ("when unknown value", "    call: self.work\n", "    call: self.work\n    when: {role: critic}\n", 18, "'critic' is not a choice of option role"),
    ("empty points", "points:\n  - class: A\n    method: run\n    at: after_call\n    call: self.work\n", "points: []\n", 13, "points must be a non-empty list"),
    ("duplicate key", "backend: torch\n", "backend: torch\nbackend: npu\n", 7, "duplicate key 'backend'"),
    ("level", "backend: torch\n", "backend: torch\nprofiler: {level: level9}\n", 7, "profiler.level must be one of"),
    ("contents", "backend: torch\n", "backend: torch\nprofiler: {contents: [npu, gpu]}\n", 7, "profiler.contents entries must be one of"),
    ("export type", "backend: torch\n", "backend: torch\nprofiler: {export_type: json}\n", 7, "profiler.export_type must be one of"),
    ("ranks", "backend: torch\n", "backend: torch\nprofiler: {ranks: [-1]}\n", 7, "profiler.ranks must be `all` or a list"),
    ("loop without selector", "at: after_call\n    call: self.work", "at: loop_end\n    loop: {}", 17, "needs iter, target, calls or while"),
    ("loop key", "at: after_call\n    call: self.work", "at: loop_end\n    loop: {over: x}", 17, "unknown key 'over'"),
    ("call on a loop point", "at: after_call", "at: loop_end\n    loop: {iter: x}", 18, "`call:` only goes with after_call"),
]


@pytest.mark.parametrize("what,old,new,line,fragment", CASES, ids=[c[0] for c in CASES])
def test_each_kind_of_bad_recipe_names_its_line(tmp_path, what, old, new, line, fragment):
    assert old in GOOD, what
    err = error_of(tmp_path, GOOD.replace(old, new, 1))
    assert fragment in err.message
    assert err.where is not None and err.where.path.endswith("bad.yaml")
    assert err.where.line == line, err.render()
    assert err.hint


@pytest.mark.parametrize("text,fragment", [
    ("", "the recipe is empty"),
    ("- a\n- b\n", "must be a YAML mapping, not a list"),
    ("just words\n", "must be a YAML mapping, not a string"),
    ("id: [unclosed\n", "YAML syntax error"),
    ("id: x\n\tdescription: tab\n", "YAML syntax error"),
    (b"\x00\x01\x02binary\xff", "NUL bytes"),
    (b"id: caf\xe9\n", "not UTF-8"),
    ("a: &x [*x]\n", "a YAML alias refers to itself"),
    ("a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
     "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
     "aliases expand the document too far"),
    ("? [a, b]\n: c\n", "a mapping key must be a plain name"),
])
def test_malformed_documents(tmp_path, text, fragment):
    err = error_of(tmp_path, text)
    assert fragment in err.message, err.render()
    assert err.where.path.endswith("bad.yaml")


@pytest.mark.parametrize("override,fragment", [
    ("schedule.actve=3", "unknown override key 'schedule.actve'"),
    ("nonsense", "is not KEY=VALUE"),
    ("schedule.active=0", "schedule.active must be at least 1"),
    ("schedule.active=[1", "not valid YAML"),
    ("role=critic", "not one of actor, ref, all"),
    ("profiler.level=level7", "profiler.level must be one of"),
    ("target.files=[x.py]", "unknown override key 'target.files'"),
    ("guard=True", "unknown override key 'guard'"),
])
def test_bad_overrides(tmp_path, override, fragment):
    with pytest.raises(OverrideError) as info:
        load_recipe(write(tmp_path, GOOD), [override])
    assert fragment in info.value.message
    if "unknown override key" in fragment:
        assert "schedule.active" in info.value.hint and "role" in info.value.hint


def test_validate_reports_the_unknown_key_on_line_3_without_a_traceback(tmp_path):
    text = GOOD.replace("target:\n", "target:\n  pakage: oops\n", 1)
    path = write(tmp_path, text)
    assert text.splitlines()[3 - 1] == "target:" or text.splitlines()[2] == "  pakage: oops"
    lines = GOOD.splitlines()
    lines.insert(2, "colour: blue")
    path.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 1
    assert f"{path}:3:1: unknown key 'colour'" in result.output
    assert "Traceback" not in result.output
    assert "hint: valid keys:" in result.output


def test_validate_accepts_the_built_in_recipes():
    from conftest import RECIPES

    result = CliRunner().invoke(main, ["validate", *map(str, sorted(RECIPES.glob("*.yaml")))])
    assert result.exit_code == 0, result.output
    assert "0 invalid" in result.output


def test_an_option_named_by_a_number_is_a_clean_error_even_with_overrides(tmp_path):
    """Found by fuzzing: a non-string option name used to crash the override check."""
    text = GOOD.replace("options:\n", "options:\n  0: null\n", 1)
    for overrides in ([], ["granularity=npu"], ["role=ref"]):
        err = error_of(tmp_path, text, overrides)
        assert "option name 0 is not a valid name" in err.message or "unknown override key" in err.message


# ---------------------------------------------------------------- what a new user trips on

@pytest.mark.parametrize("override,meant", [
    ("wait=1", "schedule.wait=1"),             # the last part of a dotted key
    ("level=level1", "profiler.level=level1"),
    ("activ=3", "schedule.active=3"),          # the last part, misspelt
    ("schedule.activ=3", "schedule.active=3"),  # the whole key, misspelt
    ("profiler.wait=2", "schedule.wait=2"),    # the right key in the wrong section
    ("rol=ref", "role=ref"),                   # an option's name
])
def test_a_mistyped_override_key_says_which_key_was_meant(tmp_path, override, meant):
    result = CliRunner().invoke(main, ["show", str(write(tmp_path, GOOD)), override])
    assert result.exit_code == 1
    assert f"<command line>: unknown override key {override.partition('=')[0]!r}" in result.stderr
    assert f"hint: did you mean {meant}? valid keys: " in result.stderr


def test_a_key_like_no_other_gets_no_guess(tmp_path):
    err = error_of(tmp_path, GOOD, ["colour=blue"])
    assert "did you mean" not in err.hint and err.hint.startswith("valid keys: backend, ")


@pytest.mark.parametrize("override,meant", [("profiler.level=levl1", "did you mean level1?"),
                                            ("role=rf", "did you mean role=ref?")])
def test_a_mistyped_word_says_which_word_was_meant(tmp_path, override, meant):
    err = error_of(tmp_path, GOOD, [override])
    assert isinstance(err, OverrideError) and err.hint.startswith(meant)


NPU_SAFE = GOOD.replace("backend: torch\n", "backend: torch\nprofiler: {save_path: ./out%dir}\n")


@pytest.mark.parametrize("recipe,overrides,typed", [
    (GOOD.replace("backend: torch", "backend: npu"), ["profiler.save_path=./a%b"], "profiler.save_path=./a%b"),
    (NPU_SAFE, ["backend=npu"], "backend=npu"),  # the recipe's path is fine for torch, not for torch_npu
    (GOOD, ["schedule.wait=2", "profiler.contents=[memory]", "backend=npu"], "profiler.contents=[memory] backend=npu"),
])
def test_a_value_the_backend_refuses_is_blamed_on_the_override_as_typed(tmp_path, recipe, overrides, typed):
    err = error_of(tmp_path, recipe, overrides)
    assert isinstance(err, OverrideError)
    assert str(err.where) == "<command line>" and err.message.startswith(f"{typed}: profiler.")
    assert "command line" in err.hint


def test_a_value_the_backend_refuses_in_the_recipe_itself_is_still_blamed_on_the_recipe(tmp_path):
    text = NPU_SAFE.replace("backend: torch\n", "backend: npu\n")
    err = error_of(tmp_path, text, ["schedule.wait=2"])
    assert not isinstance(err, OverrideError) and str(err.where).startswith(str(tmp_path / "bad.yaml") + ":")


def test_a_bad_override_of_a_built_in_recipe_names_the_command_line_not_the_recipe():
    result = CliRunner().invoke(main, ["diff", "verl-fsdp-update", "profiler.save_path=./traces 1"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: <command line>: profiler.save_path=./traces 1: profiler.save_path")
    assert "verl-fsdp-update.yaml" not in result.stderr
