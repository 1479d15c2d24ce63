"""guards: a guard or role is a restricted expression, refused at validation when it could run code."""

from __future__ import annotations

import re
import textwrap

import pytest
import yaml
from click.testing import CliRunner

from patchkit.cli.commands import main
from patchkit.recipe.guards import ALLOWED, check_expression

from conftest import RECIPES

RECIPE = textwrap.dedent("""\
    id: g
    description: a recipe with a guard
    target: {package: pkg, files: [pkg/mod.py]}
    backend: torch
    options:
      role: {choices: [actor, ref, all], default: all}
    roles:
      actor: self.opt is not None
      ref: self.opt is None
    points:
      - {class: A, method: run, at: method_start}
    """)
ISSUE = "__import__('os').system('id')"  # the issue's input: it used to pass `validate`


def shipped_guards():
    """Every guard and role expression of the built-in recipes."""
    found = []
    for path in sorted(RECIPES.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        found += [data["guard"]] if "guard" in data else []
        found += list((data.get("roles") or {}).values())
        found += [p["guard"] for p in data["points"] if "guard" in p]
    return found


def test_the_built_in_recipes_have_guards_and_every_one_passes():
    guards = shipped_guards()
    assert len(guards) >= 10 and any("getattr(" in g for g in guards) and any("__name__" in g for g in guards)
    for guard in guards:
        assert check_expression(guard, ValueError) == guard.strip()


@pytest.mark.parametrize("guard", [
    "self.rank == 0", "not self.is_draft_worker", "not forward_only and self.role == 'actor'",
    "self.x[0] in (1, 2, None)", "self.x[1:2] == [1] or self.y[-1] != {3, 4}", "-self.x < 3.5",
    "step % 2 == 0", "a if c else b", "isinstance(self, Worker)", "hasattr(self, 'actor')",
    "getattr(getattr(self, 'cfg', None), 'profile', False)", "'Value' not in type(self).__qualname__",
    "len(batches) > 0", "'batches' in dir()", "x is not None and b'k' in y",
])
def test_expressions_that_only_read_values_pass(guard):
    assert check_expression(guard, ValueError) == guard


FORBIDDEN = [
    (ISSUE, "a call of __import__()"),
    ("os.system('id')", "a call of `os.system`"),
    ("self.f()", "a call of `self.f`"),
    ("open('/etc/passwd')", "a call of open()"),
    ("eval('1')", "a call of eval()"),
    ("getattr(self, 'f')()", "a call of `getattr(self, 'f')`"),
    ("(lambda: 1)()", "a lambda"),
    ("(x := 1)", "an assignment expression (:=)"),
    ("[x for x in y]", "a comprehension"),
    ("{x for x in y}", "a comprehension"),
    ("len(x for x in y)", "a generator expression"),
    ("f'{self.x}'", "an f-string"),
    ("self.__class__", "the attribute .__class__"),
    ("().__class__.__bases__[0].__subclasses__()", "the attribute .__subclasses__"),
    ("__builtins__", "the name __builtins__"),
    ("__import__", "the name __import__"),
    ("getattr(self, '__class__')", "getattr() of the attribute __class__"),
    ("getattr(self, name)", "getattr() with an attribute name that is not a constant string"),
    ("getattr(self, 'x', default=1)", "a keyword argument"),
    ("len(*x)", "a starred value"),
    ("type(a, b, c)", "type() with 3 arguments"),
    ("9 ** 9 ** 9", "the power operator **"),
    ("1 << 10000", "a shift"),
    ("{'a': 1}", "a dict"),
    ("...", "the literal ellipsis"),
    ("await x", "await"),
]


@pytest.mark.parametrize("guard,what", FORBIDDEN, ids=[f[0] for f in FORBIDDEN])
def test_each_forbidden_construct_is_named(guard, what):
    with pytest.raises(ValueError) as info:
        check_expression(guard, ValueError)
    assert str(info.value).startswith(f"{what}") and "is not allowed in a guard" in str(info.value)


@pytest.mark.parametrize("guard", ["batches, 1", "(self.rank == 0, True)", "a if c else b, d"])
def test_a_tuple_is_no_condition(guard):
    """`a, b` is always true, and unparenthesised it would split the inserted call's arguments (on_exit's lambda)."""
    with pytest.raises(ValueError, match="a tuple is not a condition"):
        check_expression(guard, ValueError)


def test_length_and_depth_are_bounded():
    with pytest.raises(ValueError, match="1001 characters long; a guard is one line of at most 1000"):
        check_expression("a or " * 199 + "abcdef", ValueError)
    with pytest.raises(ValueError, match="nested more than 40 levels"):
        check_expression("-" * 60 + "1", ValueError)


def write(tmp_path, text):
    path = tmp_path / "g.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("place", ["role", "guard", "point"])
@pytest.mark.parametrize("guard", [ISSUE, "self.__class__", "(lambda: 1)()", "[x for x in y]", "f'{x}'"])
def test_validate_refuses_it_at_the_guard_s_line_and_says_what_is_allowed(tmp_path, place, guard):
    quoted = '"' + guard.replace('"', '\\"') + '"'
    if place == "role":
        text, line = RECIPE.replace("ref: self.opt is None", f"ref: {quoted}"), 9
    elif place == "guard":
        text, line = RECIPE.replace("points:\n", f"guard: {quoted}\npoints:\n"), 10
    else:
        text, line = RECIPE.replace("at: method_start}", f"at: method_start, guard: {quoted}}}"), 11
    path = write(tmp_path, text)
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert re.search(rf"error: {re.escape(str(path))}:{line}:\d+: .+ is not allowed in a guard", result.output), result.output
    assert f"allowed: {ALLOWED}" in result.output
    assert "0 valid, 1 invalid" in result.output


def test_a_good_guard_validates_and_shows(tmp_path):
    path = write(tmp_path, RECIPE.replace("points:\n", "guard: getattr(self, 'ready', False) and self.rank % 2 == 0\n"
                                          "points:\n"))
    assert CliRunner().invoke(main, ["validate", str(path)]).exit_code == 0
    shown = CliRunner().invoke(main, ["show", str(path)])
    assert shown.exit_code == 0
    assert (", lambda: getattr(self, 'ready', False) and self.rank % 2 == 0)  # patchkit:g"
            in shown.output), shown.output


@pytest.mark.parametrize("guard,chains", [
    ("self.config.use_dynamic_bsz", [("self.config.use_dynamic_bsz", 'getattr(self.config, "use_dynamic_bsz", None)')]),
    ("not forward_only and self.config.x.y", [("self.config.x.y", 'getattr(getattr(self.config, "x", None), "y", None)')]),
    ("self.a.b or getattr(self.c.d, 'e', 0)", [("self.a.b", 'getattr(self.a, "b", None)'),
                                               ("self.c.d", 'getattr(self.c, "d", None)')]),
    ("self.actor_optimizer is None", []), ("type(self).__name__", []), ("1/0 == 1", []),
    ("getattr(getattr(self, 'cfg', None), 'profile', False)", []),
])
def test_attribute_chains_that_may_not_exist_are_named_with_the_read_that_cannot_fail(guard, chains):
    from patchkit.recipe.guards import uncertain_chains

    assert uncertain_chains(guard) == chains


def test_validate_warns_of_a_chain_at_its_line_and_passes(tmp_path):
    path = write(tmp_path, RECIPE.replace("at: method_start}", "at: method_start, guard: self.config.x.y}"))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0 and "1 valid, 0 invalid" in result.output
    (warning,) = [ln for ln in result.output.splitlines() if ln.startswith("warning: ")]
    assert warning.startswith(f"warning: {path}:11:") and "points[0].guard reads self.config.x.y" in warning
    assert "patchkit reads that as false" in warning and 'getattr(getattr(self.config, "x", None), "y", None)' in warning


def test_the_built_in_recipes_validate_without_a_warning():
    result = CliRunner().invoke(main, ["validate", *map(str, sorted(RECIPES.glob("*.yaml")))])
    assert result.exit_code == 0 and "warning" not in result.output
