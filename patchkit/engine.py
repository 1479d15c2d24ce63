"""The engine: (source text, settings) -> new text, or a precise reason it cannot apply.

It never writes and never raises for "not applicable".  The module is
located with :mod:`ast` (fast); only the methods that change are parsed by
libcst, each on its own, and the new lines are put back into the original
text, so everything else stays byte for byte.  Every change is checked to be
a pure insertion of marked lines, and the result must compile.
"""

from __future__ import annotations

import ast
import difflib
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import libcst as cst

from . import codegen
from .model import AlreadyApplied, Applied, CannotApply, Insertion, Point, Settings, TransformResult
from .points import REGISTRY, Decorate, NotFound, Site, scan_method

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def split_lines(text: str) -> List[str]:
    """Lines with their endings; only \\r\\n, \\r and \\n end a line (as for Python itself)."""
    return _LINE.findall(text)


def newline_of(lines: Sequence[str]) -> str:
    for line in lines:
        if line.endswith("\r\n"):
            return "\r\n"
        if line.endswith(("\n", "\r")):
            return line[-1]
    return "\n"


def is_own_line(line: str, recipe_id: Optional[str] = None) -> bool:
    body = line.rstrip("\r\n")
    tail = codegen.marker(recipe_id) if recipe_id else None
    if tail is not None:
        return body.endswith(tail) and len(body) > len(tail) and not body[: -len(tail)].isspace()
    return re.search(r"\S  # patchkit:[a-z0-9][a-z0-9._-]*$", body) is not None


def strip(text: str, recipe_id: Optional[str] = None) -> str:
    """Take out the lines patchkit added (for one recipe, or for all)."""
    return "".join(line for line in split_lines(text) if not is_own_line(line, recipe_id))


def applied_ids(text: str) -> List[str]:
    ids = []
    for line in split_lines(text):
        found = re.search(r"\S  # patchkit:([a-z0-9][a-z0-9._-]*)$", line.rstrip("\r\n"))
        if found and found.group(1) not in ids:
            ids.append(found.group(1))
    return ids


class _Failed(Exception):
    def __init__(self, reason: str, line: Optional[int] = None, col: Optional[int] = None):
        super().__init__(reason)
        self.result = CannotApply(reason, line, col)


def transform(source: str, settings: Settings, points: Optional[Sequence[Point]] = None,
              path: str = "<source>") -> TransformResult:
    """Apply ``points`` (default: the settings' active points) to ``source``."""
    original = strip(source, settings.id)
    try:
        insertions = plan(original, settings, points if points is not None else settings.active_points(), path)
    except _Failed as failed:
        return failed.result
    text = insert(original, insertions)
    if text == source:
        return AlreadyApplied(source)
    try:
        compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as exc:  # a bug in patchkit, never the user's fault: say so plainly
        return CannotApply(f"the patched file would not compile ({exc.msg}); nothing was written", exc.lineno, exc.offset)
    return Applied(text, tuple(insertions))


def insert(original: str, insertions: Iterable[Insertion]) -> str:
    lines = split_lines(original)
    nl = newline_of(lines)
    if lines and not lines[-1].endswith(("\n", "\r")) and any(i.index >= len(lines) for i in insertions):
        lines[-1] += nl  # cannot happen: plan() refuses that case
    by_index: Dict[int, List[str]] = {}
    for ins in insertions:
        by_index.setdefault(ins.index, []).append(ins.text + nl)
    out: List[str] = []
    for i in range(len(lines) + 1):
        out.extend(by_index.get(i, ()))
        if i < len(lines):
            out.append(lines[i])
    return "".join(out)


def plan(original: str, settings: Settings, points: Sequence[Point], path: str) -> List[Insertion]:
    """Where each new line goes in ``original``, as sorted :class:`Insertion` objects."""
    try:
        tree = ast.parse(original, path)
    except SyntaxError as exc:
        raise _Failed(f"the file does not parse as Python: {exc.msg}", exc.lineno, exc.offset) from None
    except ValueError as exc:  # e.g. NUL bytes
        raise _Failed(f"the file does not parse as Python: {exc}") from None
    lines = split_lines(original)
    by_method: Dict[Tuple[str, str], List[Point]] = {}
    for point in points:
        by_method.setdefault((point.cls, point.method), []).append(point)
    insertions = _header(tree, lines, settings)
    for (cls, method), pts in by_method.items():
        insertions.extend(_method(tree, lines, settings, cls, method, pts))
    return sorted(insertions, key=lambda i: i.index)


