"""``at: on_exit``: a decorator that steps on every way out of the function, a return or an exception."""

from __future__ import annotations

from patchkit.recipe.pointkind import DECORATOR, DEF, Example, PointKind, wraps_whole_calls


class OnExit(PointKind):
    name = "on_exit"
    summary = "a decorator that steps on every way out of the method (return or exception)"
    place = DEF
    form = DECORATOR
    actions = ("step",)
    refusals = wraps_whole_calls("on_exit", "step")
    VALID = (
        Example("class A:\n    def run(self, x):\n        return self.work(x)\n", {"at": "on_exit"},
                after='class A:\n    @_patchkit_runtime.on_exit("k")  # patchkit:k\n'
                      '    def run(self, x):\n        return self.work(x)\n'),
    )
    INVALID = (
        Example("class A:\n    def run(self):\n        yield 1\n", {"at": "on_exit"}, reason="is a generator"),
        Example("class A:\n    async def run(self):\n        return 1\n", {"at": "on_exit"}, reason="is async"),
    )

    def find(self, scan, func):
        return [scan.decorate(func)]
