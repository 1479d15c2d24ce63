"""The engine: (source text, settings) -> new text, or a precise reason it cannot apply.

It never writes and never raises for "not applicable".  The places are
found on Python's own syntax tree of the module (fast); the new lines are
built from templates, those at the points (guards and role expressions
included) go through libcst's parser together, and the two header lines
are plain literals; they are then put between the original lines, so every
original byte stays as it was (encoding, line endings, tabs, comments) and
the change is insertions only.  Each changed method must compile.
"""

from __future__ import annotations

import ast
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from . import codegen
from .marks import applied_ids, is_own_line, newline_of, split_lines, strip  # noqa: F401  (re-exported)
from .model import AlreadyApplied, Applied, CannotApply, Insertion, Point, Settings, TransformResult
from .points import REGISTRY, Decorate, NotFound, Site, scan_method
from .points.method import is_docstring


class _Failed(Exception):
    def __init__(self, reason: str, line: Optional[int] = None, col: Optional[int] = None, hint: str = ""):
        super().__init__(reason)
        self.result = CannotApply(reason, line, col, hint)


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
    return Applied(text, tuple(insertions))


def insert(original: str, insertions: Iterable[Insertion], lines: Optional[List[str]] = None) -> str:
    """``original`` with each insertion's line (and the file's line ending) before its index."""
    lines = split_lines(original) if lines is None else lines
    nl = newline_of(lines)
    out: List[str] = []
    done = 0
    for ins in sorted(insertions, key=lambda i: i.index):  # stable: same-index lines keep their order
        out.extend(lines[done:ins.index])
        done = max(done, ins.index)
        out.append(ins.text + nl)
    out.extend(lines[done:])
    return "".join(out)


def check_compiles(text: str, path: str) -> Optional[CannotApply]:
    """The whole patched file must compile (``api.apply`` checks this before writing)."""
    try:
        compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as exc:  # a bug in patchkit, never the user's fault: say so plainly
        return CannotApply(f"the patched file would not compile ({exc.msg}); nothing was written", exc.lineno, exc.offset)
    return None


def plan(original: str, settings: Settings, points: Sequence[Point], path: str) -> List[Insertion]:
    """Where each new line goes in ``original``, as sorted :class:`Insertion` objects."""
    try:
        tree = ast.parse(original, path)
    except SyntaxError as exc:
        raise _Failed(f"the file does not parse as Python: {exc.msg}", exc.lineno, exc.offset) from None
    except ValueError as exc:  # e.g. NUL bytes
        raise _Failed(f"the file does not parse as Python: {exc}") from None
    lines = split_lines(original)
    by_method: Dict[Tuple[Optional[str], str, Optional[str]], List[Point]] = {}
    for point in points:
        by_method.setdefault((point.cls, point.method, point.nested), []).append(point)
    insertions = _header(tree, lines, settings)
    methods = [_method(tree, lines, settings, cls, method, nested, pts)
               for (cls, method, nested), pts in by_method.items()]
    _check_with_libcst([i.text.lstrip(" \t\f") for _, _, found in methods for i in found])
    for qualname, func, found in methods:
        _check_method_compiles(lines, qualname, func, found)
        insertions.extend(found)
    return sorted(insertions, key=lambda i: i.index)


