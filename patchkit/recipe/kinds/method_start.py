"""``at: method_start``: the first line of the function's body, after its docstring."""

from __future__ import annotations

from patchkit.recipe.pointkind import DEF, Example, PointKind


class MethodStart(PointKind):
    name = "method_start"
    summary = "the first line of the method's body (after its docstring)"
    place = DEF
    VALID = (
        Example('class A:\n    def run(self):\n        """Doc."""\n        return 1\n',
                {"at": "method_start", "action": "start"},
                after='class A:\n    def run(self):\n        """Doc."""\n'
                      '        _patchkit_runtime.start("k")  # patchkit:k\n        return 1\n'),
    )
    INVALID = (
        Example("class A:\n    def other(self):\n        pass\n", {"at": "method_start"}, reason="no method run"),
    )

    def find(self, scan, func):
        return [scan.body_start(func, after_docstring=True)]
