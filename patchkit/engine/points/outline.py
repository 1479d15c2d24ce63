"""A function as an outline: the lines where a point can go, each with the recipe point that puts a line there.

:func:`outline` reads one function (method, module-level function, or a
function nested in one) on libcst's tree, the way the finders see it
(:class:`~patchkit.engine.points.Scan`): its ``def`` line, its loops and the
end of their bodies, the statements whose value is a call (what
``after_call``, ``before_call`` and ``around_call`` select), the blocks
around them (``if``, ``with``, ``try``), its returns and raises, the
functions defined inside it, and its end.  Each :class:`Entry` holds the
target file's line (libcst's :class:`~libcst.metadata.PositionProvider`),
the code of that line, and the points, as recipe mappings, that resolve
there exactly as written (a loop is named by a selector that picks that
loop alone; a call made by several statements gets ``count:``).  A place no
point takes says why in ``note``.  :mod:`.nearest` offers the same entries
when a recipe's point does not resolve.
"""

from __future__ import annotations

import re
from typing import Dict, List, NamedTuple, Optional, Tuple

import libcst as cst

from patchkit.engine.points.lookup import find_function
from patchkit.engine.points.loops import Spec, loop_selector, selected
from patchkit.engine.points.positions import Positions
from patchkit.engine.points.scan import Loop, Scan, last_statement



class Entry(NamedTuple):
    line: int  # 1-based, in the target file
    code: str  # that line, without the function's own indentation
    points: Tuple[Spec, ...] = ()  # each as a recipe writes it (without class/method/function)
    note: str = ""  # why no point goes here, or what the place is ("end of the loop body")
    kind: str = ""  # def, loop, loop_end, call, block, return, nested, end


class Outline(NamedTuple):
    cls: Optional[str]
    function: str  # the method's or function's name
    nested: Optional[str]
    entries: Tuple[Entry, ...]

    @property
    def scope(self) -> Spec:
        """The recipe keys that name the function: ``{class:, method:}`` or ``{function:}`` (and ``nested:``)."""
        out: Spec = {"function": self.function} if self.cls is None else {"class": self.cls, "method": self.function}
        if self.nested:
            out["nested"] = self.nested
        return out


def scope_of(module: cst.Module, qualname: str) -> Tuple[Optional[str], str, Optional[str]]:
    """``(class, function, nested)`` for ``Class.method``, ``function``, ``function.inner`` or
    ``Class.method.inner``: a first part that names a top-level class is the class."""
    parts = qualname.split(".")
    classes = {n.name.value for n in module.body if isinstance(n, cst.ClassDef)}
    if len(parts) == 1:
        return None, parts[0], None
    if len(parts) == 3 or parts[0] in classes:
        return parts[0], parts[1], parts[2] if len(parts) == 3 else None
    return None, parts[0], parts[1]


def outline(source: str, qualname: str) -> Outline:
    """The outline of the function ``qualname`` names in ``source``; raises lookup.Missing when it is not there."""
    module = cst.parse_module(source)
    cls, function, nested = scope_of(module, qualname)
    positions = Positions(module)
    func, _ = find_function(module, cls, function, nested, positions)
    scan = Scan(func, cls, function if not nested else f"{function}.{nested}", positions)
    lines = re.split(r"\r\n|\r|\n", source)  # line breaks as Python counts them (not str.splitlines's \x0c...)
    return Outline(cls, function, nested, tuple(entries(scan, lines)))


def entries(scan: Scan, lines: List[str]) -> List[Entry]:
    """The outline's entries of a scanned function, in the order of the file."""
    indent = scan.positions.start(scan.func.name).column - len("def ") - (6 if scan.func.asynchronous else 0)

    def code(line: int) -> str:
        text = lines[line - 1].rstrip() if line <= len(lines) else ""
        return text[indent:] if text[:indent].strip() == "" else text.lstrip()

    out = [_def(scan, code)]
    counts: Dict[str, int] = {}
    flat: Dict[str, int] = {}  # a call made in a one-line block (`if x: f()`): no point takes any statement of it
    for stmt in scan.statements:
        if stmt.call:
            counts[stmt.call] = counts.get(stmt.call, 0) + 1
            if isinstance(stmt.block, cst.SimpleStatementSuite):
                flat.setdefault(stmt.call, scan.line(stmt.node))
    for stmt in scan.statements:
        line = scan.line(stmt.node)
        if stmt.call in flat:
            out.append(Entry(line, code(line), note=f"{stmt.call} is called in a one-line block at line "
                             f"{flat[stmt.call]}: no call point (put that block's body on a line of its own)",
                             kind="call"))
        elif stmt.call:
            out.append(Entry(line, code(line), _call_points(stmt.call, counts[stmt.call]), kind="call"))
        elif isinstance(stmt.node, (cst.Return, cst.Raise)):
            word = type(stmt.node).__name__.lower()
            out.append(Entry(line, code(line), note=f"a {word}: `at: on_exit` steps on every way out", kind="return"))
    for loop in scan.loops:
        out += _loop(scan, loop, code)
    out += [Entry(scan.line(n), code(scan.line(n)), kind="block") for n in _blocks(scan.func)]
    for inner in _inner(scan.func):
        line = scan.line(inner.name)
        if isinstance(inner, cst.FunctionDef):
            out.append(Entry(line, code(line), note=f"`nested: {inner.name.value}` puts points inside it",
                             kind="nested"))
    out.append(_end(scan, code))
    return sorted(out, key=lambda e: (e.line, e.kind in ("loop_end", "end")))


