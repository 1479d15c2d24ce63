"""One function on libcst's tree as the finders see it: its statements, loops, calls and yields, and the sites
where a new line can go.

A :class:`Scan` visits one function's body once (its blocks, statements and
loops; nested functions and classes left out) and its expressions the first
time a kind asks for its calls or yields.  A kind
(:class:`patchkit.recipe.pointkind.PointKind`) gets the scan and one anchor
(the function, a :class:`Stmt` or a :class:`Loop`) and makes its sites with
the scan's methods: :meth:`Scan.before`, :meth:`Scan.after`,
:meth:`Scan.body_start`, :meth:`Scan.body_end` (a :class:`Site`: a block of
the tree and an index in it) or :meth:`Scan.decorate` (a :class:`Decorate`);
its refusals read :attr:`Scan.yields`, :meth:`Scan.ends_with` and
:meth:`Scan.continues_of`.  A point that does not resolve is a
:class:`NotFound` with a precise reason.  Line numbers for those reasons come
from libcst's position metadata (:class:`Positions`), resolved only when a
reason needs one.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import libcst as cst

from patchkit.core.model import Point
from patchkit.engine.points.positions import Positions

LOOPS = (cst.For, cst.While)
SIMPLE = (cst.Expr, cst.Assign, cst.AnnAssign, cst.AugAssign)


class NotFound(Exception):
    """The point does not resolve; ``line`` is a 1-based line of the target file when known; ``hint`` what to
    write instead.  ``nothing_named``: the function has no call or loop the point names (the codemod then
    offers the nearest that it has, :mod:`.nearest`)."""

    def __init__(self, reason: str, line: Optional[int] = None, hint: str = "", nothing_named: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.line = line
        self.hint = hint
        self.nothing_named = nothing_named


class Site(NamedTuple):
    """Insert before ``block.body[index]`` (``index == len(block.body)``: after the last statement)."""

    block: cst.BaseSuite  # an IndentedBlock; a SimpleStatementSuite is a one-line block (refused)
    index: int
    owner: cst.CSTNode  # the statement (or function) whose block it is
    part: str = ""  # for a range around a statement: "open" (before it) or "close" (after it)


class Decorate(NamedTuple):
    """Add an innermost decorator to ``func``."""

    func: cst.FunctionDef


class Loop(NamedTuple):
    node: cst.BaseCompoundStatement  # For (async or not) or While
    block: cst.BaseSuite  # the block that holds the loop statement
    index: int
    owner: cst.CSTNode
    parents: Tuple[cst.CSTNode, ...]  # enclosing loops, outermost first


class Stmt(NamedTuple):
    node: cst.CSTNode  # a small statement (``x = f()``) or a compound one (``if``, ``with``, ...)
    block: cst.BaseSuite
    index: int  # of the line (or compound statement) in ``block.body``
    owner: cst.CSTNode
    call: Optional[str]  # dotted callee when the statement's value is a call


def dotted(node: cst.CSTNode) -> Optional[str]:
    """``a.b.c`` for a chain of names and attributes, else None."""
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def word(node: cst.CSTNode) -> str:
    """The keyword a statement starts with, as messages say it: ``return``, ``raise``, ``break``, ``continue``
    (a ``while True:`` loop: what it is)."""
    return "`while True:` loop that no break leaves" if isinstance(node, cst.While) else type(node).__name__.lower()


def statement_call(stmt: cst.CSTNode) -> Optional[str]:
    """The dotted callee when a statement's value is a call (maybe awaited): ``x = f()``, ``f()``."""
    value = stmt.value if isinstance(stmt, SIMPLE) else None
    if isinstance(value, cst.Await):
        value = value.expression
    return dotted(value.func) if isinstance(value, cst.Call) else None


