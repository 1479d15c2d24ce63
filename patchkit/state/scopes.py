"""A module's text with only the functions a recipe's points are in, every other line kept as an empty line.

``patchkit attach`` needs the instrumented code of the target functions only (the job keeps its own module and
swaps their code objects), and libcst's parse of a whole module is most of what planning costs: transformers'
``trainer.py`` (4,700 lines) takes 0.6 s, the ``Trainer.training_step`` alone a few milliseconds.  :func:`only`
blanks every top-level function and class no point is in, and in a class a point is in, every other method
(their decorators too); imports, assignments and the rest stay, so the header goes where it would go.  Each
line keeps its number (a blanked line is an empty line with its own line ending), so what the engine says about
a line is said about the file's own line.  The code of a target function comes out as it would from the whole
file (tests/test_scopes.py compares them on every fixture and recipe).

When the text cannot be read by :mod:`ast`, or two statements share a line, it is given back whole.  This is
planning's, not the engine's (which reads code on libcst's tree only): :mod:`ast` only says which lines to leave
out, and the engine still finds every point on libcst's tree of what is left.
"""

from __future__ import annotations

import ast
from typing import Iterable, List, Optional, Set, Tuple

from patchkit.core.model import Point


def only(text: str, points: Iterable[Point]) -> str:
    """``text`` with the functions no point of ``points`` is in blanked (see the module's docstring)."""
    wanted: Set[Tuple[Optional[str], str]] = {(p.cls, p.method) for p in points}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text
    blank: List[Tuple[int, int]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (None, node.name) not in wanted:
            blank.append(_span(node))
        elif isinstance(node, ast.ClassDef):
            methods = {m for c, m in wanted if c == node.name}
            if not methods:
                blank.append(_span(node))
                continue
            blank += [_span(n) for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and n.name not in methods]
    if not blank or _shared_lines(tree):
        return text
    lines = text.splitlines(keepends=True)
    for first, last in blank:
        for k in range(first - 1, min(last, len(lines))):
            body = lines[k].rstrip("\r\n")
            lines[k] = lines[k][len(body):]  # its own line ending, or none on a last line without one
    return "".join(lines)


def _span(node: ast.stmt) -> Tuple[int, int]:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return first, node.end_lineno or node.lineno


def _shared_lines(tree: ast.Module) -> bool:
    """Whether two statements of the module's or of a class's body share a line (``a = 1; def f(): ...``)."""
    bodies = [tree.body] + [n.body for n in tree.body if isinstance(n, ast.ClassDef)]
    for body in bodies:
        for before, after in zip(body, body[1:]):
            if (before.end_lineno or before.lineno) >= min([after.lineno] + [d.lineno for d in
                                                                              getattr(after, "decorator_list", [])]):
                return True
    return False
