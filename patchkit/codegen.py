"""The lines patchkit inserts, built from validated recipe values.

Strings become JSON-escaped ASCII literals (valid Python, whatever the
target file's encoding), names were validated when the recipe was loaded,
and guard expressions were parsed then.  Every line ends with the marker
``# patchkit:<recipe-id>`` so it can be found and taken out again.
"""

from __future__ import annotations

import ast
import copy
from typing import Any, List, Optional

from .model import MARKER, Point, Settings

RUNTIME = "_patchkit_runtime"


def marker(recipe_id: str) -> str:
    return f"  # {MARKER}:{recipe_id}"


def literal(value: Any) -> str:
    """Python source for a plain value; never anything but a literal."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (tuple, list)):
        items = [literal(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    raise TypeError(f"no literal for {type(value).__name__}")


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(text: str) -> str:
    """A double-quoted, ASCII-only Python literal equal to ``text`` (any code point, surrogates too)."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif " " <= ch <= "~":
            out.append(ch)
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def header_lines(settings: Settings) -> List[str]:
    """The two module-level lines: the runtime import and the recipe's settings."""
    rid = settings.id
    kwargs = ", ".join(f"{k}={literal(v)}" for k, v in settings.runtime_settings().items())
    return [
        f"import patchkit.runtime as {RUNTIME}{marker(rid)}",
        f"{RUNTIME}.configure({literal(rid)}, {kwargs}){marker(rid)}",
    ]


def _key_and_guard(settings: Settings, point: Point):
    """The capture key (a literal or an expression choosing the role) and the guard."""
    recipe = settings.recipe
    guards = [g for g in (recipe.guard, point.guard) if g]
    key = literal(recipe.id)
    if recipe.roles:
        role = settings.choice("role")
        roles = dict(recipe.roles)
        if role in (None, "all"):
            key = " else ".join(f"{literal(recipe.id + '/' + name)} if ({expr})" for name, expr in recipe.roles)
            key += " else None"
        else:
            key = literal(f"{recipe.id}/{role}")
            guards.append(roles[role])
    guard = " and ".join(f"({g})" for g in guards) if len(guards) > 1 else (guards[0] if guards else None)
    return key, guard


def call_statement(settings: Settings, point: Point) -> str:
    key, guard = _key_and_guard(settings, point)
    if point.action == "refuse":  # the whole recipe, whatever the role: guard and reason only
        key, guard = literal(settings.id), point.guard
        call = f"{RUNTIME}.refuse({key}, {literal(point.reason)})"
    else:
        call = f"{RUNTIME}.{point.action}({key})"
    return (f"if {guard}: {call}" if guard else call) + marker(settings.id)


def exit_decorator(settings: Settings, point: Point, func: Optional[ast.AST] = None) -> str:
    """``@_patchkit_runtime.on_exit(key[, guard])`` with lambdas taking the target's own parameters.

    The target is a method, or a module-level function (no ``self``).
    """
    key, guard = _key_and_guard(settings, point)
    if func is None:  # no target at hand (``patchkit show``): a generic signature
        func = ast.parse(f"def _({'' if point.cls is None else 'self, '}*args, **kwargs): pass").body[0]
    args = copy.deepcopy(func.args)
    for arg in args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]:
        arg.annotation = None
        arg.type_comment = None

    def lam(expr: str) -> str:
        node = ast.Expression(ast.Lambda(args=args, body=ast.parse(expr, mode="eval").body))
        return ast.unparse(ast.fix_missing_locations(node))

    parts = [lam(key) if key.endswith("else None") else key]
    if guard:
        parts.append(lam(guard))
    return f"@{RUNTIME}.on_exit({', '.join(parts)}){marker(settings.id)}"