def _header(tree: ast.Module, lines: List[str], settings: Settings) -> List[Insertion]:
    body = list(tree.body)
    i = 0
    if body and is_docstring(body[0]):
        i = 1
    while i < len(body) and isinstance(body[i], ast.ImportFrom) and body[i].module == "__future__":
        i += 1
    if i < len(body):
        first = body[i]
        line = _first_line(first)
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


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _find(tree: ast.Module, cls: Optional[str], method: str) -> ast.AST:
    """The method ``cls.method``, or with ``cls`` None the module-level function ``method``."""
    top_defs = [n for n in tree.body if isinstance(n, _DEFS)]
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    if cls is None:
        funcs = [n for n in top_defs if n.name == method]
        if not funcs:
            owners = [c.name for c in classes if any(isinstance(n, _DEFS) and n.name == method for n in c.body)]
            hint = (f"{method} is a method of class {owners[0]} here: write `class: {owners[0]}` and `method: {method}` "
                    "instead of `function:`" if owners else _did_you_mean("function", method, top_defs))
            raise _Failed(f"no function {method} at the top level of the file", hint=hint)
        if len(funcs) > 1:
            raise _Failed(f"the file defines {method} {len(funcs)} times at the top level, at lines "
                          + ", ".join(str(f.lineno) for f in funcs), funcs[1].lineno)
        return funcs[0]
    named = [c for c in classes if c.name == cls]
    if not named:
        raise _Failed(f"no class {cls} at the top level of the file", hint=_did_you_mean("class", cls, classes))
    if len(named) > 1:
        raise _Failed(f"found {len(named)} classes named {cls}, at lines "
                      + ", ".join(str(c.lineno) for c in named), named[1].lineno)
    methods = [n for n in named[0].body if isinstance(n, _DEFS)]
    funcs = [n for n in methods if n.name == method]
    if not funcs:
        hint = (f"{method} is a module-level function here: write `function: {method}` instead of `class:` and `method:`"
                if any(n.name == method for n in top_defs) else _did_you_mean("method", method, methods))
        raise _Failed(f"class {cls} has no method {method}", named[0].lineno, named[0].col_offset + 1, hint)
    if len(funcs) > 1:
        raise _Failed(f"class {cls} defines {method} {len(funcs)} times, at lines "
                      + ", ".join(str(f.lineno) for f in funcs), funcs[1].lineno)
    return funcs[0]


def _did_you_mean(key: str, name: str, nodes: Sequence[ast.AST]) -> str:
    """``did you mean `key: closest`?`` among the names of ``nodes``, or "" when none is close."""
    from difflib import get_close_matches

    close = get_close_matches(name, sorted({n.name for n in nodes}), n=3)
    if not close:
        return ""
    more = f" (or {' or '.join(close[1:])})" if close[1:] else ""
    return f"did you mean `{key}: {close[0]}`{more}? correct the name in the recipe's point"


def _nested(func: ast.AST, name: str, where: str) -> ast.AST:
    """The function ``name`` defined inside ``func`` (in any of its blocks, not inside another def)."""
    from .points import blocks

    found, defined, todo = [], [], [func]
    while todo:
        node = todo.pop()
        for block in blocks(node):
            for stmt in block:
                if isinstance(stmt, _DEFS):
                    (found if stmt.name == name else defined).append(stmt)
                elif not isinstance(stmt, ast.ClassDef):
                    todo.append(stmt)
    if not found:
        raise _Failed(f"{where} defines no nested function {name}", func.lineno,
                      hint=_did_you_mean("nested", name, defined))
    if len(found) > 1:
        raise _Failed(f"{where} defines {name} {len(found)} times, at lines "
                      + ", ".join(str(f.lineno) for f in sorted(found, key=lambda f: f.lineno)), found[1].lineno)
    return found[0]


def _named_by(points: Sequence[Point]) -> str:
    """``, named by the recipe at recipe.yaml:L:C``: where the points that name a scope are written."""
    places = list(dict.fromkeys(str(p.where) for p in points if p.where is not None))
    if not places:
        return ""
    return ", named by the recipe at " + (", ".join(places[:-1]) + " and " + places[-1] if places[1:] else places[0])


