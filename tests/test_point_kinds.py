"""Every kind of point declares itself (name, shape, actions, refusals, wording) and carries VALID / INVALID
examples, run here as a recipe's own examples are, for every kind the walk of patchkit/recipe/kinds/ finds: a
new kind is tested by adding its module, with no test to edit."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.core import vocabulary
from patchkit.engine.examples import run_examples
from patchkit.core.model import Point
from patchkit.engine.points import KINDS, describe
from patchkit.recipe import kinds
from patchkit.recipe.load import parse_recipe
from patchkit.recipe.pointkind import PLACES, problems


def _settings(kind, ex):
    point = dict(ex.point)
    if "function" not in point:
        point = {"class": "A", "method": "run", **point}
    data = {"id": "k", "description": "one kind's example", "target": {"package": "pkg", "files": ["pkg/m.py"]},
            "backend": "torch", "points": [point],
            "examples": [{"name": kind.name, "before": ex.source,
                          **({"after": ex.after} if ex.after else {"unchanged": True, "reason": ex.reason})}]}
    return parse_recipe(data, {}, f"<the {kind.name} kind's example>")


CASES = [(k, ex) for k in KINDS.values() for ex in (*k.VALID, *k.INVALID)]


@pytest.mark.parametrize("kind,ex", CASES, ids=[f"{k.name}-{'valid' if ex.after else 'invalid'}{i}"
                                                 for i, (k, ex) in enumerate(CASES)])
def test_each_kind_s_examples_hold(kind, ex):
    assert bool(ex.after) != bool(ex.reason), "an example gives either the output or the reason"
    (outcome,) = run_examples(_settings(kind, ex))
    assert outcome.ok, outcome.message


def test_every_kind_declares_itself_fully():
    """What the walk of patchkit/recipe/kinds/ found: one kind for each module, each declared in full."""
    folder = Path(kinds.__file__).parent
    modules = sorted(p.stem for p in folder.glob("*.py") if not p.name.startswith("_"))
    assert modules and sorted(KINDS) == modules  # no module left out, none named by hand
    for kind in KINDS.values():
        assert problems(kind, f"{kinds.__name__}.{kind.name}") == [], kind.name
        assert kind.summary and kind.VALID and kind.INVALID, kind.name
        assert set(kind.actions) <= set(vocabulary.ACTIONS) and set(kind.needs) <= {"call", "loop"}
        assert all(ex.point["at"] == kind.name for ex in (*kind.VALID, *kind.INVALID))
    places = [list(PLACES).index(kind.place) for kind in KINDS.values()]
    assert places == sorted(places)  # in a function's order: the def line first, the end last


def test_a_point_is_named_as_its_kind_says():
    assert describe(Point("A", "run", "after_call", call="self.work")) == "step after self.work in A.run"
    assert describe(Point(None, "train", "method_start", action="start")) == "start method_start in function train"
