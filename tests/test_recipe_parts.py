"""recipe_parts: a recipe's options, roles, `when:` choices and examples, read with their errors' lines."""

from __future__ import annotations

import textwrap

import pytest

from patchkit.recipe import parts
from patchkit.core.errors import RecipeError
from patchkit.recipe.reader import Reader
from patchkit.recipe.yamlpos import load


def reader(text):
    data, marks = load(textwrap.dedent(text), "p.yaml")
    return Reader(data, marks, "p.yaml", {})


GOOD = """\
    options:
      granularity: {choices: [mini, micro], default: mini, help: which loop}
      role: {choices: [actor, ref, all], default: all}
    roles:
      actor: self.opt is not None
      ref: self.opt is None
    examples:
      - name: one
        before: "x = 1\\n"
        unchanged: true
        reason: nothing to patch
      - name: two
        options: {granularity: micro}
        before: "x = 1\\n"
        after: "x = 2\\n"
    """


def test_options_roles_and_examples_are_read_in_order():
    r = reader(GOOD)
    options = parts.options(r)
    assert [(o.name, o.choices, o.default, o.help) for o in options] == [
        ("granularity", ("mini", "micro"), "mini", "which loop"), ("role", ("actor", "ref", "all"), "all", "")]
    assert parts.roles(r, options) == (("actor", "self.opt is not None"), ("ref", "self.opt is None"))
    one, two = parts.examples(r, options)
    assert (one.name, one.after, one.reason, one.options) == ("one", None, "nothing to patch", ())
    assert (two.after, two.options) == ("x = 2\n", (("granularity", "micro"),))
    assert (one.where.path, one.where.line) == ("p.yaml", 8)


@pytest.mark.parametrize("text,read,line,fragment", [
    ("options: {backend: {choices: [a], default: a}}\n", "options", 1, "option name 'backend' is not a valid name"),
    ("options: {g: {choices: [a-b], default: a-b}}\n", "options", 1, "choice 'a-b' is not a plain word"),
    ("options: {g: {choices: [a], default: b}}\n", "options", 1, "default 'b' is not one of the choices"),
    ("options: []\n", "options", 1, "options must be a mapping"),
    ("options: {g: {choices: [a], default: a}}\nroles: {x: 'True'}\n", "roles", 2, "need an option named `role`"),
    ("options: {role: {choices: [x, y], default: x}}\nroles: {x: 'True'}\n", "roles", 1,
     "role 'y' has no expression"),
    ("options: {role: {choices: [x], default: x}}\nroles: {x: 'a b'}\n", "roles", 2, "not a valid Python expression"),
    ("options: {g: {choices: [a], default: a}}\nexamples: [{name: e, before: x}]\n", "examples", 2,
     "either `after:` or `unchanged: true`"),
    ("options: {g: {choices: [a], default: a}}\nexamples: [{name: e, before: x, options: {g: b}, unchanged: true}]\n",
     "examples", 2, "'b' is not a choice of option g"),
    ("options: {g: {choices: [a], default: a}}\nexamples: {}\n", "examples", 2, "examples must be a list"),
])
def test_each_mistake_names_its_line(text, read, line, fragment):
    r = reader(text)
    with pytest.raises(RecipeError) as info:
        options = parts.options(r)
        if read == "roles":
            parts.roles(r, options)
        elif read == "examples":
            parts.examples(r, options)
    assert fragment in str(info.value) and info.value.where.line == line and info.value.hint


def test_when_needs_declared_options():
    r = reader("when: {role: actor}\n")
    with pytest.raises(RecipeError, match="the recipe declares no options"):
        parts.when(r, ("when",), ())
