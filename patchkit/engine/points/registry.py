"""The finders of the kinds of point, by the name :data:`patchkit.recipe.kinds.KINDS` declares them under."""

from __future__ import annotations

from typing import Any, Callable, Dict, List

from patchkit.core.model import Point
from patchkit.recipe.kinds import KINDS

Finder = Callable[[Any, Point], List[object]]  # (Scan, Point) -> the places, or NotFound

FINDERS: Dict[str, Finder] = {}


def finds(*names: str) -> Callable[[Finder], Finder]:
    """Register the decorated function as the finder of the kinds ``names`` (each declared in KINDS)."""

    def deco(fn: Finder) -> Finder:
        for name in names:
            assert name in KINDS, f"no kind {name!r} is declared in patchkit.recipe.kinds"
            FINDERS[name] = fn
        return fn

    return deco
