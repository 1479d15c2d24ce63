"""What patchkit inserts, as the libcst nodes the codemod puts into a target.

The text of every inserted line is made in one place, :mod:`patchkit.engine.lines`
(which ``patchkit show`` prints without loading libcst); here libcst parses
that text into nodes, so what is shown is what is written.  The guard and
role expressions were validated when the recipe was loaded; one that libcst
cannot read (a syntax newer than libcst's grammar) is a :class:`CannotWrite`
naming the expression.  An ``on_exit`` decorator's lambdas take the target's
own parameters, written here from the target's ``def``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import List, Optional

import libcst as cst

from patchkit.core.model import MARKER, Point, Settings
from patchkit.engine.lines import decorator, guards, header_lines, statement, takes_parameters


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


def _parsed(text: str) -> cst.BaseStatement:
    """One statement (or a decorated stub) parsed; :class:`CannotWrite` when libcst cannot read it."""
    try:
        return _parse(text)
    except cst.ParserSyntaxError as exc:
        raise CannotWrite(f"libcst cannot read the line {text.splitlines()[0]!r} ({exc.message})") from None


@lru_cache(maxsize=512)
def _parse(text: str) -> cst.BaseStatement:
    """Nodes are immutable, so one parse serves every file."""
    return cst.parse_statement(text + "\n")


def _readable(settings: Settings, point: Point) -> None:
    """Raise :class:`CannotWrite` for a guard or role expression libcst cannot read."""
    for text in guards(settings, point):
        try:
            cst.parse_expression(text)
        except cst.ParserSyntaxError as exc:
            raise CannotWrite(f"libcst cannot read the expression {text!r} ({exc.message})") from None


def point_statement(settings: Settings, point: Point, part: str = "") -> cst.BaseStatement:
    """The statement at a point (:func:`patchkit.engine.lines.statement`) as a node.

    ``part``: for a range around a statement, ``"open"`` or ``"close"``.
    Raises :class:`CannotWrite` for a guard libcst cannot read.
    """
    _readable(settings, point)
    return _parsed(statement(settings, point, part))


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


def exit_decorator_node(settings: Settings, point: Point, func: Optional[cst.FunctionDef] = None) -> cst.Decorator:
    """``@_patchkit_runtime.on_exit(key[, guard])`` with lambdas taking the target's own parameters.

    The target is a method, or a module-level function (no ``self``); without one, ``self, *args, **kwargs``.
    Raises :class:`CannotWrite` when a default value cannot be repeated on one line.
    """
    _readable(settings, point)
    params = None
    if func is not None and takes_parameters(settings, point):
        params = code(lambda_parameters(func.params))
    stub = _parsed(decorator(settings, point, params) + "\ndef _patchkit_stub(): pass")
    return stub.decorators[0]


def code(node: cst.CSTNode) -> str:
    """The source of a node (a statement or decorator: its one line, without the newline)."""
    return cst.Module(body=[]).code_for_node(node).rstrip("\r\n")


def call_statement(settings: Settings, point: Point, part: str = "") -> str:
    """:func:`point_statement` as source: the one line, marker included."""
    return code(point_statement(settings, point, part))


def exit_decorator(settings: Settings, point: Point, func: Optional[cst.FunctionDef] = None) -> str:
    """:func:`exit_decorator_node` as source (without a target: ``self, *args, **kwargs``)."""
    return code(exit_decorator_node(settings, point, func))
