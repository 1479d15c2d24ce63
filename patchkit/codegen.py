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

from . import DISTRIBUTION
from .model import MARKER, Point, Settings

RUNTIME = "_patchkit_runtime"
# What the points call where patchkit.runtime cannot be imported: the same names, doing nothing.
NOOP = ('__import__("types").SimpleNamespace(configure=lambda *a, **k: None, start=lambda *a: None, '
        'step=lambda *a: None, refuse=lambda *a: None, on_exit=lambda *a: lambda f: f)')


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
    """The module-level lines: import the runtime (or a no-op stand-in), then hand it the recipe's settings.

    A patched package must never fail to import because of patchkit: where
    ``patchkit.runtime`` cannot be imported (another environment, a node set
    up differently), the points call a stand-in that does nothing and one line
    on stderr says which recipe, which interpreter and what to install.
    """
    rid = settings.id
    tail = marker(rid)
    kwargs = ", ".join(f"{k}={literal(v)}" for k, v in settings.runtime_settings().items())
    said = literal(f"patchkit: {rid} is applied to %s, but %s cannot import patchkit.runtime (%s); it runs without "
                   f"profiling. Install {DISTRIBUTION} in that environment, or take the lines out with "
                   f"`patchkit revert {rid}`.\n")
    return [
        f"try:{tail}",
        f"    import patchkit.runtime as {RUNTIME}{tail}",
        f"except Exception as _patchkit_missing:{tail}",
        f"    {RUNTIME} = {NOOP}{tail}",
        f'    try: __import__("sys").stderr.write({said} % (__name__, __import__("sys").executable, '
        f"repr(_patchkit_missing))){tail}",
        f"    except Exception: pass{tail}",
        f"{RUNTIME}.configure({literal(rid)}, {kwargs}){tail}",
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
