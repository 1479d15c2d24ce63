"""Injection points: one small module per kind, a registry from the YAML word to it.

Each finder gets a :class:`Scan` of one method (every block, statement, loop
and call in it, nested functions left out) and a
:class:`~patchkit.model.Point`, and returns the :class:`Site` objects where
the point's line goes, or raises :class:`NotFound` with a precise reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import libcst as cst
from libcst.helpers import get_full_name_for_node

from ..model import Point


class NotFound(Exception):
    """The point does not resolve; ``line`` is a 1-based line of the target file when known."""

    def __init__(self, reason: str, line: Optional[int] = None):
        super().__init__(reason)
        self.reason = reason
        self.line = line


@dataclass(frozen=True)
class Site:
    """Insert before ``block.body[index]`` (``index == len(body)``: at the end)."""

    block: cst.IndentedBlock
    index: int


@dataclass(frozen=True)
class Decorate:
    """Add an innermost decorator to ``func``."""

    func: cst.FunctionDef


@dataclass
class Loop:
    node: cst.CSTNode  # For or While
    block: cst.IndentedBlock  # the block that holds the loop statement
    index: int
    parents: Tuple[cst.CSTNode, ...]  # enclosing loops, outermost first


@dataclass
class Stmt:
    node: cst.SimpleStatementLine
    block: cst.IndentedBlock
    index: int
    calls: Tuple[str, ...]  # dotted callees of its statement-level calls


@dataclass
class Scan:
    """Everything the finders need about one method, gathered in one pass."""

    func: cst.FunctionDef
    cls: str
    method: str
    lines: Callable[[cst.CSTNode], int]  # node -> 1-based line in the target file
    statements: List[Stmt] = field(default_factory=list)
    loops: List[Loop] = field(default_factory=list)
    calls: List[Tuple[str, cst.Call, Tuple[cst.CSTNode, ...]]] = field(default_factory=list)
    returns: List[cst.CSTNode] = field(default_factory=list)
    yields: List[cst.CSTNode] = field(default_factory=list)
    continues: List[Tuple[cst.Continue, Tuple[cst.CSTNode, ...]]] = field(default_factory=list)

    @property
    def qualname(self) -> str:
        return f"{self.cls}.{self.method}"

    def at_lines(self, nodes) -> str:
        lines = sorted(self.lines(n) for n in nodes)
        if len(lines) == 1:
            return f"at line {lines[0]}"
        return "at lines " + ", ".join(map(str, lines[:-1])) + f" and {lines[-1]}"


def statement_call(small: cst.BaseSmallStatement) -> Optional[str]:
    """The dotted callee when a small statement's value is a call (maybe awaited)."""
    value = getattr(small, "value", None) if isinstance(small, (cst.Expr, cst.Assign, cst.AnnAssign, cst.AugAssign)) else None
    if isinstance(value, cst.Await):
        value = value.expression
    if isinstance(value, cst.Call):
        return get_full_name_for_node(value.func)
    return None


class _Scanner(cst.CSTVisitor):
    def __init__(self, scan: Scan):
        super().__init__()
        self.scan = scan
        self.blocks: List[cst.IndentedBlock] = []
        self.loops: List[cst.CSTNode] = []

    # nested scopes are not part of the method
    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.scan.func

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.blocks.append(node)
        for i, stmt in enumerate(node.body):
            if isinstance(stmt, cst.SimpleStatementLine):
                calls = tuple(c for c in (statement_call(s) for s in stmt.body) if c)
                self.scan.statements.append(Stmt(stmt, node, i, calls))
            elif isinstance(stmt, (cst.For, cst.While)):
                self.scan.loops.append(Loop(stmt, node, i, tuple(self.loops)))

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.blocks.pop()

    def visit_For(self, node: cst.For) -> None:
        self.loops.append(node)

    def leave_For(self, node: cst.For) -> None:
        self.loops.pop()

    def visit_While(self, node: cst.While) -> None:
        self.loops.append(node)

    def leave_While(self, node: cst.While) -> None:
        self.loops.pop()

    def visit_Call(self, node: cst.Call) -> None:
        name = get_full_name_for_node(node.func)
        if name:
            self.scan.calls.append((name, node, tuple(self.loops)))

    def visit_Return(self, node: cst.Return) -> None:
        self.scan.returns.append(node)

    def visit_Yield(self, node: cst.Yield) -> None:
        self.scan.yields.append(node)

    def visit_Continue(self, node: cst.Continue) -> None:
        self.scan.continues.append((node, tuple(self.loops)))


def scan_method(func: cst.FunctionDef, cls: str, method: str, lines: Callable[[cst.CSTNode], int]) -> Scan:
    scan = Scan(func=func, cls=cls, method=method, lines=lines)
    func.visit(_Scanner(scan))
    return scan


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
        raise NotFound(f"no {noun} {rest} in {scan.qualname}", scan.lines(scan.func))
    if point.count is not None and len(found) != point.count:
        nodes = [getattr(f, "node", f) for f in found]
        raise NotFound(f"found {len(found)} {noun}s {rest} in {scan.qualname}, {scan.at_lines(nodes)}; "
                       f"the recipe expects {point.count}", scan.lines(nodes[0]))
    return found


from . import calls, loops, method  # noqa: E402,F401  (fill the registry)
