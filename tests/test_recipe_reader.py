"""recipe_reader: typed access to recipe YAML, each error at the line of the value (or key) it is about."""

from __future__ import annotations

import pytest

from patchkit.core.errors import OverrideError, RecipeError
from patchkit.recipe.reader import (
    Reader, check_expression, did_you_mean, is_dotted, is_identifier, is_recipe_id, kind_of, name_of,
)
from patchkit.recipe.yamlpos import load

TEXT = """\
id: x
schedule:
  active: two
  wait: -1
flag: maybe
words: [a, b, 7]
at: after_cal
section: [1]
"""


def reader(overridden=None):
    data, marks = load(TEXT, "r.yaml")
    return Reader(data, marks, "r.yaml", overridden or {})


def where(exc):
    return exc.where.path, exc.where.line, exc.where.col


def test_an_integer_of_the_wrong_kind_names_its_line_and_column():
    with pytest.raises(RecipeError) as info:
        raise reader().fail(("schedule", "active"), "bad", "fix it")
    assert where(info.value) == ("r.yaml", 3, 11)
    exc = reader().fail(("schedule", "active"), "x", "y")
    assert isinstance(exc, RecipeError)
    with pytest.raises(RecipeError, match="schedule.active must be an integer, not a string"):
        reader().integer(("schedule", "active"), 1)
    with pytest.raises(RecipeError, match="schedule.wait must be at least 0, not -1"):
        reader().integer(("schedule", "wait"), 0)


def test_an_unknown_key_points_at_the_key_and_lists_the_valid_ones():
    with pytest.raises(RecipeError) as info:
        reader().mapping(("schedule",), ("active",))
    assert where(info.value) == ("r.yaml", 4, 3)
    assert "unknown key 'wait' in schedule" in str(info.value)
    assert "valid keys: active" in info.value.hint


def test_a_missing_required_key_is_named():
    with pytest.raises(RecipeError, match="schedule is missing the required key 'repeat'"):
        reader().mapping(("schedule",), ("active", "wait", "repeat"), ("repeat",))


def test_a_value_that_is_not_a_mapping_says_what_it_is():
    with pytest.raises(RecipeError, match="section must be a mapping, not a list"):
        reader().mapping(("section",), ())


def test_words_booleans_and_lists():
    r = reader()
    with pytest.raises(RecipeError) as info:
        r.word(("at",), ("after_call", "before_call"))
    assert "did you mean after_call?" in info.value.hint
    with pytest.raises(RecipeError, match="flag must be true or false, not a string"):
        r.boolean(("flag",))
    with pytest.raises(RecipeError) as info:
        r.strings(("words",))
    assert "words entries must be a string; got 7" in str(info.value) and where(info.value)[1] == 6
    assert r.strings(("id",)) == ["x"]  # one string counts as a list of one


def test_a_value_set_on_the_command_line_is_blamed_on_the_override():
    r = reader({("schedule", "active"): "schedule.active=two"})
    with pytest.raises(OverrideError) as info:
        r.integer(("schedule", "active"), 1)
    assert str(info.value).startswith("schedule.active=two: ") and info.value.where.path == "<command line>"


@pytest.mark.parametrize("text,fragment", [
    ("self.a is", "not a valid Python expression"),
    ("(lambda: 1)()", "lambda is not allowed"),
    ("(y := 2)", r"assignment expression \(:=\) is not allowed"),
    ("'\u00e9'", "must be ASCII"),
    ("-" * 60 + "1", "nested"),
])
def test_bad_guards_are_refused(text, fragment):
    with pytest.raises(ValueError, match=fragment):
        check_expression(text, ValueError)


def test_a_guard_is_kept_as_written_unless_it_holds_a_comment_or_a_control_character():
    assert check_expression("  self.x  is None ", ValueError) == "self.x  is None"
    assert check_expression("a #c", ValueError) == "a"
    assert check_expression("a\tand b", ValueError) == "a and b"


def test_names():
    assert is_identifier("role") and not is_identifier("class") and not is_identifier(3)
    assert is_recipe_id("verl-fsdp.update_2") and not is_recipe_id("Verl") and not is_recipe_id("-x")
    assert not is_recipe_id("")
    assert is_dotted("self.a.b") and not is_dotted("self.a()") and not is_dotted("a.class")
    assert kind_of(None) == "empty" and kind_of([]) == "a list" and kind_of(1.5) == "a number"
    assert name_of(("points", 0, "at")) == "points[0].at" and name_of(()) == "value"
    assert did_you_mean("levl1", ("level0", "level1"), "profiler.level=") == "did you mean profiler.level=level1? "
    assert did_you_mean("zzz", ("level0",)) == "" and did_you_mean(3, ("a",)) == ""


# ---------------------------------------------------------------- bounds (issue 21)

def bounded(text: str, overridden=None):
    data, marks = load(text, "r.yaml")
    return Reader(data, marks, "r.yaml", overridden or {})


def test_an_empty_string_must_not_be_empty_not_a_string():
    r = bounded("profiler: {save_path: ''}\ndescription: '  '\n")
    with pytest.raises(RecipeError) as info:
        r.string(("profiler", "save_path"))
    assert info.value.message == "profiler.save_path must not be empty" and where(info.value) == ("r.yaml", 1, 23)
    assert "leave it out to keep the default" in info.value.hint
    with pytest.raises(RecipeError, match="^description must not be empty$"):
        r.string(("description",))
    with pytest.raises(OverrideError, match="^profiler.save_path=: profiler.save_path must not be empty$"):
        bounded("profiler: {save_path: ''}\n", {("profiler", "save_path"): "profiler.save_path="}).string(
            ("profiler", "save_path"))


def test_a_name_is_bounded_before_it_is_checked_or_shown():
    r = bounded("package: " + "p" * 201 + "\nok: " + "q" * 200 + "\n")
    with pytest.raises(RecipeError) as info:
        r.name(("package",), "package")
    assert info.value.message.endswith("is 201 characters long; a name has at most 200") and len(info.value.message) < 120
    assert where(info.value) == ("r.yaml", 1, 10)
    assert r.name(("ok",), "package") == "q" * 200
    assert not is_identifier("p" * 201) and not is_dotted("a." * 100 + "b") and not is_recipe_id("r" * 201)


@pytest.mark.parametrize("path,fragment", [
    ("pkg/" + "m" * 256 + ".py", "is too long (263 characters)"),
    ("a/" * 520 + "m.py", "is too long (1044 characters)"),
    ("pkg/m\x00.py", "contains a NUL byte"),
])
def test_a_target_file_no_file_system_holds_is_refused(path, fragment):
    from patchkit.recipe.reader import check_relative

    r = bounded("f: x\n")
    r.data["f"] = path
    with pytest.raises(RecipeError) as info:
        check_relative(r, ("f",), path)
    assert fragment in info.value.message and where(info.value) == ("r.yaml", 1, 4)


def test_a_message_quoting_a_huge_value_is_shortened():
    from patchkit.recipe.reader import MAX_MESSAGE

    r = bounded("at: " + "x" * 100_000 + "\n")
    with pytest.raises(RecipeError) as info:
        r.word(("at",), ("method_start",))
    assert len(info.value.message) == MAX_MESSAGE and "..." in info.value.message