def _method(tree: ast.Module, lines: List[str], settings: Settings, cls: Optional[str], method: str,
            nested: Optional[str], points: Sequence[Point]) -> Tuple[str, ast.AST, List[Insertion]]:
    """The method's (or function's) new lines, with its qualified name and its node for the compile check."""
    try:
        func = _find(tree, cls, method)
        if nested:
            func = _nested(func, nested, method if cls is None else f"{cls}.{method}")
    except _Failed as failed:
        r = failed.result
        raise _Failed(r.reason + _named_by(points), r.line, r.col, r.hint) from None
    if nested:
        method = f"{method}.{nested}"
    scan = scan_method(func, cls, method)
    out = []
    for point in points:
        try:
            sites = REGISTRY[point.at](scan, point)
        except NotFound as exc:
            raise _Failed(exc.reason, exc.line) from None
        for site in sites:
            if isinstance(site, Decorate):
                index, indent = func.lineno - 1, _indent(lines[func.lineno - 1])
                code = codegen.exit_decorator(settings, point, func)
            else:
                index, indent = _position(site, lines, scan)
                code = codegen.call_statement(settings, point)
            out.append(Insertion(index, indent + code))
    if any(i.index == len(lines) for i in out) and lines and not lines[-1].endswith(("\n", "\r")):
        raise _Failed("the file does not end with a newline and the line would go after its last line; "
                      "patchkit only adds whole lines (add a newline at the end of the file)", len(lines))
    return scan.qualname, func, out


def _check_method_compiles(lines: List[str], qualname: str, func: ast.AST, found: Sequence[Insertion]) -> None:
    """The method with its new lines must compile on its own (an indented one under a stand-in class header)."""
    first = _first_line(func)
    shifted = [Insertion(i.index - (first - 1), i.text) for i in found]
    method_text = insert("", shifted, [ln.rstrip("\r\n") + "\n" for ln in lines[first - 1:func.end_lineno]])
    try:
        compile(("class _:\n" if func.col_offset else "") + method_text, "<method>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise _Failed(f"internal error: {qualname} would not compile with the new lines ({exc.msg}); "
                      "nothing was written (please report this with the target file)", exc.lineno) from None


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t\f"))]


def _first_line(stmt: ast.stmt) -> int:
    return min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])


def _position(site: Site, lines: List[str], scan) -> Tuple[int, str]:
    """The 0-based line index before which the new line goes, and its indentation."""
    block, i = site.block, site.index
    first = block[0]
    line = lines[first.lineno - 1]
    indent = _indent(line)
    if len(indent.encode("utf-8")) != first.col_offset:
        where = f"the {scan.kind}" if site.owner is scan.func else f"the block at line {site.owner.lineno}"
        raise _Failed(f"{where} in {scan.qualname} is written on one line; patchkit only adds whole lines",
                      first.lineno)
    while 0 < i < len(block) and _first_line(block[i]) == block[i - 1].end_lineno:
        i += 1  # `a; b` on one line: the new line goes after the whole line
    return (_first_line(block[i]) - 1 if i < len(block) else block[-1].end_lineno), indent


def _check_with_libcst(codes: Sequence[str]) -> None:
    """Every new statement goes through libcst's parser: each line one complete statement (or decorator).

    One small module holds them all (a decorator gets a stand-in function to
    decorate), so the parser runs once per file, not once per line.  A line
    makes at most one statement, so as many statements as lines, with no
    blank or comment-only line among them, means each line is exactly one.
    (The two header lines are plain literals, checked by the tests.)
    """
    import libcst as cst  # only when lines are generated: list/status/--help never pay for it

    if not codes:
        return
    one_each = f"internal error: generated lines do not make one statement each: {'; '.join(codes)}"
    if any("\n" in code or "\r" in code for code in codes):
        raise _Failed(one_each)
    parts = [code + ("\ndef _(): pass" if code.startswith("@") else "") for code in codes]
    try:
        module = cst.parse_module("\n".join(parts) + "\n")
    except cst.ParserSyntaxError as exc:  # a bug in patchkit, never the recipe author's
        code = next(c for c, n in zip(codes, _line_numbers(parts)) if n >= exc.raw_line)
        raise _Failed(f"internal error: generated line is not valid Python ({exc.message}): {code}") from None
    if len(module.body) != len(codes) or module.footer or any(node.leading_lines for node in module.body):
        raise _Failed(one_each)


def _line_numbers(parts: Sequence[str]) -> List[int]:
    """The 1-based number of the last line of each part once they are joined by newlines."""
    numbers, last = [], 0
    for part in parts:
        last += part.count("\n") + 1
        numbers.append(last)
    return numbers
