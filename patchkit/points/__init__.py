"""Injection points: one small module per kind, a registry from the YAML word to it.

Each finder gets a :class:`Scan` of one method (every block, statement,
loop and call in it, nested functions and classes left out) and a
:class:`~patchkit.model.Point`, and returns the :class:`Site` objects where
the point's line goes, or raises :class:`NotFound` with a precise reason.

The scan reads Python's own syntax tree, which the engine already has for
the whole module: finding costs a walk over one method, and only the new
lines are built with libcst (see :mod:`patchkit.engine`).
"""

from __future__ import annotations

import ast
from typing import Callable, Dict, List, Optional, Tuple

from ..model import Point
from ..record import Record

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
LOOPS = (ast.For, ast.AsyncFor, ast.While)
SIMPLE = (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign)


class NotFound(Exception):
    """The point does not resolve; ``line`` is a 1-based line of the target file when known."""

    def __init__(self, reason: str, line: Optional[int] = None):
        super().__init__(reason)
        self.reason = reason
        self.line = line


class Site(Record):
    """Insert before ``block[index]`` (``index == len(block)``: after the last statement)."""

    block: List[ast.stmt]
    index: int
    owner: ast.AST  # the statement whose body ``block`` is


class Decorate(Record):
    """Add an innermost decorator to ``func``."""

    func: ast.AST


class Loop(Record):
    node: ast.stmt  # For, AsyncFor or While
    block: List[ast.stmt]  # the block that holds the loop statement
    index: int
    owner: ast.AST
    parents: Tuple[ast.AST, ...]  # enclosing loops, outermost first


class Stmt(Record):
    node: ast.stmt
    block: List[ast.stmt]
    index: int
    owner: ast.AST
    call: Optional[str]  # dotted callee when the statement's value is a call


class Scan:
    """Everything the finders need about one method (or module-level function), gathered in one walk."""

    def __init__(self, func: ast.AST, cls: Optional[str], method: str):
        self.func, self.cls, self.method = func, cls, method
        self.statements: List[Stmt] = []
        self.loops: List[Loop] = []
        self.calls: List[Tuple[str, ast.Call, Tuple[ast.AST, ...]]] = []  # callee, call, enclosing loops
        self.returns: List[ast.Return] = []
        self.yields: List[ast.AST] = []
        self.continues: List[Tuple[ast.Continue, Tuple[ast.AST, ...]]] = []  # with enclosing loops

    @property
    def qualname(self) -> str:
        return self.method if self.cls is None else f"{self.cls}.{self.method}"

    @property
    def kind(self) -> str:
        """How messages call it: a method, or a (module-level) function."""
        return "function" if self.cls is None else "method"

    @staticmethod
    def at_lines(nodes) -> str:
        lines = sorted(n.lineno for n in nodes)
        if len(lines) == 1:
            return f"at line {lines[0]}"
        return "at lines " + ", ".join(map(str, lines[:-1])) + f" and {lines[-1]}"


def dotted(node: ast.AST) -> Optional[str]:
    """``a.b.c`` for a chain of names and attributes, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def statement_call(stmt: ast.stmt) -> Optional[str]:
    """The dotted callee when a statement's value is a call (maybe awaited): ``x = f()``, ``f()``."""
    value = stmt.value if isinstance(stmt, SIMPLE) else None
    if isinstance(value, ast.Await):
        value = value.value
    return dotted(value.func) if isinstance(value, ast.Call) else None


def blocks(node: ast.AST):
    """The statement lists directly under a compound statement."""
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    for handler in getattr(node, "handlers", ()):
        yield handler.body
    for case in getattr(node, "cases", ()):
        yield case.body


def scan_method(func: ast.AST, cls: Optional[str], method: str) -> Scan:
    scan = Scan(func=func, cls=cls, method=method)
    _walk_block(scan, func.body, func, ())
    return scan


def _walk_block(scan: Scan, block: List[ast.stmt], owner: ast.AST, loops: Tuple[ast.AST, ...]) -> None:
    for index, stmt in enumerate(block):
        if isinstance(stmt, SCOPES):
            _walk_expressions(scan, stmt, loops, header_only=True)  # decorators and defaults run here
            continue
        if isinstance(stmt, LOOPS):
            scan.loops.append(Loop(stmt, block, index, owner, loops))
        else:
            scan.statements.append(Stmt(stmt, block, index, owner, statement_call(stmt)))
        if isinstance(stmt, ast.Continue):
            scan.continues.append((stmt, loops))
        if isinstance(stmt, ast.Return):
            scan.returns.append(stmt)
        inner = loops + (stmt,) if isinstance(stmt, LOOPS) else loops
        _walk_expressions(scan, stmt, inner, header_only=False)
        for sub in blocks(stmt):
            _walk_block(scan, sub, stmt, inner)


def _walk_expressions(scan: Scan, stmt: ast.stmt, loops: Tuple[ast.AST, ...], header_only: bool) -> None:
    """Calls and yields in the expressions of ``stmt`` itself (not in its nested blocks or scopes)."""
    todo = list(stmt.decorator_list) if header_only else [
        child for name, child in ast.iter_fields(stmt)
        if name not in ("body", "orelse", "finalbody", "handlers", "cases")
        for child in (child if isinstance(child, list) else [child]) if isinstance(child, ast.AST)
    ]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name:
                scan.calls.append((name, node, loops))
        elif isinstance(node, (ast.Yield, ast.YieldFrom)):
            scan.yields.append(node)
        todo.extend(ast.iter_child_nodes(node))


Finder = Callable[[Scan, Point], List[object]]
REGISTRY: Dict[str, Finder] = {}


def register(*names: str):
    def deco(fn: Finder) -> Finder:
        for name in names:
            REGISTRY[name] = fn
        return fn

    return deco


def expect(point: Point, found: List, noun: str, rest: str, scan: Scan) -> List:
    """Enforce the point's count, with a reason that names the lines found."""
    if not found:
        raise NotFound(f"no {noun} {rest} in {scan.qualname}", scan.func.lineno)
    if point.count is not None and len(found) != point.count:
        nodes = [getattr(f, "node", f) for f in found]
        raise NotFound(f"found {len(found)} {noun}s {rest} in {scan.qualname}, {scan.at_lines(nodes)}; "
                       f"the recipe expects {point.count}", nodes[0].lineno)
    return found


from . import calls, loops, method  # noqa: E402,F401  (fill the registry)