def _def(scan: Scan, code) -> Entry:
    line = scan.line(scan.func.name)
    points: List[Spec] = [{"at": "method_start"}]
    why = ""
    if scan.func.asynchronous is not None:
        why = "async: no on_exit or method range"
    elif scan.yields:
        why = f"a generator (yield at line {scan.line(scan.yields[0])}): no on_exit or method range"
    else:
        points += [{"at": "on_exit"}, {"at": "method", "action": "range", "name": scan.func.name.value}]
    return Entry(line, code(line), tuple(points), why, "def")


def _end(scan: Scan, code) -> Entry:
    last = last_statement(scan.func.body)
    line = scan.positions.end_line(scan.func)
    name = f"(end of {scan.func.name.value})"
    if isinstance(last, (cst.Return, cst.Raise)):
        return Entry(line, name, note=f"ends with a {type(last).__name__.lower()}: no method_end; use `at: on_exit`",
                     kind="end")
    return Entry(line, name, ({"at": "method_end"},), kind="end")


def _call_points(call: str, count: int) -> Tuple[Spec, ...]:
    more = {"count": count} if count > 1 else {}
    label = call.rsplit(".", 1)[-1]
    return ({"at": "after_call", "call": call, **more}, {"at": "before_call", "call": call, **more},
            {"at": "around_call", "call": call, "action": "range", "name": label, **more})


def _loop(scan: Scan, loop: Loop, code) -> List[Entry]:
    line = scan.line(loop.node)
    selector, n = loop_selector(scan, loop)
    if not selector:
        return [Entry(line, code(line), note="no selector picks this loop (no name in its iterable, target or "
                      "condition, and no call in it)", kind="loop")]
    more = {"count": n} if n > 1 else {}
    flat = [lp for lp in scan.loops if isinstance(lp.node.body, cst.SimpleStatementSuite)
            and lp.node in {f.node for f in selected(scan, selector)}]
    inside = () if flat else ({"at": "loop_start", "loop": selector, **more},)
    out = [Entry(line, code(line), ({"at": "before_loop", "loop": selector, **more}, *inside), kind="loop")]
    body_end = scan.positions.end_line(loop.node.body.body[-1]) if loop.node.body.body else line
    skips = [c for c, around in scan.continues if around and around[-1] is loop.node]
    last = last_statement(loop.node.body)
    label = f"(end of the loop at line {line})"
    if flat:
        out.append(Entry(body_end, label, note=f"the loop at line {scan.line(flat[0].node)} has its body on its "
                         "header's line: no loop_start or loop_end", kind="loop_end"))
    elif skips:
        out.append(Entry(body_end, label, note=f"the loop has a continue at line {scan.line(skips[0])}: "
                         "no loop_end (use loop_start)", kind="loop_end"))
    elif isinstance(last, (cst.Return, cst.Raise, cst.Break, cst.Continue)):
        out.append(Entry(body_end, label, note=f"the body ends with a {type(last).__name__.lower()}: no loop_end",
                         kind="loop_end"))
    else:
        out.append(Entry(body_end, label, ({"at": "loop_end", "loop": selector, **more},), kind="loop_end"))
    return out


class _Blocks(cst.CSTVisitor):
    """The headers of the blocks in a function (if, elif, else, with, try, except, finally, match, case) and
    the functions and classes defined in it (not entered)."""

    def __init__(self) -> None:
        super().__init__()
        self.headers: List[cst.CSTNode] = []
        self.inner: List[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self.inner.append(node)
            return False
        if isinstance(node, (cst.If, cst.Else, cst.With, cst.Try, cst.TryStar, cst.ExceptHandler,
                             cst.ExceptStarHandler, cst.Finally, cst.Match, cst.MatchCase)):
            self.headers.append(node)
        return not isinstance(node, (cst.BaseExpression, cst.SimpleStatementLine))


def _visited(func: cst.FunctionDef) -> _Blocks:
    blocks = _Blocks()
    func.body.visit(blocks)
    return blocks


def _blocks(func: cst.FunctionDef) -> List[cst.CSTNode]:
    return _visited(func).headers


def _inner(func: cst.FunctionDef) -> List[cst.CSTNode]:
    return _visited(func).inner
