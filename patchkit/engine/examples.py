"""A recipe's own examples: each ``before`` must become its ``after`` (or stay unchanged, for the
reason given), applying twice must change nothing more, and taking patchkit's lines out must give
``before`` back.  ``patchkit test`` runs them; so does the test suite, for every built-in recipe.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, NamedTuple, Optional, Tuple

import libcst as cst
import libcst.matchers as m

from patchkit.engine import marks
from patchkit.core.model import AlreadyApplied, Applied, CannotApply, Example, Point, Settings
from patchkit.recipe.load import load_recipe


class ExampleOutcome(NamedTuple):
    recipe: str
    example: Example
    ok: bool
    message: str = ""


def run_examples(settings: Settings) -> List[ExampleOutcome]:
    """One outcome per example of the recipe; an example that sets options runs with those chosen."""
    recipe = settings.recipe
    out = []
    for ex in recipe.examples:
        chosen = load_recipe(Path(recipe.path), [f"{k}={v}" for k, v in ex.options], check_id=False) if ex.options else settings
        out.append(ExampleOutcome(recipe.id, ex, *_check_example(chosen, ex)))
    return out


def example_points(settings: Settings, source: str) -> Optional[List[Point]]:
    """An example is one file: of a recipe's points in several files, those whose class (or function) it defines.

    Read on libcst's tree, as the engine reads the file itself (async functions are ``FunctionDef`` there too)."""
    try:
        body = cst.parse_module(source).body
    except cst.ParserSyntaxError:
        return None
    classes = {n.name.value for n in body if m.matches(n, m.ClassDef())}
    functions = {n.name.value for n in body if m.matches(n, m.FunctionDef())}
    return [p for p in settings.active_points()
            if (p.cls in classes if p.cls is not None else p.method in functions)] or None


def _check_example(settings: Settings, ex: Example) -> Tuple[bool, str]:
    from patchkit.engine.lines import header_lines
    from patchkit.engine.codemod import transform

    points = example_points(settings, ex.before)
    result = transform(ex.before, settings, points)
    if ex.after is None:
        if not isinstance(result, CannotApply):
            return False, "expected the input to stay unchanged, but the recipe applied"
        if ex.reason and ex.reason not in result.reason:
            return False, f"expected the reason to mention {ex.reason!r}, got {result.reason!r}"
        return True, result.reason
    if not isinstance(result, Applied):
        return False, f"expected a change, got: {getattr(result, 'reason', 'already applied')}"
    header = set(header_lines(settings))
    got = "".join(ln for ln in marks.split_lines(result.text) if ln.rstrip("\r\n") not in header)
    if got != ex.after:
        import difflib

        d = "".join(difflib.unified_diff(marks.split_lines(ex.after), marks.split_lines(got), "expected", "got"))
        return False, "the output differs from `after`:\n" + d
    again = transform(result.text, settings, points)
    if not isinstance(again, AlreadyApplied):
        return False, "applying twice changed the file again"
    if marks.strip(result.text) != ex.before:
        return False, "taking patchkit's lines out does not give the input back"
    return True, ""
