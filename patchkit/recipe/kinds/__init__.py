"""The kinds of point a recipe's ``at:`` names: one module each in this folder, found by walking it.  No libcst.

Every module here but this one holds one kind, a subclass of
:class:`~patchkit.recipe.pointkind.PointKind` named after the module
(``after_call.py`` holds ``after_call``), with its shape, refusals, examples
and ``find``.  No list names them: :func:`found` imports each module
:func:`pkgutil.iter_modules` sees in this folder and takes the one kind it
defines, as LibCST's codemod command finder walks its package, and checks
the declaration (:func:`patchkit.recipe.pointkind.problems`).  Recipe
validation, the JSON schema, ``patchkit show``, the engine's finder, the
outline of ``patchkit points``, the docs and tests/test_point_kinds.py read
:data:`KINDS`, which imports a kind's module when that kind is first asked
for: ``validate`` and ``show`` load the kinds their recipe's points name, and
whatever goes through every kind (the schema, the outline, a message listing
them) loads them all.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import MutableMapping
from typing import Dict, Iterable, Iterator, List, Optional

from patchkit.core.model import Point
from patchkit.core.vocabulary import DEFAULT_ACTION
from patchkit.recipe.pointkind import PLACES, Example, PointKind, problems

__all__ = ["KINDS", "Example", "KindError", "PointKind", "at_place", "describe", "found"]


class KindError(TypeError):
    """A module of this folder that is not one well-declared kind (a mistake in patchkit, not in a recipe)."""


def _kind_of(module_name: str) -> PointKind:
    module = importlib.import_module(module_name)
    classes = [c for c in vars(module).values() if inspect.isclass(c) and issubclass(c, PointKind)
               and c.__module__ == module.__name__]
    if len(classes) != 1:
        raise KindError(f"{module_name} must define one subclass of PointKind; it defines {len(classes)}")
    if inspect.isabstract(classes[0]):
        raise KindError(f"{module_name}: {classes[0].__name__} does not define find(self, scan, anchor)")
    kind = classes[0]()
    wrong = problems(kind, module_name)
    if wrong:
        raise KindError(f"{module_name}: " + "; ".join(wrong))
    return kind


def _order(kind: PointKind):
    """A function's order (def line first, end last); a kind that takes the default action before one that cannot."""
    return list(PLACES).index(kind.place), DEFAULT_ACTION not in kind.actions, kind.name


def _walk() -> List[str]:
    """The names of this folder's kind modules, none imported."""
    return [info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")]


def found() -> Dict[str, PointKind]:
    """Every kind of this folder, by name, in :func:`_order`."""
    kinds = [_kind_of(f"{__name__}.{name}") for name in _walk()]
    return {kind.name: kind for kind in sorted(kinds, key=_order)}


class _Kinds(MutableMapping):
    """The kinds by name, as :func:`found` gives them, each module imported when its kind is first asked for.

    ``name in KINDS`` imports nothing and ``KINDS[name]`` imports that one kind; going through them (``list``,
    ``values()``) imports every one, for :func:`_order`.  A kind put in by code (a test's) comes after the
    folder's, as in a dict.
    """

    def __init__(self, names: Iterable[str]) -> None:
        self._found: Dict[str, Optional[PointKind]] = dict.fromkeys(names)  # None until its module is imported
        self._put: Dict[str, PointKind] = {}

    def __getitem__(self, name: str) -> PointKind:
        if name in self._put:
            return self._put[name]
        kind = self._found[name]
        if kind is None:
            kind = self._found[name] = _kind_of(f"{__name__}.{name}")
        return kind

    def __contains__(self, name: object) -> bool:
        return name in self._found or name in self._put

    def __iter__(self) -> Iterator[str]:
        ordered = sorted(self._found, key=lambda name: _order(self[name]))
        return iter([*ordered, *self._put])

    def __len__(self) -> int:
        return len(self._found) + len(self._put)

    def __setitem__(self, name: str, kind: PointKind) -> None:
        if name in self._found:
            self._found[name] = kind
        else:
            self._put[name] = kind

    def __delitem__(self, name: str) -> None:
        if name in self._put:
            del self._put[name]
        else:
            del self._found[name]

    def __repr__(self) -> str:
        return repr(dict(self))


KINDS: MutableMapping[str, PointKind] = _Kinds(_walk())


def at_place(place: str) -> List[PointKind]:
    """The kinds whose line goes on ``place`` of a function's outline, in :data:`KINDS`' order."""
    return [kind for kind in KINDS.values() if kind.place == place]


def describe(point: Point) -> str:
    """``step after self.work in A.run``: a point as messages and `patchkit show` name it."""
    what = KINDS[point.at].what.format(at=point.at, call=point.call)
    if point.loop:
        what += " of the loop " + " / ".join(s.describe() for s in point.loop)
    label = f" {point.name!r}" if point.name else ""
    return f"{point.action}{label} {what} in {'function ' if point.cls is None else ''}{point.scope}"
