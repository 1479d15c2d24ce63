"""Whether the end of a block is reached: :func:`leaving`, the statements that leave every path before it.

A point after the last statement of a function's (or a loop's) body is
only worth offering when some path gets there.  The last statement alone
does not tell: ``with ...: return loss`` ends the function inside a block.
A list of statements ends its paths when one of its statements does:

- a ``return`` or ``raise`` (and, in a loop's body, a ``break`` or
  ``continue`` of that loop: the ``words`` asked for);
- an ``if`` whose every branch ends its paths, an ``else`` included;
- a ``with`` whose body does (see below);
- a ``try`` whose ``finally`` does, or whose body (else its ``else``) and
  every handler do;
- a ``match`` whose every case does, one of them matching anything
  (``case _:`` or a bare name, without a guard);
- a ``while True:`` (or ``while 1:``) that no ``break`` of its own leaves,
  and a loop whose ``else`` ends its paths when no ``break`` of its own
  skips that ``else``.

A ``break`` counts where a path reaches it, and not inside a ``try`` whose
``finally`` always leaves (the ``finally`` wins).  Anything else may fall
through: a ``for`` may not run at all, and a call is not known never to
return (``sys.exit()`` counts as a call).  So the answer is CPython's own
(its compiler drops the code no path reaches; the tests hold the two
together), but for one choice: the end after a ``with`` whose block always
leaves is never reached, though a context manager that swallows an
exception raised in the block would carry on past it.
"""

from __future__ import annotations

from typing import Iterator, List, Sequence

import libcst as cst

_LOOPS = (cst.For, cst.While)
_ALL = ("return", "raise", "break", "continue")
_WORDS = {cst.Return: "return", cst.Raise: "raise", cst.Break: "break", cst.Continue: "continue"}


def leaving(block: cst.BaseSuite, words: Sequence[str] = ("return", "raise")) -> List[cst.CSTNode]:
    """The statements by which every path through ``block`` leaves it before its end; [] when its end is reached.
    A ``while True:`` loop that never breaks stands for the ways out inside it."""
    return _statements(block.body, tuple(words))


def _statements(body: Sequence[cst.CSTNode], words: tuple) -> List[cst.CSTNode]:
    for stmt in body:
        out = _leaves(stmt, words)
        if out:
            return out  # what follows is never reached
    return []


def _leaves(node: cst.CSTNode, words: tuple) -> List[cst.CSTNode]:
    if _WORDS.get(type(node)) in words:
        return [node]
    if isinstance(node, cst.SimpleStatementLine):
        return _statements(node.body, words)
    if isinstance(node, cst.If):
        body = leaving(node.body, words)
        other = _else(node.orelse, words)
        return body + other if body and other else []
    if isinstance(node, cst.With):
        return leaving(node.body, words)
    if isinstance(node, (cst.Try, cst.TryStar)):
        final = leaving(node.finalbody.body, words) if node.finalbody else []
        if final:
            return final
        main = leaving(node.body, words) or (leaving(node.orelse.body, words) if node.orelse else [])
        handlers = [leaving(h.body, words) for h in node.handlers]
        return main + [n for h in handlers for n in h] if main and all(handlers) else []
    if isinstance(node, cst.Match):
        cases = [leaving(c.body, words) for c in node.cases]
        whole = any(c.guard is None and _matches_anything(c.pattern) for c in node.cases)
        return [n for c in cases for n in c] if whole and all(cases) else []
    if isinstance(node, _LOOPS):
        if any(True for _ in _own_breaks(node.body)):  # a break a path reaches: the loop may end there
            return []
        if isinstance(node, cst.While) and _always_true(node.test):
            return [node]
        return leaving(node.orelse.body, words) if node.orelse else []
    return []


def _else(orelse, words: tuple) -> List[cst.CSTNode]:
    if orelse is None:
        return []
    if isinstance(orelse, cst.If):  # elif
        return _leaves(orelse, words)
    return leaving(orelse.body, words)


def _matches_anything(pattern: cst.MatchPattern) -> bool:
    if isinstance(pattern, cst.MatchAs):
        return pattern.pattern is None or _matches_anything(pattern.pattern)
    if isinstance(pattern, cst.MatchOr):
        return any(_matches_anything(p.pattern) for p in pattern.patterns)
    return False


def _always_true(test: cst.BaseExpression) -> bool:
    return (isinstance(test, cst.Name) and test.value == "True") or \
        (isinstance(test, cst.Integer) and test.evaluated_value != 0)


def _own_breaks(block: cst.BaseSuite) -> Iterator[cst.Break]:
    """The ``break`` statements of a loop's body that a path reaches and that leave that loop (in a loop inside:
    only those of its ``else``, when that loop can end without a break)."""
    for stmt in block.body:
        yield from _breaks_in(stmt)
        if _leaves(stmt, _ALL):
            return  # what follows is never reached


def _breaks_in(node: cst.CSTNode) -> Iterator[cst.Break]:
    if isinstance(node, cst.Break):
        yield node
    elif isinstance(node, _LOOPS):
        if node.orelse is not None and not (isinstance(node, cst.While) and _always_true(node.test)):
            yield from _own_breaks(node.orelse.body)
    elif isinstance(node, (cst.SimpleStatementLine, cst.BaseSuite)):
        yield from _own_breaks(node)
    elif isinstance(node, (cst.Try, cst.TryStar)):
        if node.finalbody is not None and leaving(node.finalbody.body, _ALL):  # it overrides any break before it
            yield from _own_breaks(node.finalbody.body)
            return
        yield from _own_breaks(node.body)
        for handler in node.handlers:
            yield from _own_breaks(handler.body)
        if node.orelse is not None and not leaving(node.body, _ALL):
            yield from _own_breaks(node.orelse.body)
        if node.finalbody is not None:
            yield from _own_breaks(node.finalbody.body)
    elif isinstance(node, cst.If):
        yield from _own_breaks(node.body)
        if node.orelse is not None:
            yield from _breaks_in(node.orelse)
    elif isinstance(node, (cst.Else, cst.With, cst.MatchCase)):
        yield from _own_breaks(node.body)
    elif isinstance(node, cst.Match):
        for case in node.cases:
            yield from _own_breaks(case.body)
