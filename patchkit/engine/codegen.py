"""What patchkit inserts, as libcst nodes built from validated recipe values.

The statement at a point is ``_patchkit_runtime.step(key)`` (or ``start``,
``refuse``), under ``if guard:`` when there is one; ``on_exit`` is an
``@_patchkit_runtime.on_exit(key[, guard])`` decorator whose lambdas take the
target's own parameters.  Strings become JSON-escaped ASCII literals (valid
Python, whatever the target file's encoding), names were validated when the
recipe was loaded, and guard expressions were parsed then (here libcst parses
them again into nodes).  Every statement ends with the marker comment
``# patchkit:<recipe-id>`` on its one line, so it can be found and taken out
again.  The module header is kept as text (:func:`header_lines`, which
``show`` prints and the examples leave out), and libcst parses it into nodes.
"""

from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from patchkit import DISTRIBUTION
from patchkit.core.model import MARKER, Point, Settings

RUNTIME = "_patchkit_runtime"
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
    up differently), the points call a stand-in that does nothing and one line
    on stderr says which recipe, which interpreter and what to install.
    """
    rid = settings.id
    tail = marker(rid)
    labelled = any(p.action in ("range", "mark") for p in settings.active_points())
    kwargs = ", ".join(f"{k}={literal(v)}" for k, v in settings.runtime_settings().items())
    said = literal(f"patchkit: {rid} is applied to %s, but %s cannot import patchkit.runtime (%s); it runs without "
                   f"profiling. Install the same patchkit build ({DISTRIBUTION}, not the registry's patchkit) in that "
                   f"environment, or take the lines out with `patchkit revert {rid}`.\n")
    return [  # plain blocks, one statement a line: a formatter has nothing to split, so every line keeps its marker
        f"try:{tail}",
        f"    import patchkit.runtime as {RUNTIME}{tail}",
        f"except Exception as _patchkit_missing:{tail}",
        f"    {RUNTIME} = {NOOP.format(NOOP_LABELLED if labelled else '')}{tail}",
        f"    try:{tail}",
        f'        __import__("sys").stderr.write({said} % (__name__, __import__("sys").executable, '
        f"repr(_patchkit_missing))){tail}",
        f"    except Exception:{tail}",
        f"        pass{tail}",
        f"{RUNTIME}.configure({literal(rid)}, {kwargs}){tail}",
    ]


class CannotWrite(ValueError):
    """What the line would have to hold cannot go on one line of Python (the message says what)."""


def marker_comment(recipe_id: str) -> cst.TrailingWhitespace:
    """``  # patchkit:<id>`` at the end of an inserted line."""
    return cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(f"# {MARKER}:{recipe_id}"))


def header_statements(settings: Settings) -> List[cst.BaseStatement]:
    """:func:`header_lines` as libcst statements, ready to go into any module (its own newline is used).

    The ``try`` and ``except`` blocks keep the header's four spaces whatever
    the target file indents with (a parsed block that uses the default
    indentation leaves it to the module it ends up in).
    """
    parsed = cst.parse_module("".join(line + "\n" for line in header_lines(settings)))
    pinned = parsed.visit(_PinIndent(parsed.default_indent))
    return list(pinned.body)


class _PinIndent(cst.CSTTransformer):
    """Every block of the header keeps its own indentation (``None`` would leave it to the target module)."""

    def __init__(self, indent: str) -> None:
        super().__init__()
        self.indent = indent

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        return updated_node.with_changes(indent=self.indent)


def _expression(text: str) -> cst.BaseExpression:
    """A guard or role expression (validated when the recipe was loaded) as a libcst node."""
    try:
        return cst.parse_expression(text)
    except cst.ParserSyntaxError as exc:
        raise CannotWrite(f"libcst cannot read the expression {text!r} ({exc.message})") from None


def _parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.with_changes(lpar=[cst.LeftParen(), *expr.lpar], rpar=[*expr.rpar, cst.RightParen()])


def _str_node(value: str) -> cst.SimpleString:
    return cst.SimpleString(literal(value))


def _key_and_guard(settings: Settings, point: Point):
    """The capture key (a literal, or an expression choosing the role) and the guard, as expressions."""
    recipe = settings.recipe
    guards = [g for g in (recipe.guard, point.guard) if g]
    key: cst.BaseExpression = _str_node(recipe.id)
    if recipe.roles:
        role = settings.choice("role")
        roles = dict(recipe.roles)
        if role in (None, "all"):  # "id/actor" if (...) else "id/ref" if (...) else None
            key = cst.Name("None")
            for name, expr in reversed(recipe.roles):
                key = cst.IfExp(test=_parenthesized(_expression(expr)), body=_str_node(f"{recipe.id}/{name}"),
                                orelse=key)
        else:
            key = _str_node(f"{recipe.id}/{role}")
            guards.append(roles[role])
    parsed = [_expression(g) for g in guards]
    guard = parsed[0] if len(parsed) == 1 else None
    if len(parsed) > 1:  # (a) and (b) and (c)
        guard = _parenthesized(parsed[0])
        for g in parsed[1:]:
            guard = cst.BooleanOperation(left=guard, operator=cst.And(), right=_parenthesized(g))
    return key, guard


def _runtime(name: str, *args: cst.BaseExpression) -> cst.Call:
    """``_patchkit_runtime.<name>(args...)``."""
    return cst.Call(func=cst.Attribute(value=cst.Name(RUNTIME), attr=cst.Name(name)), args=[cst.Arg(a) for a in args])


