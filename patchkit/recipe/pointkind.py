"""What a kind of point is: the contract each module of :mod:`patchkit.recipe.kinds` fills in.  No libcst here.

A kind is one class, a subclass of :class:`PointKind`, as a Fixit rule is one
class holding its examples and its visitor.  It says:

* ``name``: the word a recipe's ``at:`` writes (the module is named after it);
* ``summary``: where its line goes, in one line (the reference and the schema show it);
* its shape: ``place``, the line of a function's outline it goes on, which
  says what a point of it selects (its anchor) and the keys the point needs,
  and ``form``, a :data:`STATEMENT` or a :data:`DECORATOR` (``patchkit show``
  prints one line or a decorator);
* ``actions``: what its line may do; ``what``: how messages name a point of it;
* ``refusals``: the reasons it cannot go at an anchor, stated once: the
  engine's finder raises them, ``patchkit points`` shows them;
* ``VALID`` / ``INVALID``: examples that tests/test_point_kinds.py runs
  through the engine;
* :meth:`PointKind.find`: where its line goes at one anchor, asked of the
  engine's scan of the function.

The places and their anchors (:data:`PLACES`):

========== =========================================== =============
place      the anchor a point of it selects            keys it needs
========== =========================================== =============
def        the function (its ``def`` line)             none
call       each statement whose value is ``call:``     ``call:``
loop       each loop ``loop:`` selects (its header)    ``loop:``
loop_end   each loop ``loop:`` selects (its body end)  ``loop:``
end        the function (the end of its body)          none
========== =========================================== =============

A kind's module imports nothing but this module: no libcst and nothing of the
engine, so recipe validation, the schema and ``patchkit show`` read the kinds
without loading the codemod.  Its ``find`` and refusals get the engine's scan
(:class:`patchkit.engine.points.scan.Scan`) as an argument and build sites
with its methods (``scan.before``, ``scan.after``, ``scan.body_start``,
``scan.body_end``, ``scan.decorate``).
"""

from __future__ import annotations

import abc
from typing import Any, Callable, ClassVar, Dict, List, NamedTuple, Sequence, Tuple

from patchkit.core.vocabulary import ACTIONS

STATEMENT, DECORATOR = "statement", "decorator"  # a kind's form: one line in a block, or a decorator on the def
FORMS = (STATEMENT, DECORATOR)

DEF, END, CALL, LOOP, LOOP_END = "def", "end", "call", "loop", "loop_end"  # a kind's place, in a function's order
FUNCTION = "function"  # the anchor of the places def and end
PLACES: Dict[str, Tuple[str, Tuple[str, ...]]] = {  # place -> (the anchor a point selects, the keys it needs)
    DEF: (FUNCTION, ()), CALL: (CALL, ("call",)), LOOP: (LOOP, ("loop",)), LOOP_END: (LOOP, ("loop",)),
    END: (FUNCTION, ()),
}

STATEMENT_ACTIONS = ("start", "step", "refuse", "mark")  # what a line at a statement position may do


class Example(NamedTuple):
    """A kind's example, run by the tests: ``point`` (as a recipe writes it, in ``class A`` method ``run``
    unless it says otherwise) on ``source`` gives ``after`` (valid) or fails with ``reason`` in its message."""

    source: str
    point: Dict[str, Any]
    after: str = ""
    reason: str = ""


class Refusal(NamedTuple):
    """A reason a kind's line cannot go at an anchor, stated once for the finder and for ``patchkit points``.

    ``test(scan, anchor)`` returns the nodes that stop it (none: the line can
    go there).  ``reason`` is formatted with ``qualname`` (``A.run``), ``scope``
    (``method`` or ``function``), ``line`` (the anchor's line), ``at`` (the
    nodes' lines: ``at line 5``, ``at lines 5 and 7``) and ``word`` (the first
    node's keyword: ``return``, ``continue``...); the error points at the first
    node's line.
    """

    test: Callable[[Any, Any], Sequence[Any]]
    reason: str


def wraps_whole_calls(what: str, acts: str) -> Tuple[Refusal, Refusal]:
    """The refusals of a kind whose decorator wraps each whole call (``what`` it is, and what it ``acts`` on the
    way out): an async function and a generator return before their work is done."""
    return (Refusal(lambda scan, func: [func] if func.asynchronous else [],
                    f"{{qualname}} is async; {what} wraps plain {{scope}}s only"),
            Refusal(lambda scan, func: scan.yields,
                    f"{{qualname}} is a generator (yield {{at}}); {what} would {acts} when the generator is created, "
                    "not when it finishes"))


class PointKind(abc.ABC):
    """One kind of point: subclass it in a module of ``patchkit/recipe/kinds/`` named after ``name``."""

    name: ClassVar[str]
    summary: ClassVar[str]
    place: ClassVar[str]  # DEF, END, CALL, LOOP or LOOP_END
    form: ClassVar[str] = STATEMENT
    actions: ClassVar[Tuple[str, ...]] = STATEMENT_ACTIONS
    what: ClassVar[str] = "{at}"  # how messages and `patchkit show` name a point of it ({at}, {call})
    refusals: ClassVar[Tuple[Refusal, ...]] = ()
    VALID: ClassVar[Tuple[Example, ...]] = ()
    INVALID: ClassVar[Tuple[Example, ...]] = ()

    @property
    def anchor(self) -> str:
        """What a point of this kind selects: ``function``, ``call`` (statements) or ``loop``."""
        return PLACES[self.place][0]

    @property
    def needs(self) -> Tuple[str, ...]:
        """The keys a point of this kind must have (and the only kind-specific keys it may have)."""
        return PLACES[self.place][1]

    @abc.abstractmethod
    def find(self, scan: Any, anchor: Any) -> List[Any]:
        """Where the line goes at one anchor the point selects: sites made by the scan's methods.

        ``anchor`` is the function (``scan.func``) for the places def and end,
        a statement (``.node``, ``.block``, ``.index``, ``.call``) for call, a
        loop (``.node``, ``.block``, ``.index``) for loop and loop_end.  The
        refusals were checked before; a site in a one-line block is refused
        after, for every kind.
        """

    def __repr__(self) -> str:
        return f"<point kind {self.name}>"


def problems(kind: PointKind, module: str) -> List[str]:
    """What is wrong with a kind's declaration, found in ``module``: the engine and the docs rely on each part."""
    out = []
    if getattr(kind, "name", None) != module.rpartition(".")[2]:
        out.append(f"its name {getattr(kind, 'name', None)!r} is not its module's name")
    if not getattr(kind, "summary", ""):
        out.append("it has no summary")
    if getattr(kind, "place", None) not in PLACES:
        out.append(f"its place {getattr(kind, 'place', None)!r} is not one of {', '.join(PLACES)}")
    if kind.form not in FORMS:
        out.append(f"its form {kind.form!r} is not one of {', '.join(FORMS)}")
    if not kind.actions or not set(kind.actions) <= set(ACTIONS):
        out.append(f"its actions {kind.actions!r} are not among {', '.join(ACTIONS)}")
    if not kind.VALID or not kind.INVALID:
        out.append("it needs a VALID and an INVALID example")
    for ex in (*kind.VALID, *kind.INVALID):
        if ex.point.get("at") != getattr(kind, "name", None) or bool(ex.after) == bool(ex.reason):
            out.append(f"the example {ex.point} must have `at: {getattr(kind, 'name', None)}` and give either "
                       "`after` or `reason`")
    return out
