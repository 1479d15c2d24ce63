"""The engine: a libcst codemod from (source text, settings) to new text, or a precise reason it cannot apply.

It never writes and never raises for "not applicable".  The module is parsed
with libcst; each point's function is looked up among the module's top-level
definitions and scanned, and the point's kind says where its line goes
(:mod:`patchkit.engine.points`); the new statements and decorators are libcst
nodes (:mod:`patchkit.engine.codegen`), put in by a transformer that enters only the definitions that change; the text is
the new module's ``code``.  Every byte the change does not touch (encoding,
line endings, tabs, comments) comes from libcst's round trip.  A last check
reads the new text against the input: taking out the marked lines must give
the input back line for line (what was taken out is the list of
:class:`Insertion` the command line shows), and the new text must compile.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from patchkit.engine import codegen
from patchkit.engine.marks import applied_ids, is_own_line, split_lines, strip  # noqa: F401  (applied_ids re-exported)
from patchkit.core.model import AlreadyApplied, Applied, CannotApply, Insertion, Point, Settings, TransformResult
from patchkit.engine.points.finder import find
from patchkit.engine.points.positions import Positions
from patchkit.engine.points.scan import Decorate, NotFound, Scan
from patchkit.recipe.kinds import describe
from patchkit.engine.points.lookup import Missing, find_function


class _Failed(Exception):
    def __init__(self, reason: str, line: Optional[int] = None, col: Optional[int] = None, hint: str = ""):
        super().__init__(reason)
        self.result = CannotApply(reason, line, col, hint)


def transform(source: str, settings: Settings, points: Optional[Sequence[Point]] = None,
              path: str = "<source>") -> TransformResult:
    """Apply ``points`` (default: the settings' active points) to ``source``."""
    original = strip(source, settings.id)
    try:
        text = _codemod(original, settings, settings.active_points() if points is None else points)
        insertions = _insertions(text, settings.id)
        _check_compiles(original, text, path)
    except _Failed as failed:
        return failed.result
    if text == source:
        return AlreadyApplied(source)
    return Applied(text, tuple(insertions))


def check_compiles(text: str, path: str) -> Optional[CannotApply]:
    """The whole patched file must compile (``api.apply`` checks this again before writing)."""
    try:
        compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as exc:  # a bug in patchkit, never the user's fault: say so plainly
        return CannotApply(f"the patched file would not compile ({exc.msg}); nothing was written", exc.lineno, exc.offset)
    return None


def parse(original: str) -> cst.Module:
    try:
        module = cst.parse_module(original)
    except Exception as exc:  # ParserSyntaxError; also NUL bytes, nesting deeper than the parser's recursion limit
        _not_python(original, exc)
    if not original or original.endswith("\r"):  # libcst reads an empty file, or a last "\r", as "no last newline"
        module = module.with_changes(has_trailing_newline=True)
    return module


def _not_python(original: str, exc: Exception) -> None:
    """Python's own words for a file libcst cannot parse, or libcst's when Python can compile it."""
    try:
        compile(original, "<target>", "exec", dont_inherit=True)
    except SyntaxError as error:
        raise _Failed(f"the file does not parse as Python: {error.msg}", error.lineno, error.offset) from None
    except ValueError as error:  # NUL bytes
        raise _Failed(f"the file does not parse as Python: {error}") from None
    if isinstance(exc, cst.ParserSyntaxError):
        raise _Failed(f"libcst cannot parse this file ({exc.message}); patchkit changes only files libcst reads",
                      exc.raw_line, exc.raw_column + 1) from None
    raise _Failed(f"libcst cannot parse this file ({exc}); patchkit changes only files libcst reads") from None


def _codemod(original: str, settings: Settings, points: Sequence[Point]) -> str:
    """The new module's code: the header and every point's statement (or decorator) put in as nodes."""
    module = parse(original)
    positions = Positions(module)
    edit = _Edit(module, _header_at(module, original, positions), codegen.header_statements(settings))
    by_scope: Dict[Tuple[Optional[str], str, Optional[str]], List[Point]] = {}
    for point in points:
        by_scope.setdefault((point.cls, point.method, point.nested), []).append(point)
    for (cls, method, nested), pts in by_scope.items():
        try:
            func, holders = find_function(module, cls, method, nested, positions)
        except Missing as missing:
            raise _Failed(missing.reason + _named_by(pts), missing.line, missing.col, missing.hint) from None
        _plan(edit, Scan(func, cls, method if not nested else f"{method}.{nested}", positions), settings, pts)
        edit.holders.update(map(id, holders))
    text = module.visit(edit).code
    _check_round_trip(module, original, text, settings.id)
    return text


def _plan(edit: "_Edit", scan: Scan, settings: Settings, points: Sequence[Point]) -> None:
    """Each point's statement (or decorator), handed to the transformer with the place it goes."""
    for point in points:
        try:
            sites = find(scan, point)
        except NotFound as exc:
            at = f", in the point at {point.where}" if point.where is not None else ""
            hint = exc.hint
            if exc.nothing_named:  # the calls or loops the function does have, nearest first
                from patchkit.engine.points.nearest import hint as nearest

                hint = nearest(scan, point)
            raise _Failed(exc.reason + at, exc.line, hint=hint) from None
        for site in sites:
            try:
                if isinstance(site, Decorate):
                    edit.decorate(site.func, codegen.exit_decorator_node(settings, point, site.func))
                else:
                    edit.before(site.block, site.index, codegen.point_statement(settings, point, site.part))
            except codegen.CannotWrite as exc:
                raise _Failed(f"the line for `{describe(point)}` cannot be written: {exc}", scan.line(scan.func)) from None


def _header_at(module: cst.Module, original: str, positions: Positions) -> int:
    """Where the header goes in the module's body: after the docstring and the ``from __future__`` imports."""
    docstring = module.get_docstring(clean=False) is not None
    for i, stmt in enumerate(module.body):
        smalls = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ()
        lead = 1 if i == 0 and docstring else 0
        while lead < len(smalls) and _is_future(smalls[lead]):
            lead += 1
        if lead == 0:
            return i
        if lead < len(smalls):
            raise _Failed("the module's first statement shares a line with the docstring or a __future__ import; "
                          "patchkit only adds whole lines", positions.line(smalls[lead]))
    if original and not original.endswith(("\n", "\r")):
        raise _Failed("the file does not end with a newline; patchkit only adds whole lines", len(split_lines(original)))
    return len(module.body)


def _is_future(stmt: cst.BaseSmallStatement) -> bool:
    """``from __future__ import ...``."""
    return isinstance(stmt, cst.ImportFrom) and isinstance(stmt.module, cst.Name) and stmt.module.value == "__future__"


def _named_by(points: Sequence[Point]) -> str:
    """``, named by the recipe at recipe.yaml:L:C``: where the points that name a scope are written."""
    places = list(dict.fromkeys(str(p.where) for p in points if p.where is not None))
    if not places:
        return ""
    return ", named by the recipe at " + (", ".join(places[:-1]) + " and " + places[-1] if places[1:] else places[0])


# What can hold a block: the transformer enters these only (an expression or a simple line never holds one).
_SKELETON = (cst.Module, cst.IndentedBlock, cst.BaseCompoundStatement, cst.Else, cst.ExceptHandler,
             cst.ExceptStarHandler, cst.Finally, cst.MatchCase)


class _Edit(cst.CSTTransformer):
    """The codemod: statements into blocks, decorators onto functions, the header into the module.

    It enters only the top-level definitions that hold a change and, in a
    class, only the methods that do, and in those only the statements that
    can hold a block: everything else is passed over as it is.
    """

    def __init__(self, module: cst.Module, header_at: int, header: List[cst.BaseStatement]):
        super().__init__()
        self.header_at, self.header = header_at, header
        self.holders: Set[int] = set()  # the definitions on the way to a change (ids)
        self._members = {id(stmt) for stmt in module.body}
        for stmt in module.body:
            if isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
                self._members.update(id(member) for member in stmt.body.body)
        self._before: Dict[int, List[Tuple[int, cst.BaseStatement]]] = {}
        self._decorators: Dict[int, List[cst.Decorator]] = {}

    def before(self, block: cst.IndentedBlock, index: int, stmt: cst.BaseStatement) -> None:
        self._before.setdefault(id(block), []).append((index, stmt))

    def decorate(self, func: cst.FunctionDef, decorator: cst.Decorator) -> None:
        self._decorators.setdefault(id(func), []).append(decorator)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self._members:
            return id(node) in self.holders
        return isinstance(node, _SKELETON)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        new = self._before.get(id(original_node))
        return updated_node.with_changes(body=_put(updated_node.body, new)) if new else updated_node

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        new = self._decorators.get(id(original_node))
        if not new:
            return updated_node
        # innermost, right above the ``def`` line: comments between the decorators and the def stay above it
        first = new[0].with_changes(leading_lines=updated_node.lines_after_decorators)
        return updated_node.with_changes(decorators=[*updated_node.decorators, first, *new[1:]], lines_after_decorators=())

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        at, body = self.header_at, updated_node.body
        if at < len(body):
            return updated_node.with_changes(body=_put(body, [(at, stmt) for stmt in self.header]))
        first = self.header[0].with_changes(leading_lines=updated_node.footer)  # after the file's last comments
        return updated_node.with_changes(body=[*body, first, *self.header[1:]], footer=())


def _put(body: Sequence[cst.BaseStatement], new: List[Tuple[int, cst.BaseStatement]]) -> List[cst.BaseStatement]:
    """``body`` with each new statement before ``body[index]`` (in the order given for one index).

    The statement a new one goes before gives it its comments and blank
    lines: the new line sits right above that statement's own first line.
    """
    at: Dict[int, List[cst.BaseStatement]] = {}
    for index, stmt in new:
        at.setdefault(index, []).append(stmt)
    out: List[cst.BaseStatement] = []
    for index in range(len(body) + 1):
        stmt = body[index] if index < len(body) else None
        nodes = at.get(index)
        if nodes and stmt is not None and stmt.leading_lines:
            nodes = [nodes[0].with_changes(leading_lines=stmt.leading_lines), *nodes[1:]]
            stmt = stmt.with_changes(leading_lines=())
        out.extend(nodes or ())
        if stmt is not None:
            out.append(stmt)
    return out


def _check_round_trip(module: cst.Module, original: str, text: str, recipe_id: str) -> None:
    """Taking the new lines out of ``text`` must give ``original`` back: the change is insertions only."""
    last_line = text[max(text.rfind("\n"), text.rfind("\r")) + 1:]
    if original and not original.endswith(("\n", "\r")) and is_own_line(last_line, recipe_id):
        raise _Failed("the file does not end with a newline and the line would go after its last line; "
                      "patchkit only adds whole lines (add a newline at the end of the file)", len(split_lines(original)))
    kept = strip(text, recipe_id)
    if kept == original:
        return
    old = split_lines(original)
    line = next((k for k, (a, b) in enumerate(zip(old, split_lines(kept)), 1) if a != b), len(old))
    if module.code != original:  # libcst itself does not give this file back (e.g. a form feed in an indentation)
        raise _Failed(f"libcst does not reproduce line {line} of this file byte for byte; "
                      "patchkit changes only files it can give back exactly", line,
                      hint="please report this with the target file; meanwhile add the lines `patchkit show` prints by hand")
    raise _Failed(f"internal error: the new text changes line {line} instead of only adding lines; "
                  "nothing was written (please report this with the target file)", line)


def _insertions(text: str, recipe_id: str) -> List[Insertion]:
    """The marked lines of ``text``, each with the index of the original line it goes before."""
    out, k = [], 0
    for line in split_lines(text):
        if is_own_line(line, recipe_id):
            out.append(Insertion(k, line.rstrip("\r\n")))
        else:
            k += 1
    return out


def _check_compiles(original: str, text: str, path: str) -> None:
    broken = check_compiles(text, path)
    if broken is None:
        return
    try:
        compile(original, path, "exec", dont_inherit=True)
    except SyntaxError as exc:  # the input itself: libcst's parser accepts some code Python's compiler refuses
        raise _Failed(f"the file does not compile as Python: {exc.msg}", exc.lineno, exc.offset) from None
    raise _Failed("internal error: " + broken.reason + " (please report this with the target file)",
                  broken.line, broken.col)
