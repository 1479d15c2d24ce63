"""``at: method_end``: after the last statement of the function's body, where that end can be reached."""

from __future__ import annotations

from patchkit.recipe.pointkind import END, Example, PointKind, Refusal


class MethodEnd(PointKind):
    name = "method_end"
    summary = "after the last statement of the method's body, when the end can be reached"
    place = END
    refusals = (
        Refusal(lambda scan, func: scan.ends_with(func, "return", "raise"),
                "{qualname} ends with a {word} {at}; the end of the {scope} is never reached there "
                "(use `at: on_exit` to step on every way out)"),
    )
    VALID = (
        Example("class A:\n    def run(self):\n        self.work()\n", {"at": "method_end"},
                after='class A:\n    def run(self):\n        self.work()\n'
                      '        _patchkit_runtime.step("k")  # patchkit:k\n'),
    )
    INVALID = (
        Example("class A:\n    def run(self):\n        return self.work()\n", {"at": "method_end"},
                reason="ends with a return at line 3"),
    )

    def find(self, scan, func):
        return [scan.body_end(func)]