def point_statement(settings: Settings, point: Point, part: str = "") -> cst.BaseStatement:
    """The statement at a point: ``_patchkit_runtime.step(key)``, or ``if guard: ...`` on one line.

    ``part``: for a range around a statement, ``"open"`` or ``"close"``.

    Raises :class:`CannotWrite` for a guard libcst cannot read.
    """
    key, guard = _key_and_guard(settings, point)
    if point.action == "refuse":  # the whole recipe, whatever the role: guard and reason only
        call = _runtime("refuse", _str_node(settings.id), _str_node(point.reason))
        guard = _expression(point.guard) if point.guard else None
    elif point.action == "range":  # around a statement: opened before it, closed after it (closing needs no guard)
        call = _runtime("range_end" if part == "close" else "range_start", key, _str_node(point.name))
        guard = None if part == "close" else guard
    elif point.action == "mark":
        call = _runtime("mark", key, _str_node(point.name))
    else:
        call = _runtime(point.action, key)
    tail = marker_comment(settings.id)
    if guard is None:
        return cst.SimpleStatementLine(body=[cst.Expr(call)], trailing_whitespace=tail)
    return cst.If(test=guard, body=cst.SimpleStatementSuite(body=[cst.Expr(call)], trailing_whitespace=tail))


class _OneLine(cst.CSTTransformer):
    """A default value written over several lines, on one (comments dropped): it goes into a one-line lambda."""

    def leave_ParenthesizedWhitespace(self, original_node, updated_node) -> cst.SimpleWhitespace:
        return cst.SimpleWhitespace(" ")

    def leave_SimpleWhitespace(self, original_node, updated_node) -> cst.SimpleWhitespace:
        return cst.SimpleWhitespace(" ") if "\\" in updated_node.value else updated_node  # a backslash continuation


def _plain(param: cst.Param) -> cst.Param:
    """The parameter without its annotation or the source's spacing: ``name``, ``*name``, ``name=default``."""
    default = param.default.visit(_OneLine()) if param.default is not None else None
    if default is not None and any(ch in code(default) for ch in "\r\n"):
        raise CannotWrite(f"on_exit repeats the parameters in a one-line lambda, "
                          f"but the default value of parameter {param.name.value} spans lines")
    return cst.Param(name=param.name, default=default, star=param.star,
                     equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                           whitespace_after=cst.SimpleWhitespace("")) if default else cst.MaybeSentinel.DEFAULT)


def lambda_parameters(params: cst.Parameters) -> cst.Parameters:
    """The parameters of a def as a lambda takes them: the same names, kinds and defaults, no annotations."""
    star = params.star_arg
    return cst.Parameters(
        posonly_params=[_plain(p) for p in params.posonly_params],
        posonly_ind=cst.ParamSlash() if params.posonly_params else cst.MaybeSentinel.DEFAULT,
        params=[_plain(p) for p in params.params],
        star_arg=_plain(star) if isinstance(star, cst.Param) else cst.ParamStar() if isinstance(star, cst.ParamStar)
        else cst.MaybeSentinel.DEFAULT,
        kwonly_params=[_plain(p) for p in params.kwonly_params],
        star_kwarg=_plain(params.star_kwarg) if params.star_kwarg is not None else None,
    )


def _generic_parameters(point: Point) -> cst.Parameters:
    """``self, *args, **kwargs`` (or without ``self``): for ``show``, which has no target at hand."""
    self_ = [] if point.cls is None else [cst.Param(cst.Name("self"))]
    return cst.Parameters(params=self_, star_arg=cst.Param(cst.Name("args"), star="*"),
                          star_kwarg=cst.Param(cst.Name("kwargs"), star="**"))


def exit_decorator_node(settings: Settings, point: Point, func: Optional[cst.FunctionDef] = None) -> cst.Decorator:
    """``@_patchkit_runtime.on_exit(key[, guard])`` with lambdas taking the target's own parameters.

    The target is a method, or a module-level function (no ``self``).
    Raises :class:`CannotWrite` when a default value cannot be repeated on one line.
    """
    key, guard = _key_and_guard(settings, point)
    if isinstance(key, cst.SimpleString) and guard is None:
        args: List[cst.BaseExpression] = [key]
    else:
        params = lambda_parameters(func.params) if func is not None else _generic_parameters(point)
        args = [key if isinstance(key, cst.SimpleString) else cst.Lambda(params, key)]
        if guard is not None:
            args.append(cst.Lambda(params, guard))
    if point.action == "range":  # @ranged(key, name[, guard]): the range around every call of the function
        args.insert(1, _str_node(point.name))
        return cst.Decorator(decorator=_runtime("ranged", *args), trailing_whitespace=marker_comment(settings.id))
    return cst.Decorator(decorator=_runtime("on_exit", *args), trailing_whitespace=marker_comment(settings.id))


def code(node: cst.CSTNode) -> str:
    """The source of a node (a statement or decorator: its one line, without the newline)."""
    return cst.Module(body=[]).code_for_node(node).rstrip("\r\n")


def call_statement(settings: Settings, point: Point, part: str = "") -> str:
    """:func:`point_statement` as ``patchkit show`` prints it."""
    return code(point_statement(settings, point, part))


def shown(settings: Settings, point: Point) -> List[str]:
    """What a point inserts, as ``patchkit show`` prints it: a decorator, one statement, or the two of a range."""
    if point.at in ("on_exit", "method"):
        return [exit_decorator(settings, point)]
    if point.action == "range":
        return [call_statement(settings, point, "open"), "<the statement>", call_statement(settings, point, "close")]
    return [call_statement(settings, point)]


def exit_decorator(settings: Settings, point: Point, func: Optional[cst.FunctionDef] = None) -> str:
    """:func:`exit_decorator_node` as ``patchkit show`` prints it (without a target: ``self, *args, **kwargs``)."""
    return code(exit_decorator_node(settings, point, func))
