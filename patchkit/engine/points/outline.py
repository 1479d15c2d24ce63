"""A function as an outline: the lines where a point can go, each with the recipe points that put a line there.

:func:`outline` reads one function (method, module-level function, or a
function nested in one) on libcst's tree, the way the finder sees it
(:class:`~patchkit.engine.points.scan.Scan`): its ``def`` line, the
statements whose value is a call, its loops and the end of their bodies, its
end (the places of :data:`patchkit.recipe.pointkind.PLACES`), and, to read
it by, the blocks around them (``if``, ``with``, ``try``), its returns and
raises and the functions defined inside it.  Each :class:`Entry` holds the
target file's line (libcst's :class:`~libcst.metadata.PositionProvider`),
the code of that line, and, as recipe mappings, the points of every kind of
that place (:func:`patchkit.recipe.kinds.at_place`) that select exactly that
line and that the kind does not refuse there; the kinds it refuses, and a
place no point selects alone, say why in ``note``, in the finder's own words
(:func:`patchkit.engine.points.finder.sites`): no kind is named here.
:mod:`.nearest` offers the same places when a recipe's point does not resolve.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import libcst as cst

from patchkit.core.vocabulary import DEFAULT_ACTION
from patchkit.engine.points.finder import sites
from patchkit.engine.points.lookup import Missing, find_function, functions
from patchkit.engine.points.loops import Spec, loop_selector, selected
from patchkit.engine.points.nearest import target_hint
from patchkit.engine.points.positions import Positions
from patchkit.engine.points.scan import Loop, NotFound, Scan, word
from patchkit.recipe.kinds import at_place
from patchkit.recipe.pointkind import CALL, DECORATOR, DEF, END, LOOP, LOOP_END, PointKind
from patchkit.recipe.points import LABELLED
from patchkit.recipe.points import flow

Code = Callable[[int], str]  # a line of the file, without the function's own indentation


class Entry(NamedTuple):
    line: int  # 1-based, in the target file
    code: str  # that line, without the function's own indentation
    points: Tuple[Spec, ...] = ()  # each as a recipe writes it (without class/method/function)
    note: str = ""  # why a kind (or every point) does not go here
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
    """The outline of the function ``qualname`` names in ``source``; raises lookup.Missing when it is not there,
    with the nearest functions of the file as the target names them (``Class.method``)."""
    module = cst.parse_module(source)
    cls, function, nested = scope_of(module, qualname)
    positions = Positions(module)
    try:
        func, _ = find_function(module, cls, function, nested, positions)
    except Missing as missing:
        if not missing.absent:
            raise
        top = {n.name.value for n in module.body if isinstance(n, (cst.ClassDef, cst.FunctionDef))}
        head = qualname.split(".")[0]
        reason = missing.reason if head in top or "." not in qualname else \
            f"no class or function {head} at the top level of the file"
        raise Missing(reason, missing.line, missing.col, target_hint(qualname, functions(module, positions)),
                      absent=True) from None
    scan = Scan(func, cls, function if not nested else f"{function}.{nested}", positions)
    lines = re.split(r"\r\n|\r|\n", source)  # line breaks as Python counts them (not str.splitlines's \x0c...)
    return Outline(cls, function, nested, tuple(entries(scan, lines)))


def entries(scan: Scan, lines: List[str]) -> List[Entry]:
    """The outline's entries of a scanned function, in the order of the file."""
    indent = scan.positions.start(scan.func.name).column - len("def ") - (6 if scan.func.asynchronous else 0)

    def code(line: int) -> str:
        text = lines[line - 1].rstrip() if line <= len(lines) else ""
        return text[indent:] if text[:indent].strip() == "" else text.lstrip()

    name = scan.func.name.value
    line = scan.line(scan.func.name)
    out = [_offer(scan, DEF, scan.func, {}, name, Entry(line, code(line), kind="def"))]
    callers: Dict[str, List[Any]] = {}
    for stmt in scan.statements:
        if stmt.call:
            callers.setdefault(stmt.call, []).append(stmt)
    for stmt in scan.statements:
        line = scan.line(stmt.node)
        here = Entry(line, code(line), kind="call")
        if stmt.call and len(callers[stmt.call]) > 1:
            out.append(here._replace(note=_not_alone(scan, stmt.call, callers[stmt.call])))
        elif stmt.call:
            out.append(_offer(scan, CALL, stmt, {"call": stmt.call}, stmt.call.rsplit(".", 1)[-1], here))
        elif word(stmt.node) in ("return", "raise"):
            out.append(Entry(line, code(line), note=_way_out(word(stmt.node)), kind="return"))
    for loop in scan.loops:
        out += _loop(scan, loop, code)
    out += [Entry(scan.line(n), code(scan.line(n)), kind="block") for n in _blocks(scan.func)]
    for inner in _inner(scan.func):
        line = scan.line(inner.name)
        if isinstance(inner, cst.FunctionDef):
            out.append(Entry(line, code(line), note=f"`nested: {inner.name.value}` puts points inside it",
                             kind="nested"))
    end = _offer(scan, END, scan.func, {}, name, Entry(scan.positions.end_line(scan.func), f"(end of {name})",
                                                        kind="end"))
    out.append(end if end.points else end._replace(note=end.note + _ways_out(scan)))
    return sorted(out, key=lambda e: (e.line, e.kind in ("loop_end", "end")))


