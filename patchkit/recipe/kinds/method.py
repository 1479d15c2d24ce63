"""``at: method``: a labelled range around every call of the function, by a decorator that closes it on every
way out.  The runtime opens and closes it only while a capture window of the recipe is open."""

from __future__ import annotations

from patchkit.recipe.pointkind import DECORATOR, DEF, Example, PointKind, wraps_whole_calls

_WORK = "class A:\n    def run(self):\n        out = self.work()\n        return out\n"


class Method(PointKind):
    name = "method"
    summary = "a range around every call of the method: a decorator that closes it on every way out"
    place = DEF
    form = DECORATOR
    actions = ("range",)
    what = "around each whole call"
    refusals = wraps_whole_calls("a range", "close")
    VALID = (
        Example(_WORK, {"at": "method", "action": "range", "name": "work"},
                after='class A:\n    @_patchkit_runtime.ranged("k", "work")  # patchkit:k\n'
                      "    def run(self):\n        out = self.work()\n        return out\n"),
    )
    INVALID = (
        Example("class A:\n    async def run(self):\n        return 1\n",
                {"at": "method", "action": "range", "name": "work"}, reason="is async"),
        Example("class A:\n    def run(self):\n        yield 1\n",
                {"at": "method", "action": "range", "name": "work"}, reason="is a generator"),
    )

    def find(self, scan, func):
        return [scan.decorate(func)]
