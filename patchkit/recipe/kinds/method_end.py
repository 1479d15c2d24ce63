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
        Example("class A:\n    def run(self, x):\n        if x:\n            return 1\n        with self.ctx():\n"
                "            self.work(x)\n", {"at": "method_end"},  # a path falls through the with
                after="class A:\n    def run(self, x):\n        if x:\n            return 1\n        with self.ctx():\n"
                      '            self.work(x)\n        _patchkit_runtime.step("k")  # patchkit:k\n'),
    )
    INVALID = (
        Example("class A:\n    def run(self):\n        return self.work()\n", {"at": "method_end"},
                reason="ends with a return at line 3"),
        Example("class A:\n    def run(self, x):\n        with self.ctx():\n            y = self.work(x)\n"
                "            return y.detach()\n", {"at": "method_end"},
                reason="ends with a return at line 5; the end of the method is never reached"),
        Example("class A:\n    def run(self, x):\n        try:\n            return self.work(x)\n"
                "        except ValueError:\n            raise RuntimeError(x)\n", {"at": "method_end"},
                reason="ends with a return or raise at lines 4 and 6"),
    )

    def find(self, scan, func):
        return [scan.body_end(func)]
