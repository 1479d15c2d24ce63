"""yamlpos: plain values from YAML with the line and column of every key and value; bad documents are errors."""

from __future__ import annotations

import pytest

from patchkit.core.errors import RecipeError
from patchkit.recipe.yamlpos import KEY, MAX_CHARS, load, shorten

TEXT = """\
id: r
schedule: {wait: 1, active: 2}
points:
  - at: method_start
    count: any
flag: true
"""


def test_values_are_plain_and_every_key_and_value_has_its_place():
    data, marks = load(TEXT, "r.yaml")
    assert data == {"id": "r", "schedule": {"wait": 1, "active": 2}, "points": [{"at": "method_start", "count": "any"}],
                    "flag": True}
    assert marks[("schedule", "active")] == (2, 29) and marks[("schedule", "active", KEY)] == (2, 21)
    assert marks[("points", 0)] == (4, 5) and marks[("points", 0, "count")] == (5, 12)
    assert marks[("flag", KEY)] == (6, 1)


def test_an_empty_document_is_none():
    assert load("", "r.yaml") == (None, {})


@pytest.mark.parametrize("text,line,fragment", [
    ("id: r\nid: s\n", 2, "duplicate key 'id'"),
    ("a: [1, 2\n", 2, "YAML syntax error"),
    ("? [a, b]\n: 1\n", 1, "a mapping key must be a plain name"),
    ("a: &x [*x]\n", 1, "refers to itself"),
    ("a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
     "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
     None, "aliases expand the document too far"),
    ("a: " + "[" * 3000 + "]" * 3000 + "\n", None, "nested too deeply"),
])
def test_bad_documents_name_their_place_and_say_what_to_do(text, line, fragment):
    with pytest.raises(RecipeError) as info:
        load(text, "r.yaml")
    assert fragment in info.value.message and info.value.hint and info.value.where.path == "r.yaml"
    if line is not None:
        assert info.value.where.line == line


# ---------------------------------------------------------------- bounds (issue 21)

@pytest.mark.parametrize("text,fragment", [
    ("a: " + "9" * 5000 + "\n", "the whole number 9999"),
    ("a: [1, -" + "9" * 5000 + "]\n", "the whole number -999"),
    ("a: 0x" + "f" * 5000 + "\n", "the whole number 0xfff"),
    ("a: 1000000000000000000\n", "the whole number 1000000000000000000 is too large"),
    ("a: .inf\n", "'.inf' is not a finite number"),
    ("a: -.inf\n", "'-.inf' is not a finite number"),
    ("a: .NaN\n", "'.NaN' is not a finite number"),
    ("a: 2001-02-30\n", "cannot read '2001-02-30' as !!timestamp: day is out of range"),
    ("a: !!float abc\n", "cannot read 'abc' as !!float"),
    ("a: !!timestamp x\n", "cannot read 'x' as !!timestamp"),
])
def test_values_python_cannot_hold_are_errors_at_their_place(text, fragment):
    with pytest.raises(RecipeError) as info:
        load(text, "r.yaml")
    assert fragment in info.value.message and info.value.hint
    assert (info.value.where.line, info.value.where.col) == (1, 8 if text.startswith("a: [") else 4)
    assert len(info.value.message) < 200  # the 5000 digits are not echoed


def test_the_largest_whole_numbers_load():
    data, _ = load("a: [999999999999999999, -999999999999999999, 0x0de0b6b3a763ffff, 1_000, 1.5e+300]\n", "r.yaml")
    assert data == {"a": [10 ** 18 - 1, -(10 ** 18 - 1), 10 ** 18 - 1, 1000, 1.5e300]}


def test_a_large_plain_document_is_not_taken_for_an_alias_bomb():
    text = "points:\n" + "  - {at: method_start}\n" * 40_000  # 120k values, no alias
    data, _ = load(text, "r.yaml")
    assert len(data["points"]) == 40_000


def test_alias_copies_are_counted_and_bounded():
    data, _ = load("a: &a [1, 2]\nb: [*a, *a, *a]\n", "r.yaml")
    assert data["b"] == [[1, 2]] * 3
    with pytest.raises(RecipeError, match=r"aliases expand the document too far \(more than 100000 copied values\)"):
        load("a: &a {x: 1, y: 2}\nb:\n" + "  - *a\n" * 40_000, "r.yaml")


def test_the_document_size_is_bounded_with_its_own_message():
    with pytest.raises(RecipeError) as info:
        load("#" * (MAX_CHARS + 1), "r.yaml")
    assert info.value.message == f"the document is too large ({MAX_CHARS + 1} characters; at most {MAX_CHARS})"
    assert "split" in info.value.hint and info.value.where.path == "r.yaml"


def test_shorten_keeps_short_text_and_bounds_long_text():
    assert shorten("abc") == "abc"
    assert shorten("x" * 5000, 30) == "x" * 18 + "..." + "x" * 9 and len(shorten("y" * 10 ** 5)) == 60
