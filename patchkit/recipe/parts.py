"""A recipe's options, roles and examples."""

from __future__ import annotations

from typing import Any, Tuple

from patchkit.core import model as m
from patchkit.recipe.reader import Reader, check_length, is_identifier, name_of

OPTION_KEYS = ("choices", "default", "help")
EXAMPLE_KEYS = ("name", "options", "before", "after", "unchanged", "reason")
OVERRIDABLE = ("backend", "profiler", "schedule")  # the sections KEY=VALUE reaches; no option may take these names


def options(r: Reader) -> Tuple[m.Option, ...]:
    opts = r.get(("options",))
    if not isinstance(opts, dict) or not opts:
        raise r.fail(("options",), "options must be a mapping of option names",
                     "write e.g. `granularity: {choices: [mini, micro], default: mini}`")
    out = []
    for name in opts:
        here = ("options", name)
        check_length(r, here, name, "option name", key=True)
        if not is_identifier(name) or name in OVERRIDABLE:
            raise r.fail(here, f"option name {name!r} is not a valid name", "use a plain lower-case word such as granularity", key=True)
        o = r.mapping(here, OPTION_KEYS, ("choices", "default"))
        choices = r.strings(here + ("choices",))
        for i, c in enumerate(choices):
            check_length(r, here + ("choices", i), c, "choice")
            if not is_identifier(c):
                raise r.fail(here + ("choices", i), f"choice {c!r} is not a plain word", "use letters, digits and _")
        default = r.string(here + ("default",))
        if default not in choices:
            raise r.fail(here + ("default",), f"default {default!r} is not one of the choices {choices}",
                         "pick the default among the choices")
        out.append(m.Option(name, tuple(choices), default, r.string(here + ("help",)) if "help" in o else ""))
    return tuple(out)


def roles(r: Reader, options: Tuple[m.Option, ...]) -> Tuple[Tuple[str, str], ...]:
    roles = r.get(("roles",))
    if not isinstance(roles, dict) or not roles:
        raise r.fail(("roles",), "roles must map each role name to an expression",
                     "write e.g. `ref: self.actor_optimizer is None`")
    out = []
    for name in roles:
        check_length(r, ("roles", name), name, "role name", key=True)
        if not is_identifier(name):
            raise r.fail(("roles", name), f"role name {name!r} is not a plain word", "use letters, digits and _", key=True)
        out.append((name, r.expression(("roles", name))))
    option = next((o for o in options if o.name == "role"), None)
    if option is None:
        raise r.fail(("roles",), "roles need an option named `role` that picks one of them or all",
                     "add `options: {role: {choices: [" + ", ".join(n for n, _ in out) + ", all], default: all}}`")
    for choice in option.choices:
        if choice != "all" and choice not in dict(out):
            raise r.fail(("options", "role", "choices"), f"role {choice!r} has no expression under roles",
                         f"add `{choice}: <expression>` under roles, or remove the choice")
    return tuple(out)


def when(r: Reader, here: Tuple[Any, ...], options: Tuple[m.Option, ...]) -> Tuple[Tuple[str, str], ...]:
    names = {o.name: o for o in options}
    if not names:
        raise r.fail(here, f"{name_of(here)} names option values, but the recipe declares no options",
                     "declare them under `options:` or remove this key", key=True)
    w = r.mapping(here, names)
    out = []
    for name, value in w.items():
        if value not in names[name].choices:
            raise r.fail(here + (name,), f"{value!r} is not a choice of option {name}",
                         f"use one of: {', '.join(names[name].choices)}")
        out.append((name, value))
    return tuple(out)


def examples(r: Reader, options: Tuple[m.Option, ...]) -> Tuple[m.Example, ...]:
    exs = r.get(("examples",))
    if not isinstance(exs, list):
        raise r.fail(("examples",), "examples must be a list", "write `- name: ...` entries")
    out = []
    for i in range(len(exs)):
        here = ("examples", i)
        e = r.mapping(here, EXAMPLE_KEYS, ("name", "before"))
        before = r.string(here + ("before",), "a block of Python source")
        has_after = "after" in e
        unchanged = r.boolean(here + ("unchanged",)) if "unchanged" in e else False
        if has_after == unchanged:
            raise r.fail(here, "an example needs either `after:` or `unchanged: true`",
                         "give the expected source, or say that the input must stay unchanged")
        chosen = when(r, here + ("options",), options) if "options" in e else ()
        out.append(m.Example(name=r.string(here + ("name",)), before=before,
                             after=r.string(here + ("after",), "a block of Python source") if has_after else None,
                             options=chosen, reason=r.string(here + ("reason",)) if "reason" in e else None,
                             where=r.where(here)))
    return tuple(out)
