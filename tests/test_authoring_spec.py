"""A point on one line: what `patchkit points` prints is what `patchkit new --point` reads."""

from __future__ import annotations

import pytest

from patchkit.core.errors import RecipeError
from patchkit.authoring.spec import parse, spell

POINTS = [
    {"at": "method_start", "action": "start"},
    {"at": "after_call", "call": "self._optimizer_step"},
    {"at": "loop_end", "loop": {"iter": "micro_batches"}},
    {"at": "before_loop", "loop": {"iter": "batches", "target": "mb"}, "action": "start", "count": 2},
    {"at": "around_call", "call": "self.model_runner.execute_model", "action": "range", "name": "forward"},
    {"at": "method", "action": "range", "name": "rollout.decode"},
    {"at": "after_call", "call": "self.work", "guard": "not self.is_draft_worker and x == 'a: b'"},
    {"at": "loop_start", "loop": {"while": "self.has_work"}, "nested": "inner"},
]


@pytest.mark.parametrize("point", POINTS, ids=lambda p: spell(p))
def test_spelling_reads_back_the_same_point(point):
    assert parse(spell(point)) == point


def test_spelling_keeps_the_order_a_recipe_writes():
    assert spell({"action": "start", "loop": {"target": "mb", "iter": "b"}, "at": "before_loop"}) == \
        "at: before_loop loop: {iter: b, target: mb} action: start"
    assert spell({"name": "w", "action": "range", "call": "self.w", "at": "around_call"}) == \
        "at: around_call call: self.w action: range name: w"


def test_a_bare_loop_name_is_its_iterable_and_values_are_yaml():
    assert parse("at: loop_end loop: micro_batches") == {"at": "loop_end", "loop": {"iter": "micro_batches"}}
    assert parse("at: after_call call: f count: any") == {"at": "after_call", "call": "f", "count": "any"}
    assert parse('at: mark call: f name: "a b"')["name"] == "a b"


@pytest.mark.parametrize("text, words", [
    ("before_loop", "is not `key: value`"),
    ("colour: red at: method_start", "is not `key: value`"),
    ("at: method_start at: method_end", "twice"),
    ("at: loop_end loop:", "no value"),
    ("at: loop_end loop: {iter: [", "not YAML"),
])
def test_a_line_that_is_not_a_point_says_what_to_write(text, words):
    with pytest.raises(RecipeError) as caught:
        parse(text)
    assert words in caught.value.message and "at:" in caught.value.hint


@pytest.mark.parametrize("raw,value", [
    ('"n > 1" and n', '"n > 1" and n'),  # a guard that starts with a string literal
    ("'x' in self.modes", "'x' in self.modes"),
    ('"a', '"a'),  # unterminated: as written, for the recipe's own checks to refuse
    ("'a' == 'b'", "'a' == 'b'"),
    ('"self.rank == 0"', "self.rank == 0"),  # one quoted string: its text
])
def test_text_keys_are_as_written_unless_one_quoted_string(raw, value):
    assert parse(f"at: on_exit guard: {raw}")["guard"] == value
