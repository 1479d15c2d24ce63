"""The loops of one function of a job's file, read with ast, and which loops each of a watch's moves entered,
turned or left.

A *move* (what ``patchkit attach --auto``'s watcher reports of a frame seen in two looks in a row, its ``wraps``)
is the frame's line changing from line ``a`` to line ``b``, forward or back, or staying on one line while the call
under it is new (``a == b``: a loop whose body is one statement).  Lines alone say what a move did once the
function's loops are known:

- a loop's extent is its header's first line to the last line of its body (not of its ``else``);
- a line's position in a loop is -1 on the header's lines, else the index of the top-level body statement whose
  lines hold it (``None`` between statements: no code runs there);
- a move *turned* the innermost loop holding both lines whose position of ``b`` is before that of ``a``; a move
  on one line, the innermost loop holding it; a move that fits no loop (a ``with`` ending, a loop of a
  comprehension, a forward move) turned nothing;
- a move *entered* each loop that holds ``b`` but not ``a`` (a forward move from before it, or a turn of a loop
  around it back into it), and *left* each that holds ``a`` but not ``b``.  Entering the header is the turn's
  start: the move on from the header into the body is none (as a move back to the header is the turn's start).

Each turn of a loop starts with a move that turned or entered it (:func:`moved`); a marker (an optimizer step, by
torch's hook) says exactly where the frame was between two looks, and :func:`with_marks` puts it in.  Only the function's own loops
count: not those of a ``def``, ``class`` or ``lambda`` nested in it (another code).  :class:`Sources` reads each
file once through the caller's ``source_of`` (``None``: not to be read) and never raises on what it reads: text
that is not Python has no loops.  :func:`turns` cuts one call's turns of a loop into complete ones (between two
starts with no break between: the loop left, or a loop around it turned, which left it and entered it again), and
:func:`turn_index` says after how many of them a marker came.
"""

from __future__ import annotations

import ast
import bisect
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

LOOPS = (ast.For, ast.AsyncFor, ast.While)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# What holds statements (no expression holds a loop); `match` is 3.10's
BLOCKS = (ast.stmt, ast.excepthandler) + ((ast.match_case,) if hasattr(ast, "match_case") else ())


class Loop(NamedTuple):
    """One ``for``/``while`` of a function, by lines."""

    header: int  # the header's first line (the keyword's)
    head_end: int  # the header's last line
    end: int  # the last line of the body
    body: Tuple[Tuple[int, int], ...]  # each top-level statement of the body: its first and last line

    def holds(self, line: int) -> bool:
        return self.header <= line <= self.end

    def pos(self, line: int) -> Optional[int]:
        if self.header <= line <= self.head_end:
            return -1
        for index, (first, last) in enumerate(self.body):
            if first <= line <= last:
                return index
        return None

    def encloses(self, other: "Loop") -> bool:
        """This loop holds ``other`` (another loop of the same function)."""
        return other != self and self.header <= other.header and other.end <= self.end


def first_line(node: ast.AST) -> int:
    """A statement's first line: a decorated ``def``'s or ``class``'s is its first decorator's."""
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])


def loop_of(node: ast.AST) -> Loop:
    heads = [node.test] if isinstance(node, ast.While) else [node.target, node.iter]
    head_end = max([node.lineno] + [h.end_lineno or h.lineno for h in heads])
    body = tuple((first_line(s), s.end_lineno or s.lineno) for s in node.body)
    return Loop(node.lineno, head_end, max(last for _, last in body), body)


def loops_in(function: ast.AST) -> Tuple[Loop, ...]:
    """The function's own loops, by header line: walked statement by statement, not into nested defs."""
    found: List[Loop] = []
    todo = list(function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, FUNCTIONS + (ast.ClassDef,)):
            continue
        if isinstance(node, LOOPS):
            found.append(loop_of(node))
        todo.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, BLOCKS))
    return tuple(sorted(found))


def function_at(tree: ast.AST, firstlineno: int, qualname: str) -> Optional[ast.AST]:
    """The ``def`` whose code starts at ``firstlineno`` (its first decorator's line when decorated), the one named
    as ``qualname`` ends when several start there."""
    name = qualname.rpartition(".")[2]
    there = [n for n in ast.walk(tree) if isinstance(n, FUNCTIONS) and first_line(n) == firstlineno]
    named = [n for n in there if n.name == name]
    return (named or there or [None])[0]