def _offer(scan: Scan, place: str, anchor: Any, select: Spec, label: str, entry: Entry) -> Entry:
    """``entry`` with the points of each kind of ``place`` that goes at ``anchor``, and why the others do not."""
    points: List[Spec] = []
    refused: Dict[str, List[str]] = {}
    for kind in at_place(place):
        try:
            sites(scan, kind, anchor)
        except NotFound as exc:
            refused.setdefault(exc.reason, []).append(kind.name)
            continue
        points.append(_spelled(kind, select, label))
    note = "; ".join(f"no {_either(names)}: {reason}" for reason, names in refused.items())
    return entry._replace(points=tuple(points), note=note)


def _spelled(kind: PointKind, select: Spec, label: str) -> Spec:
    """A point of ``kind`` as a recipe writes it: its ``at:``, the keys that select the anchor, and the action
    (with a label) when the kind cannot take the default one."""
    out: Spec = {"at": kind.name, **select}
    if DEFAULT_ACTION not in kind.actions:
        out["action"] = kind.actions[0]
        if kind.actions[0] in LABELLED:
            out["name"] = label
    return out


def _either(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" or {names[-1]}"


def _not_alone(scan: Scan, call: str, stmts: Sequence[Any]) -> str:
    """Why no point takes one of several statements calling ``call``, and the point that takes them all."""
    return (f"no point picks this one alone: {len(stmts)} statements call {call}, "
            f"{scan.at_lines([s.node for s in stmts])}; `count: {len(stmts)}` takes them all")


def _way_out(keyword: str) -> str:
    """What a return or raise tells: the decorator kinds on the def line see this way out too."""
    wrappers = [f"`at: {kind.name}`" for kind in at_place(DEF) if kind.form == DECORATOR]
    return f"a {keyword}" + (f": a decorator on the def line ({', '.join(wrappers)}) also sees this way out"
                             if wrappers else "")


def _ways_out(scan: Scan) -> str:
    """Where the end is not reached: why no decorator on the def line (the place every way out reaches) goes
    either, when none does; "" when one does (the end's note names it)."""
    refused: Dict[str, List[str]] = {}
    for kind in at_place(DEF):
        if kind.form != DECORATOR:
            continue
        try:
            sites(scan, kind, scan.func)
            return ""
        except NotFound as exc:
            refused.setdefault(exc.reason, []).append(kind.name)
    return "".join(f"; no {_either(names)} either: {reason}" for reason, names in refused.items())


def _loop(scan: Scan, loop: Loop, code: Code) -> List[Entry]:
    """The loop's header and the end of its body, each with the points that select this loop alone."""
    line = scan.line(loop.node)
    header = Entry(line, code(line), kind="loop")
    selector, n = loop_selector(scan, loop)
    if not selector:
        return [header._replace(note="no selector picks this loop (no name in its iterable, target or condition, "
                                     "and no call in it)")]
    if n > 1:
        others = [lp.node for lp in selected(scan, selector)]
        return [header._replace(note=f"no selector picks this loop alone: `loop: {flow(selector)}` selects {n} "
                                     f"loops, {scan.at_lines(others)}; `count: {n}` takes them all")]
    label = str(next(iter(selector.values()))).rsplit(".", 1)[-1]
    body_end = scan.positions.end_line(loop.node.body.body[-1]) if loop.node.body.body else line
    end = Entry(body_end, f"(end of the loop at line {line})", kind="loop_end")
    return [_offer(scan, LOOP, loop, {"loop": selector}, label, header),
            _offer(scan, LOOP_END, loop, {"loop": selector}, label, end)]


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
