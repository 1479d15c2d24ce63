"""recipe_points: each point's scope, position, action and selectors, with the line of each mistake."""

from __future__ import annotations

import textwrap

import pytest

from patchkit.core import model as m
from patchkit.recipe import points as recipe_points
from patchkit.core.errors import RecipeError
from patchkit.recipe.reader import Reader
from patchkit.recipe.yamlpos import load

OPTIONS = (m.Option("granularity", ("mini", "micro"), "mini", ""),)


def points(text):
    data, marks = load(textwrap.dedent(text), "p.yaml")
    return recipe_points.points(Reader(data, marks, "p.yaml", {}), OPTIONS)


def test_every_key_of_a_point_is_read():
    (a, b, c) = points("""\
        points:
          - {class: W, method: run, at: after_call, call: self.step, guard: self.ok, count: 2,
             when: {granularity: micro}, files: [pkg/a.py]}
          - {function: train, at: loop_end, loop: [{iter: batches}, {while: self.more, target: b}], count: any}
          - {class: W, method: run, at: method_start, action: refuse, guard: self.busy, reason: own profiler}
        """)
    assert (a.cls, a.method, a.at, a.action, a.call, a.guard, a.count, a.when, a.files) == (
        "W", "run", "after_call", "step", "self.step", "self.ok", 2, (("granularity", "micro"),), ("pkg/a.py",))
    assert (b.cls, b.method, b.count) == (None, "train", None)
    assert b.loop == (m.LoopSelector(iter="batches"), m.LoopSelector(while_="self.more", target="b"))
    assert (c.action, c.reason, c.name) == ("refuse", "own profiler", None)
    assert (a.where.line, b.where.line, c.where.line) == (2, 4, 5)


@pytest.mark.parametrize("point,fragment", [
    ("{class: W, at: method_start}", "`class:` needs `method:`"),
    ("{method: run, at: method_start}", "`method:` needs `class:`"),
    ("{at: method_start}", "needs `class:` and `method:`, or `function:`"),
    ("{function: f, class: W, at: method_start}", "either `function:` or `class:`"),
    ("{function: f, at: before_call}", "needs `call:`"),
    ("{function: f, at: before_call, call: 'a()'}", "is not a dotted name"),
    ("{function: f, at: method_start, call: a}", "`call:` only goes with"),
    ("{function: f, at: loop_start}", "needs `loop:`"),
    ("{function: f, at: method_end, loop: {iter: x}}", "`loop:` only goes with before_loop / loop_start / loop_end"),
    ("{function: f, at: loop_start, loop: {iter: 'a b'}}", "loop iter 'a b' is not a valid name"),
    ("{function: f, at: loop_start, loop: []}", "loop must name a loop"),
    ("{function: f, at: on_exit, action: start}", "`at: on_exit` allows `action: step`, not start"),
    ("{function: f, at: method_start, action: refuse}", "needs `guard:`"),
    ("{function: f, at: method_start, reason: x}", "only goes with `action: refuse`"),
    ("{function: f, at: method_start, count: 0}", "count must be at least 1"),
    ("{function: f, at: method_start, files: [/x.py]}", "is absolute"),
    ("{function: 'f g', at: method_start}", "is not a Python name"),
    ("{function: f, at: method_start, when: {granularity: nano}}", "'nano' is not a choice"),
    ("{function: f, at: method, action: range}", "`action: range` needs `name:`"),
    ("{function: f, at: method_start, name: x}", "`name:` goes with `action: range` or `mark`, not step"),
    ("{function: f, at: on_exit, action: mark, name: x}", "`at: on_exit` allows `action: step`, not mark"),
    ("{function: f, at: method_start, action: range, name: x}", "allows `action: start | step | refuse | mark`"),
    ("{function: f, at: method, action: step}", "`at: method` allows `action: range`, not step"),
    ("{function: f, at: around_call, action: range, name: x}", "`at: around_call` needs `call:`"),
    ('{function: f, at: loop_end, loop: {iter: x}, action: mark, name: "two\\nlines"}', "printable ASCII"),
])
def test_each_mistake_names_the_point_line(point, fragment):
    with pytest.raises(RecipeError) as info:
        points(f"points:\n  - {point}\n")
    assert fragment in str(info.value) and info.value.where.line == 2 and info.value.hint


def test_points_must_be_a_non_empty_list():
    with pytest.raises(RecipeError, match="points must be a non-empty list"):
        points("points: {}\n")


def test_a_range_or_mark_keeps_its_name():
    (a, b) = points("""\
        points:
          - {class: W, method: run, at: around_call, call: self.work, action: range, name: forward}
          - {class: W, method: run, at: method_start, action: mark, name: begin}
        """)
    assert (a.action, a.name, b.action, b.name) == ("range", "forward", "mark", "begin")