def _header(tree: ast.Module, lines: List[str], settings: Settings) -> List[Insertion]:
    body = list(tree.body)
    i = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        i = 1
    while i < len(body) and isinstance(body[i], ast.ImportFrom) and body[i].module == "__future__":
        i += 1
    if i < len(body):
        first = body[i]
        line = min([first.lineno] + [d.lineno for d in getattr(first, "decorator_list", [])])
        prev_end = body[i - 1].end_lineno if i else 0
        if first.col_offset != 0 or prev_end >= line:
            raise _Failed("the module's first statement shares a line with the docstring or a __future__ import; "
                          "patchkit only adds whole lines", line)
        index = line - 1
    else:
        index = len(lines)
        if lines and not lines[-1].endswith(("\n", "\r")):
            raise _Failed("the file does not end with a newline; patchkit only adds whole lines", len(lines))
    return [Insertion(index, text) for text in codegen.header_lines(settings)]


def _find(tree: ast.Module, cls: str, method: str) -> ast.AST:
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    if not classes:
        raise _Failed(f"no class {cls} at the top level of the file")
    if len(classes) > 1:
        raise _Failed(f"found {len(classes)} classes named {cls}, at lines "
                      + ", ".join(str(c.lineno) for c in classes), classes[1].lineno)
    funcs = [n for n in classes[0].body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == method]
    if not funcs:
        raise _Failed(f"class {cls} has no method {method}", classes[0].lineno, classes[0].col_offset + 1)
    if len(funcs) > 1:
        raise _Failed(f"class {cls} defines {method} {len(funcs)} times, at lines "
                      + ", ".join(str(f.lineno) for f in funcs), funcs[1].lineno)
    return funcs[0]


def _method(tree: ast.Module, lines: List[str], settings: Settings, cls: str, method: str,
            points: Sequence[Point]) -> List[Insertion]:
    func = _find(tree, cls, method)
    first = min([func.lineno] + [d.lineno for d in func.decorator_list])
    last = func.end_lineno
    # The method alone, under a stand-in class header: libcst sees a few dozen lines, not the module.
    # Line endings are made "\n" for libcst; the new lines get the file's own ending in insert().
    old = [line.rstrip("\r\n") + "\n" for line in lines[first - 1:last]]
    nl = "\n"
    module = cst.parse_module("class _:" + nl + "".join(old))
    cfunc = module.body[0].body.body[0]
    offset = first - 2  # snippet line n is file line n + offset

    positions = {}

    def line_of(node: cst.CSTNode) -> int:
        if not positions:
            wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
            positions.update(wrapper.resolve(cst.metadata.PositionProvider))
        return positions[node].start.line + offset

    scan = scan_method(cfunc, cls, method, line_of)
    blocks: Dict[int, List[Tuple[int, cst.BaseStatement]]] = {}
    decorators: List[cst.Decorator] = []
    config = module.config_for_parsing
    for point in points:
        try:
            sites = REGISTRY[point.at](scan, point)
        except NotFound as exc:
            raise _Failed(exc.reason, exc.line) from None
        for site in sites:
            if isinstance(site, Decorate):
                code = codegen.exit_decorator(settings, point, func)
                decorators.append(cst.parse_statement(code + nl + "def _(): pass" + nl, config).decorators[0])
            else:
                stmt = cst.parse_statement(codegen.call_statement(settings, point) + nl, config)
                blocks.setdefault(id(site.block), []).append((site.index, stmt))
    new = module.visit(_Insert(blocks, cfunc, decorators)).code
    found = _insertions(old, split_lines(new)[1:], first - 1, settings.id, f"{cls}.{method}")
    if last == len(lines) and not lines[-1].endswith(("\n", "\r")) and any(i.index == last for i in found):
        raise _Failed("the file does not end with a newline and the line would go after its last line; "
                      "patchkit only adds whole lines (add a newline at the end of the file)", last)
    return found


class _Insert(cst.CSTTransformer):
    def __init__(self, blocks, func, decorators):
        super().__init__()
        self.blocks, self.func, self.decorators = blocks, func, decorators

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        adds = self.blocks.get(id(original))
        if not adds:
            return updated
        body: List[cst.BaseStatement] = []
        for i in range(len(updated.body) + 1):
            body.extend(stmt for index, stmt in adds if index == i)
            if i < len(updated.body):
                body.append(updated.body[i])
        return updated.with_changes(body=body)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if original is self.func and self.decorators:
            return updated.with_changes(decorators=[*updated.decorators, *self.decorators])
        return updated


def _insertions(old: List[str], new: List[str], base: int, recipe_id: str, where: str) -> List[Insertion]:
    """Check that ``new`` is ``old`` plus marked lines, and say where each goes."""
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        added = new[j1:j2]
        if tag != "insert" or not all(is_own_line(line, recipe_id) for line in added):
            raise _Failed(f"internal error: the change to {where} is not a pure insertion of patchkit lines; "
                          "nothing was written (please report this with the target file)")
        out.extend(Insertion(base + i1, line.rstrip("\r\n")) for line in added)
    return out
