"""The shape of the lines a recipe inserts in a file, for scripts/sweep.py: each line with its class and function,
the loops around it and the statement before it, so that two releases compare line by line, numbers aside."""

from __future__ import annotations

import ast
import copy
from typing import List, NamedTuple, Sequence, Tuple


class Shape(NamedTuple):
    """One inserted line, without its line number."""

    scope: str  # Class.method (or function), dotted
    loops: Tuple[str, ...]  # the headers of the loops around it in its function, outermost first
    text: str  # the inserted statement
    before: str  # the statement just before it (a compound statement's header), or its block's header


def squeeze(text: str) -> str:
    return " ".join(text.split())


def shapes(text: str, recipe_id: str) -> List[Shape]:
    """The shape of each line ``recipe_id`` inserted in ``text`` (a patched file) inside a class or function."""
    lines = text.splitlines()
    marker = "# patchkit:" + recipe_id
    marked = {i for i, line in enumerate(lines, 1) if line.rstrip().endswith(marker)}
    out: List[Shape] = []

    def src(first: int, last: int) -> str:
        return squeeze(" ".join(lines[first - 1:last]))

    def header(stmt: ast.AST) -> str:
        """A statement as the tree reads it (layout and comments aside); a compound one by its header alone."""
        if isinstance(stmt, ast.match_case):  # no line of its own in the tree
            return squeeze("case %s%s:" % (ast.unparse(stmt.pattern), " if " + ast.unparse(stmt.guard) if stmt.guard else ""))
        if isinstance(stmt, ast.Match):
            return "match %s:" % squeeze(ast.unparse(stmt.subject))
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            return "(docstring)"  # its words are no part of the shape
        if not isinstance(getattr(stmt, "body", None), list):
            return squeeze(ast.unparse(stmt))
        bare = copy.copy(stmt)
        for field, empty in (("body", [ast.Pass()]), ("orelse", []), ("finalbody", []), ("handlers", []),
                             ("decorator_list", [])):
            if hasattr(bare, field):
                setattr(bare, field, empty)
        return squeeze(ast.unparse(bare).split("\n")[0])

    def visit(node: ast.AST, scope: Tuple[str, ...], loops: Tuple[str, ...]) -> None:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            prev = "" if isinstance(node, ast.Module) else header(node)
            for stmt in block:
                if stmt.lineno in marked:
                    text = src(stmt.lineno, stmt.end_lineno)
                    if scope:  # the runtime's import at the top of the module is the same everywhere
                        out.append(Shape(".".join(scope), loops, text, prev))
                    prev = text
                    continue
                enter(stmt, scope, loops, prev)
                prev = header(stmt)
        for child in getattr(node, "handlers", []) + getattr(node, "cases", []):
            visit(child, scope, loops)

    def enter(stmt: ast.stmt, scope: Tuple[str, ...], loops: Tuple[str, ...], prev: str) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner = scope + (stmt.name,)
            before = prev
            for deco in stmt.decorator_list:
                text = src(deco.lineno, deco.end_lineno or deco.lineno)
                if deco.lineno in marked:
                    out.append(Shape(".".join(inner), loops, text, before))
                before = text
            visit(stmt, inner, () if not isinstance(stmt, ast.ClassDef) else loops)
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            visit(stmt, scope, loops + (header(stmt),))
        else:
            visit(stmt, scope, loops)

    visit(ast.parse(text), (), ())
    return out


def _apart(new: object, old: object, width: int = 50) -> Tuple[str, str]:
    """Both texts from a little before where they part, cut to ``width``."""
    new = " / ".join(new) if isinstance(new, tuple) else str(new)
    old = " / ".join(old) if isinstance(old, tuple) else str(old)
    same = 0
    while same < min(len(new), len(old)) and new[same] == old[same]:
        same += 1
    start = 0 if max(len(new), len(old)) <= width else max(0, same - 15)

    def cut(text: str) -> str:
        part = text[start:start + width]
        return ("..." if start else "") + part + ("..." if start + width < len(text) else "")

    return cut(new), cut(old)


def compare(base: Sequence[Shape], new: Sequence[Shape], base_version: str) -> Tuple[str, str]:
    """("same", "") or ("differs", the first difference in one line)."""
    if list(base) == list(new):
        return "same", ""
    if len(base) != len(new):
        return "differs", "%d inserted line(s), %d on %s" % (len(new), len(base), base_version)
    for i, (b, n) in enumerate(zip(base, new), 1):
        for field in Shape._fields:
            if getattr(b, field) != getattr(n, field):
                here, there = _apart(getattr(n, field), getattr(b, field))
                return "differs", "line %d, %s: %r (on %s: %r)" % (i, field, here, base_version, there)
    return "differs", ""  # pragma: no cover - equal lists are caught above