class Scan(cst.CSTVisitor):
    """The statements and loops of one function, in the order of the source, from one visit of its body.

    The visit follows the statements only (an expression holds none);
    nested functions and classes are not entered.  The calls and yields in
    the function's expressions are gathered by a second visit, the first
    time a finder asks for them (:attr:`calls`, :attr:`yields`).
    """

    def __init__(self, func: cst.FunctionDef, cls: Optional[str], method: str, positions: Positions):
        super().__init__()
        self.func, self.cls, self.method, self.positions = func, cls, method, positions
        self.statements: List[Stmt] = []
        self.loops: List[Loop] = []
        self.continues: List[Tuple[cst.Continue, Tuple[cst.CSTNode, ...]]] = []  # with enclosing loops
        self._expressions: Optional[_Expressions] = None
        self._owners: List[cst.CSTNode] = [func]
        self._enclosing: Tuple[cst.CSTNode, ...] = ()
        self._where: Dict[int, Tuple[cst.BaseSuite, int, cst.CSTNode]] = {}
        func.body.visit(self)

    @property
    def qualname(self) -> str:
        return self.method if self.cls is None else f"{self.cls}.{self.method}"

    @property
    def kind(self) -> str:
        """How messages call it: a method, or a (module-level) function."""
        return "function" if self.cls is None else "method"

    @property
    def calls(self) -> List[Tuple[str, cst.Call, Tuple[cst.CSTNode, ...]]]:
        """Every call of a dotted name, with the loops around it (innermost last)."""
        return self._expressions_visited().calls

    @property
    def yields(self) -> List[cst.Yield]:
        return self._expressions_visited().yields

    def _expressions_visited(self) -> "_Expressions":
        if self._expressions is None:
            self._expressions = _Expressions()
            self.func.body.visit(self._expressions)
        return self._expressions

    def line(self, node: cst.CSTNode) -> int:
        return self.positions.line(node)

    def at_lines(self, nodes: Sequence[cst.CSTNode]) -> str:
        return self.positions.at_lines(nodes)

    # What a kind's find() and refusals ask (patchkit.recipe.pointkind): sites, and what stops a line.

    def before(self, anchor: "Stmt | Loop", part: str = "") -> Site:
        """The line before a statement or loop, in its block (``part``: "open" for a range around it)."""
        return Site(anchor.block, anchor.index, anchor.owner, part)

    def after(self, anchor: "Stmt | Loop", part: str = "") -> Site:
        """The line after a statement or loop, in its block (``part``: "close" for a range around it)."""
        return Site(anchor.block, anchor.index + 1, anchor.owner, part)

    def body_start(self, node: cst.CSTNode, after_docstring: bool = False) -> Site:
        """The first line of the body of the function or a loop (``node``), maybe after the function's docstring."""
        skip = after_docstring and isinstance(node, cst.FunctionDef) and node.get_docstring(clean=False) is not None
        return Site(node.body, 1 if skip else 0, node)

    def body_end(self, node: cst.CSTNode) -> Site:
        """After the last line of the body of the function or a loop (``node``)."""
        return Site(node.body, len(node.body.body), node)

    def decorate(self, func: cst.FunctionDef) -> Decorate:
        """An innermost decorator on the function."""
        return Decorate(func)

    def ends_with(self, node: cst.CSTNode, *words: str) -> List[cst.CSTNode]:
        """The statements (of ``words``) by which every path through the body of ``node`` (the function or a loop)
        leaves it before its end, however deep in ``with``, ``try``, ``if``... (:func:`.exits.leaving`); [] when
        a path reaches its end."""
        from patchkit.engine.points.exits import leaving

        return leaving(node.body, words)

    def continues_of(self, loop: "Loop") -> List[cst.Continue]:
        """The ``continue`` statements that go to the next pass of ``loop`` (not of a loop inside it)."""
        return [c for c, enclosing in self.continues if enclosing and enclosing[-1] is loop.node]

    def on_visit(self, node: cst.CSTNode) -> bool:
        return not isinstance(node, cst.BaseExpression) and super().on_visit(node)

    def _block(self, block: cst.BaseSuite) -> None:
        owner = self._owners[-1]
        for index, stmt in enumerate(block.body):
            self._where[id(stmt)] = (block, index, owner)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._block(node)

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> bool:  # ``if x: f()``
        self._block(node)
        for small in node.body:
            self._statement(small, *self._where[id(small)])
        return False

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:  # ``x = f()``, ``a; b``
        for small in node.body:
            self._statement(small, *self._where[id(node)])
        return False

    def _statement(self, node: cst.CSTNode, block: cst.BaseSuite, index: int, owner: cst.CSTNode) -> None:
        self.statements.append(Stmt(node, block, index, owner, statement_call(node)))
        if isinstance(node, cst.Continue):
            self.continues.append((node, self._enclosing))

    def _compound(self, node: cst.BaseCompoundStatement) -> None:
        where = self._where.get(id(node))  # an ``elif`` is in no block: it is the ``orelse`` of its ``if``
        if isinstance(node, LOOPS):
            self.loops.append(Loop(node, *where, self._enclosing))
            self._enclosing += (node,)
        elif where is not None:
            self._statement(node, *where)
        self._owners.append(node)

    def _left(self, node: cst.BaseCompoundStatement) -> None:
        self._owners.pop()
        if isinstance(node, LOOPS):
            self._enclosing = self._enclosing[:-1]

    visit_For = visit_While = visit_If = visit_With = visit_Try = visit_TryStar = visit_Match = _compound
    leave_For = leave_While = leave_If = leave_With = leave_Try = leave_TryStar = leave_Match = _left

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:  # a nested scope: none of its statements run here
        return False

    visit_ClassDef = visit_FunctionDef


class _Expressions(cst.CSTVisitor):
    """The calls (with the loops around them) and yields of a function, nested scopes left out.

    A nested def or class is entered for its decorators only: they run in
    this function.  A lambda is not entered.
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls: List[Tuple[str, cst.Call, Tuple[cst.CSTNode, ...]]] = []
        self.yields: List[cst.Yield] = []
        self._enclosing: Tuple[cst.CSTNode, ...] = ()

    def visit_For(self, node: cst.CSTNode) -> None:  # the loop's own header and else count as inside it
        self._enclosing += (node,)

    def leave_For(self, node: cst.CSTNode) -> None:
        self._enclosing = self._enclosing[:-1]

    visit_While, leave_While = visit_For, leave_For

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        for decorator in node.decorators:
            decorator.visit(self)
        return False

    visit_ClassDef = visit_FunctionDef

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted(node.func)
        if name:
            self.calls.append((name, node, self._enclosing))

    def visit_Yield(self, node: cst.Yield) -> None:
        self.yields.append(node)


def expect(point: Point, found: List, noun: str, rest: str, scan: Scan) -> List:
    """Enforce the point's count, with a reason that names the lines found."""
    if not found:
        raise NotFound(f"no {noun} {rest} in {scan.qualname}", scan.line(scan.func), nothing_named=True)
    if point.count is not None and len(found) != point.count:
        nodes = [getattr(f, "node", f) for f in found]
        raise NotFound(f"found {len(found)} {noun}s {rest} in {scan.qualname}, {scan.at_lines(nodes)}; "
                       f"the recipe expects {point.count}", scan.line(nodes[0]))
    return found
