"""The kinds of point: each declared by the module that finds it, with its examples.

Standard library only (the finders, in the modules that declare them, use libcst).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Sequence, Tuple

from patchkit.core.model import Point

STATEMENT_ACTIONS = ("start", "step", "refuse", "mark")  # what a line at a statement position may do


Finder = Callable[[Any, Point], List[object]]  # (Scan, Point) -> the places, or NotFound


class Example(NamedTuple):
    """A kind's example, run by the tests: ``point`` (as a recipe writes it, in ``class A`` method ``run``
    unless it says otherwise) on ``source`` gives ``after`` (valid) or fails with ``reason`` in its message."""

    source: str
    point: Dict[str, Any]
    after: str = ""
    reason: str = ""


class Kind(NamedTuple):
    """One kind of point, declared by the module that finds it: what a recipe's ``at:`` names."""

    name: str
    summary: str  # one line: where the point's line goes
    find: Finder
    needs: Tuple[str, ...] = ()  # keys the point must have ("call", "loop"); no other kind may take them
    actions: Tuple[str, ...] = STATEMENT_ACTIONS
    what: str = "{at}"  # how a point of this kind is named in messages and `patchkit show` ({call}, {at})
    valid: Tuple[Example, ...] = ()
    invalid: Tuple[Example, ...] = ()


KINDS: Dict[str, Kind] = {}


def kind(name: str, summary: str, *, needs: Tuple[str, ...] = (), actions: Tuple[str, ...] = STATEMENT_ACTIONS,
         what: str = "{at}", valid: Sequence[Example] = (), invalid: Sequence[Example] = ()):
    """Declare the decorated finder as the kind ``name``."""

    def deco(fn: Finder) -> Finder:
        KINDS[name] = Kind(name, summary, fn, tuple(needs), tuple(actions), what, tuple(valid), tuple(invalid))
        return fn

    return deco


def describe(point: Point) -> str:
    """``step after self.work in A.run``: a point as messages and `patchkit show` name it."""
    what = KINDS[point.at].what.format(at=point.at, call=point.call)
    if point.loop:
        what += " of the loop " + " / ".join(s.describe() for s in point.loop)
    label = f" {point.name!r}" if point.name else ""
    return f"{point.action}{label} {what} in {'function ' if point.cls is None else ''}{point.scope}"