class Sources:
    """The job's files as ``source_of`` gives them, each read and parsed once; unreadable or not Python: empty."""

    def __init__(self, source_of: Callable[[str], Optional[str]]):
        self.source_of = source_of
        self.files: Dict[str, Tuple[List[str], Optional[ast.AST]]] = {}
        self.functions: Dict[Tuple[str, int, str], Tuple[Loop, ...]] = {}

    def file(self, path: str) -> Tuple[List[str], Optional[ast.AST]]:
        if path not in self.files:
            text, tree = self.source_of(path), None
            if isinstance(text, str):
                try:
                    tree = ast.parse(text, path)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    tree = None
            self.files[path] = (text.splitlines() if isinstance(text, str) else [], tree)
        return self.files[path]

    def line(self, path: str, line: int) -> str:
        lines = self.file(path)[0]
        return lines[line - 1].strip() if 0 < line <= len(lines) else ""

    def loops(self, path: str, firstlineno: int, qualname: str) -> Tuple[Loop, ...]:
        key = (path, firstlineno, qualname)
        if key not in self.functions:
            tree = self.file(path)[1]
            function = function_at(tree, firstlineno, qualname) if tree is not None else None
            self.functions[key] = loops_in(function) if function is not None else ()
        return self.functions[key]


def turned(loops: Sequence[Loop], a: int, b: int) -> Optional[int]:
    """The index in ``loops`` of the loop a move from line ``a`` to line ``b`` turned, or ``None``."""
    holding = sorted((i for i, loop in enumerate(loops) if loop.holds(a) and loop.holds(b)),
                     key=lambda i: loops[i].header, reverse=True)  # innermost first: loops nest
    if a == b:
        return holding[0] if holding else None
    for i in holding:
        pa, pb = loops[i].pos(a), loops[i].pos(b)
        if pa is not None and pb is not None and pb < pa:
            return i
    return None


def moved(loops: Sequence[Loop], a: int, b: int) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """The loops (indexes in ``loops``) whose turn a move from line ``a`` to line ``b`` started (it turned or
    entered them), and those it broke (it left them, or turned a loop around them)."""
    i = turned(loops, a, b)
    starts = tuple(j for j, loop in enumerate(loops) if j == i or (loop.holds(b) and not loop.holds(a)))
    breaks = tuple(j for j, loop in enumerate(loops) if (loop.holds(a) and not loop.holds(b))
                   or (i is not None and loops[i].encloses(loop)))
    return starts, breaks


Move = Tuple[float, float, int, int]  # (t_prev, t, from_line, to_line)
Mark = Tuple[float, int, int, float, float]  # (t, line, the call under the frame, its first look, its last look)


def with_marks(moves: Sequence[Move], marks: Sequence[Mark]) -> List[Move]:
    """One call's moves (sorted by time) with the lines its markers were at (sorted by time) put in: a move whose
    window ``(t_prev, t]`` holds markers went through their lines at their times (an optimizer step run wholly
    between two looks: the frame left a loop, or turned one, and came back).  Two lines in a row that are one are a
    move when the calls under the frame differ (a new step, or a new call seen after the marker's)."""
    out: List[Move] = []
    k = 0
    for t_prev, t, a, b in moves:
        while k < len(marks) and marks[k][0] <= t_prev:
            k += 1
        at_t, line, under = t_prev, a, None
        while k < len(marks) and marks[k][0] <= t:  # one at the look's time too: its call says which came first
            tm, m, child, first, last = marks[k]
            if m != line or (child != under if under is not None else first > t_prev):
                out.append((at_t, tm, line, m))
            at_t, line, under = tm, m, child
            k += 1
        if under is None or b != line or last < t:  # the call under the last marker was not seen at the look
            out.append((at_t, t, line, b))
    return out


Wrap = Tuple[float, float, int]  # (t_prev, t, to_line) of the move that started one turn


def turns(own: Sequence[Wrap], breaks: Sequence[float]) -> List[Tuple[int, int]]:
    """The complete turns of a loop in one call: pairs (i, i + 1) of its turns' starts ``own`` (sorted by time)
    with no break of the loop (times ``breaks``) after the first and at or before the second."""
    cuts = sorted(breaks)
    return [(i, i + 1) for i in range(len(own) - 1)
            if bisect.bisect_right(cuts, own[i][1]) == bisect.bisect_right(cuts, own[i + 1][1])]


def turn_index(loop: Loop, own: Sequence[Wrap], t: float, line: int) -> int:
    """How many of the loop's turns ``own`` started before a marker at time ``t`` from the loop's ``line``: a move
    whose window ``(t_prev, t]`` holds the marker (its end too: the sample then and the marker are not ordered)
    came before it when the marker's line is not after the line the move went to (the new turn ran that line,
    then was seen further on), else after it."""
    at = loop.pos(line)
    count = 0
    for t_prev, t_wrap, to_line in own:
        if t_wrap < t:
            count += 1
        elif t_prev < t:
            to = loop.pos(to_line)
            count += at is not None and to is not None and at <= to
    return count
