"""The kinds of point a recipe's ``at:`` names, declared with their examples: no libcst here.

A kind (:class:`Kind`) says where its line goes (``summary``), the keys a
point of it needs (``call``, ``loop``), the actions it allows, how messages
name it, and VALID / INVALID examples that the test suite runs through the
engine for every kind (``tests/test_point_kinds.py``).  Recipe validation,
the JSON schema, ``patchkit show`` and the docs read :data:`KINDS`; the
engine's finders (:mod:`patchkit.engine.points`) register under the same
names, and a test holds the two lists equal.
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Sequence, Tuple

from patchkit.core.model import Point

STATEMENT_ACTIONS = ("start", "step", "refuse", "mark")  # what a line at a statement position may do


class Example(NamedTuple):
    """A kind's example, run by the tests: ``point`` (as a recipe writes it, in ``class A`` method ``run``
    unless it says otherwise) on ``source`` gives ``after`` (valid) or fails with ``reason`` in its message."""

    source: str
    point: Dict[str, Any]
    after: str = ""
    reason: str = ""


class Kind(NamedTuple):
    """One kind of point: what a recipe's ``at:`` names."""

    name: str
    summary: str  # one line: where the point's line goes
    needs: Tuple[str, ...] = ()  # keys the point must have ("call", "loop"); no other kind may take them
    actions: Tuple[str, ...] = STATEMENT_ACTIONS
    what: str = "{at}"  # how a point of this kind is named in messages and `patchkit show` ({call}, {at})
    valid: Tuple[Example, ...] = ()
    invalid: Tuple[Example, ...] = ()


KINDS: Dict[str, Kind] = {}


def declare(name: str, summary: str, *, needs: Tuple[str, ...] = (), actions: Tuple[str, ...] = STATEMENT_ACTIONS,
            what: str = "{at}", valid: Sequence[Example] = (), invalid: Sequence[Example] = ()) -> None:
    KINDS[name] = Kind(name, summary, tuple(needs), tuple(actions), what, tuple(valid), tuple(invalid))


def describe(point: Point) -> str:
    """``step after self.work in A.run``: a point as messages and `patchkit show` name it."""
    what = KINDS[point.at].what.format(at=point.at, call=point.call)
    if point.loop:
        what += " of the loop " + " / ".join(s.describe() for s in point.loop)
    label = f" {point.name!r}" if point.name else ""
    return f"{point.action}{label} {what} in {'function ' if point.cls is None else ''}{point.scope}"


_CALLS_WORK = "class A:\n    def run(self):\n        with self.timer():\n            out = self.work()\n        return out\n"

_LOOP = "class A:\n    def run(self, batches):\n        for i, mb in enumerate(batches):\n            self.work(mb)\n"

_OVER = {"iter": "batches"}

_STEP = '_patchkit_runtime.step("k")  # patchkit:k\n'

_RANGES_WORK = "class A:\n    def run(self):\n        out = self.work()\n        return out\n"

_RANGE = {"action": "range", "name": "work"}


declare("method_start", "the first line of the method's body (after its docstring)", valid=[
    Example('class A:\n    def run(self):\n        """Doc."""\n        return 1\n',
            {"at": "method_start", "action": "start"},
            after='class A:\n    def run(self):\n        """Doc."""\n'
                  '        _patchkit_runtime.start("k")  # patchkit:k\n        return 1\n'),
], invalid=[
    Example("class A:\n    def other(self):\n        pass\n", {"at": "method_start"}, reason="no method run"),
])


declare("method_end", "after the last statement of the method's body, when the end can be reached", valid=[
    Example("class A:\n    def run(self):\n        self.work()\n", {"at": "method_end"},
            after='class A:\n    def run(self):\n        self.work()\n        _patchkit_runtime.step("k")  # patchkit:k\n'),
], invalid=[
    Example("class A:\n    def run(self):\n        return self.work()\n", {"at": "method_end"},
            reason="ends with a return at line 3"),
])


declare("on_exit", "a decorator that steps on every way out of the method (return or exception)",
        actions=("step",), valid=[
    Example("class A:\n    def run(self, x):\n        return self.work(x)\n", {"at": "on_exit"},
            after='class A:\n    @_patchkit_runtime.on_exit("k")  # patchkit:k\n'
                  '    def run(self, x):\n        return self.work(x)\n'),
], invalid=[
    Example("class A:\n    def run(self):\n        yield 1\n", {"at": "on_exit"}, reason="is a generator"),
    Example("class A:\n    async def run(self):\n        return 1\n", {"at": "on_exit"}, reason="is async"),
])


