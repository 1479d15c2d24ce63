"""Where a call already running when attach gets in meets the recipe's lines: a function that runs for the whole job
(a trainer's ``train()``, transformers' ``_inner_training_loop``) keeps its own code object until it returns, so a
swap never reaches its loop.  For such a call the job runs the recipe's statements itself, from a line trace on
that one frame (:mod:`patchkit.runtime.attach.live`); this says which, and where.

:func:`triggers` compares the file with its instrumented text (:class:`difflib.SequenceMatcher`, line by line):
each block of lines the recipe inserted inside a target function, directly before a statement of the file at the
same indentation (``loop_start``, ``before_call``, a statement point...), is one trigger: the statement's first
and last line in the file, and the inserted lines.  Lines inserted after the last statement of a block (a
``loop_end``, an ``after_call`` at a block's end) precede no statement there: they are no trigger (such a point
waits for the function's next call, as before).  Standard library only (``ast``, ``difflib``).
"""

from __future__ import annotations

import ast
import difflib
import textwrap
from typing import List, Optional, Sequence, Tuple

Target = Tuple[Optional[str], str, Optional[str]]  # (class, method or function, nested)


def span(tree: ast.Module, target: Target) -> Optional[Tuple[int, int]]:
    """The first and last line of the body of the function ``target`` names (its first definition), or None."""
    cls, method, nested = target
    scopes: Sequence[ast.AST] = [tree]
    if cls:
        scopes = [n for s in scopes for n in ast.walk(s) if isinstance(n, ast.ClassDef) and n.name == cls][:1]
    names = [method] + ([nested] if nested else [])
    for name in names:
        scopes = [n for s in scopes for n in ast.walk(s)
                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name][:1]
    if not scopes:
        return None
    fn = scopes[0]
    return fn.body[0].lineno, fn.body[-1].end_lineno or fn.body[-1].lineno


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _statements(tree: ast.Module) -> dict:
    """Each statement's first line, to its last."""
    return {n.lineno: n.end_lineno or n.lineno for n in ast.walk(tree) if isinstance(n, ast.stmt)}


def triggers(original: str, instrumented: str, target: Target) -> List[Tuple[int, int, str]]:
    """``(first, last, statements)`` for each block the recipe inserted in ``target``'s body before a statement of
    the file at its own indentation: that statement's lines in the file, and the inserted text, dedented."""
    try:
        tree = ast.parse(original)
    except (SyntaxError, ValueError):
        return []
    where = span(tree, target)
    if where is None:
        return []
    starts = _statements(tree)
    old, new = original.splitlines(), instrumented.splitlines()
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "insert" or i1 >= len(old):
            continue
        line = i1 + 1  # the file's line the inserted block precedes
        added = new[j1:j2]
        if not where[0] <= line <= where[1] or line not in starts or not added:
            continue
        if any(_indent(a) != _indent(old[i1]) for a in added if a.strip()) or "patchkit" not in "".join(added):
            continue
        out.append((line, starts[line], textwrap.dedent("\n".join(added)) + "\n"))
    return out
