"""What patchkit inserts, as text: the module header and the one line at each point.  No libcst.

The statement at a point is ``_patchkit_runtime.step(key)`` (or ``start``,
``refuse``, ``mark``, ``range_start``/``range_end``), with the guard as a last
argument ``lambda: guard`` when there is one (and the key as ``lambda: ...``
when the role is chosen as the line runs), so the runtime evaluates them and
reads one that raises as false; a point whose kind's form is a decorator
(:data:`patchkit.recipe.pointkind.DECORATOR`) is an
``@_patchkit_runtime.on_exit(key[, guard])`` decorator (``ranged(key, name[,
guard])`` for a range) whose lambdas take the target's own parameters.
Strings become escaped ASCII literals (valid Python, whatever the target
file's encoding), names and guard expressions were validated when the recipe
was loaded.  Every line ends with
the marker comment ``# patchkit:<recipe-id>``, so it can be found and taken
out again.

``patchkit show`` prints these lines as they are; the engine
(:mod:`patchkit.engine.codegen`) has libcst parse the same text into the
nodes it inserts, so what is shown is what is written.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from patchkit import DISTRIBUTION
from patchkit.core.model import MARKER, Point, Settings
from patchkit.recipe.kinds import KINDS
from patchkit.recipe.pointkind import DECORATOR

RUNTIME = "_patchkit_runtime"
LINES = 2  # what the lines need of the runtime (patchkit.runtime.LINES): 2, guards and chosen roles as lambdas
# What the points call where patchkit.runtime cannot be imported: the same names, doing nothing.
NOOP = ('__import__("types").SimpleNamespace(configure=lambda *a, **k: None, start=lambda *a: None, '
        'step=lambda *a: None, refuse=lambda *a: None, on_exit=lambda *a: lambda f: f{})')
NOOP_LABELLED = (", mark=lambda *a: None, range_start=lambda *a: None, range_end=lambda *a: None, "
                 "ranged=lambda *a: lambda f: f")  # only in modules whose points set ranges or marks


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
    up differently), or is a build older than these lines need (``require``),
    the points call a stand-in that does nothing and one line on stderr says
    which recipe, which interpreter and what to install.
    """
    rid = settings.id
    tail = marker(rid)
    labelled = any(p.action in ("range", "mark") for p in settings.active_points())
    kwargs = ", ".join(f"{k}={literal(v)}" for k, v in settings.runtime_settings().items())
    said = literal(f"patchkit: {rid} is applied to %s, but %s cannot import patchkit.runtime, or imports an older "
                   f"build than these lines need (%s); it runs without "
                   f"profiling. Install the same patchkit build ({DISTRIBUTION}, not the registry's patchkit) in that "
                   f"environment, or take the lines out with `patchkit revert {rid}`.\n")
    return [  # plain blocks, one statement a line: a formatter has nothing to split, so every line keeps its marker
        f"try:{tail}",
        f"    import patchkit.runtime as {RUNTIME}{tail}",
        f"    {RUNTIME}.require({LINES}){tail}",
        f"except Exception as _patchkit_missing:{tail}",
        f"    {RUNTIME} = {NOOP.format(NOOP_LABELLED if labelled else '')}{tail}",
        f"    try:{tail}",
        f'        __import__("sys").stderr.write({said} % (__name__, __import__("sys").executable, '
        f"repr(_patchkit_missing))){tail}",
        f"    except Exception:{tail}",
        f"        pass{tail}",
        f"{RUNTIME}.configure({literal(rid)}, {kwargs}){tail}",
    ]


def guards(settings: Settings, point: Point) -> List[str]:
    """Every expression a point's line holds: the recipe's and the point's guards, and the roles' expressions."""
    if point.action == "refuse":
        return [point.guard] if point.guard else []
    recipe = settings.recipe
    return [g for g in (recipe.guard, point.guard) if g] + [expr for _, expr in recipe.roles]


