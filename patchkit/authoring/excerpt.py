"""One function of a file, cut out with what holds it, as a recipe's before/after example shows it.

:func:`excerpt` keeps the class line (decorators and bases included) with
only the one method in its body, or the module-level function alone; a
function nested in either comes with it.  :func:`example` runs the engine on
that text and returns ``(before, after)`` as a recipe's ``examples:`` writes
them: ``after`` without the module-header lines, which the examples leave out
(:func:`patchkit.engine.examples.run_examples` compares so).
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import libcst as cst

from patchkit.core.model import Applied, CannotApply, Point, Settings
from patchkit.engine.marks import split_lines


def excerpt(source: str, cls: Optional[str], function: str) -> str:
    """The text of ``cls.function`` (``cls`` None: the module-level ``function``), held by its class only."""
    module = cst.parse_module(source)
    for node in module.body:
        if cls is None and isinstance(node, cst.FunctionDef) and node.name.value == function:
            return _code(module, node.with_changes(leading_lines=()))
        if cls is not None and isinstance(node, cst.ClassDef) and node.name.value == cls \
                and isinstance(node.body, cst.IndentedBlock):
            for member in node.body.body:
                if isinstance(member, cst.FunctionDef) and member.name.value == function:
                    body = node.body.with_changes(body=[member.with_changes(leading_lines=())])
                    return _code(module, node.with_changes(body=body, leading_lines=()))
    raise LookupError(f"no {function if cls is None else cls + '.' + function} at the top of the file")


def _code(module: cst.Module, node: cst.CSTNode) -> str:
    text = module.with_changes(body=[node], header=[], footer=[]).code
    return "".join(line.rstrip() + "\n" for line in split_lines(text)).rstrip("\n") + "\n"


def example(source: str, settings: Settings, cls: Optional[str], function: str,
            points: Sequence[Point]) -> Tuple[str, str]:
    """``(before, after)``: the excerpt of the function, and what the recipe's points make of it."""
    from patchkit.engine.codegen import header_lines
    from patchkit.engine.codemod import transform

    before = excerpt(source, cls, function)
    result = transform(before, settings, points)
    if isinstance(result, CannotApply):
        raise ValueError(result.reason)
    assert isinstance(result, Applied)
    header = set(header_lines(settings))
    after = "".join(ln for ln in split_lines(result.text) if ln.rstrip("\r\n") not in header)
    return before, after
