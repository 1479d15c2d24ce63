"""yamlpos: plain values from YAML with the line and column of every key and value; bad documents are errors."""

from __future__ import annotations

import pytest

from patchkit.errors import RecipeError
from patchkit.yamlpos import KEY, load

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
     None, "too large"),
    ("a: " + "[" * 3000 + "]" * 3000 + "\n", None, "nested too deeply"),
])
def test_bad_documents_name_their_place_and_say_what_to_do(text, line, fragment):
    with pytest.raises(RecipeError) as info:
        load(text, "r.yaml")
    assert fragment in info.value.message and info.value.hint and info.value.where.path == "r.yaml"
    if line is not None:
        assert info.value.where.line == line