def _key_and_guard(settings: Settings, point: Point) -> Tuple[str, bool, Optional[str]]:
    """The capture key (a literal, or an expression choosing the role), whether it is a literal, and the guard."""
    recipe = settings.recipe
    conditions = [g for g in (recipe.guard, point.guard) if g]
    key, plain = literal(recipe.id), True
    if recipe.roles:
        role = settings.choice("role")
        roles = dict(recipe.roles)
        if role in (None, "all"):  # "id/actor" if (...) else "id/ref" if (...) else None
            key, plain = "None", False  # the key is chosen when the line runs
            for name, expr in reversed(recipe.roles):
                key = f"{literal(f'{recipe.id}/{name}')} if ({expr}) else {key}"
        else:
            key = literal(f"{recipe.id}/{role}")
            conditions.append(roles[role])
    if not conditions:
        return key, plain, None
    if len(conditions) == 1:
        return key, plain, conditions[0]
    return key, plain, " and ".join(f"({g})" for g in conditions)  # (a) and (b) and (c)


def _call(name: str, *args: str) -> str:
    return f"{RUNTIME}.{name}({', '.join(args)})"


def statement(settings: Settings, point: Point, part: str = "") -> str:
    """The line at a point, marker included: ``_patchkit_runtime.step(key)``, or ``step(key, lambda: guard)``.

    The guard, and a role chosen when the line runs, are lambdas the runtime
    calls: one that raises is false (said once on stderr), never an exception
    in the job, and a finished capture never calls them.  A lambda, not an
    ``if``, because only a call lets the runtime catch what the expression
    raises on one line; it reads the function's locals (``not forward_only``)
    as the ``if`` did.  ``part``: for a range around a statement, ``"open"``
    or ``"close"``.
    """
    key, plain, guard = _key_and_guard(settings, point)
    key = key if plain else f"lambda: {key}"
    if point.action == "refuse":  # the whole recipe, whatever the role: guard and reason only
        guard = point.guard or None
    condition = [f"lambda: {guard}"] if guard is not None else []
    if point.action == "refuse":
        call = _call("refuse", literal(settings.id), literal(point.reason), *condition)
    elif point.action == "range" and part == "close":  # closing needs no guard: it closes what was opened
        call = _call("range_end", key, literal(point.name))
    elif point.action in ("range", "mark"):  # around a statement: opened before it, closed after it
        call = _call("mark" if point.action == "mark" else "range_start", key, literal(point.name), *condition)
    else:
        call = _call(point.action, key, *condition)
    return call + marker(settings.id)


def generic_parameters(point: Point) -> str:
    """``self, *args, **kwargs`` (or without ``self``): the lambdas' parameters where no target is at hand."""
    return "*args, **kwargs" if point.cls is None else "self, *args, **kwargs"


def takes_parameters(settings: Settings, point: Point) -> bool:
    """Whether the decorator's key or guard is a lambda (that repeats the target's parameters)."""
    _, plain, guard = _key_and_guard(settings, point)
    return guard is not None or not plain


def decorator(settings: Settings, point: Point, parameters: Optional[str] = None) -> str:
    """``@_patchkit_runtime.on_exit(key[, guard])`` (``ranged(key, name[, guard])`` for a range), marker included.

    A key or guard that depends on the call is a lambda taking ``parameters``:
    the target's own, as a lambda writes them, or :func:`generic_parameters`.
    """
    key, plain, guard = _key_and_guard(settings, point)
    params = generic_parameters(point) if parameters is None else parameters
    lam = f"lambda {params}: " if params else "lambda: "
    args = [key if plain else lam + key]
    if guard is not None:
        args.append(lam + guard)
    if point.action == "range":  # @ranged(key, name[, guard]): the range around every call of the function
        args.insert(1, literal(point.name))
        return "@" + _call("ranged", *args) + marker(settings.id)
    return "@" + _call("on_exit", *args) + marker(settings.id)


def shown(settings: Settings, point: Point) -> List[str]:
    """What a point inserts, as ``patchkit show`` prints it: a decorator, one statement, or the two of a range."""
    if KINDS[point.at].form == DECORATOR:
        return [decorator(settings, point)]
    if point.action == "range":
        return [statement(settings, point, "open"), "<the statement>", statement(settings, point, "close")]
    return [statement(settings, point)]