declare("after_call", "the line after the statement whose value is the call `call:` names", needs=("call",),
        what="after {call}", valid=[
    Example(_CALLS_WORK, {"at": "after_call", "call": "self.work"},
            after="class A:\n    def run(self):\n        with self.timer():\n            out = self.work()\n"
                  '            _patchkit_runtime.step("k")  # patchkit:k\n        return out\n'),
], invalid=[
    Example(_CALLS_WORK, {"at": "after_call", "call": "self.other"}, reason="no statement calling self.other in A.run"),
    Example("class A:\n    def run(self):\n        return g(self.work())\n", {"at": "after_call", "call": "self.work"},
            reason="no statement calling self.work"),
])


declare("before_call", "the line before the statement whose value is the call `call:` names", needs=("call",),
        what="before {call}", valid=[
    Example(_CALLS_WORK, {"at": "before_call", "call": "self.work", "action": "start"},
            after="class A:\n    def run(self):\n        with self.timer():\n"
                  '            _patchkit_runtime.start("k")  # patchkit:k\n            out = self.work()\n'
                  "        return out\n"),
], invalid=[
    Example("class A:\n    def run(self):\n        self.work()\n        self.work()\n",
            {"at": "before_call", "call": "self.work"}, reason="found 2 statements calling self.work"),
])


declare("before_loop", "the line before the loop `loop:` selects", needs=("loop",), valid=[
    Example(_LOOP, {"at": "before_loop", "loop": _OVER, "action": "start"},
            after="class A:\n    def run(self, batches):\n        "
                  '_patchkit_runtime.start("k")  # patchkit:k\n'
                  "        for i, mb in enumerate(batches):\n            self.work(mb)\n"),
], invalid=[
    Example(_LOOP, {"at": "before_loop", "loop": {"iter": "other"}}, reason="no loop over other in A.run"),
])


declare("loop_start", "the first line of the body of the loop `loop:` selects", needs=("loop",), valid=[
    Example(_LOOP, {"at": "loop_start", "loop": {"target": "mb"}},
            after="class A:\n    def run(self, batches):\n        for i, mb in enumerate(batches):\n"
                  "            " + _STEP + "            self.work(mb)\n"),
], invalid=[
    Example(_LOOP, {"at": "loop_start", "loop": {"calls": "self.rest"}}, reason="no loop innermost calling self.rest"),
])


declare("loop_end", "after the last line of the body of the loop `loop:` selects, when it is reached",
        needs=("loop",), valid=[
    Example(_LOOP, {"at": "loop_end", "loop": {"calls": "self.work"}},
            after="class A:\n    def run(self, batches):\n        for i, mb in enumerate(batches):\n"
                  "            self.work(mb)\n            " + _STEP),
], invalid=[
    Example("class A:\n    def run(self, batches):\n        for mb in batches:\n            if not mb:\n"
            "                continue\n            self.work(mb)\n", {"at": "loop_end", "loop": _OVER},
            reason="has a continue at line 5"),
])


declare("around_call", "a range opened right before the statement whose value is the call `call:` names, and "
        "closed right after it", needs=("call",), actions=("range",), what="around {call}", valid=[
    Example(_RANGES_WORK, {"at": "around_call", "call": "self.work", **_RANGE},
            after="class A:\n    def run(self):\n"
                  '        _patchkit_runtime.range_start("k", "work")  # patchkit:k\n'
                  "        out = self.work()\n"
                  '        _patchkit_runtime.range_end("k", "work")  # patchkit:k\n'
                  "        return out\n"),
], invalid=[
    Example(_RANGES_WORK, {"at": "around_call", "call": "self.rest", **_RANGE}, reason="no statement calling self.rest"),
])


declare("method", "a range around every call of the method: a decorator that closes it on every way out",
        actions=("range",), what="around each whole call", valid=[
    Example(_RANGES_WORK, {"at": "method", **_RANGE},
            after='class A:\n    @_patchkit_runtime.ranged("k", "work")  # patchkit:k\n'
                  "    def run(self):\n        out = self.work()\n        return out\n"),
], invalid=[
    Example("class A:\n    async def run(self):\n        return 1\n", {"at": "method", **_RANGE}, reason="is async"),
    Example("class A:\n    def run(self):\n        yield 1\n", {"at": "method", **_RANGE}, reason="is a generator"),
])
