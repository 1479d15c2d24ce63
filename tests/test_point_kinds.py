"""Every kind of point declares itself (name, needs, actions, wording) and carries VALID / INVALID examples,
run here as a recipe's own examples are: a new kind is tested by adding its module, with no test to edit."""

from __future__ import annotations

import pytest

from patchkit.core import vocabulary
from patchkit.engine.examples import run_examples
from patchkit.core.model import Point
from patchkit.engine.points import KINDS, describe
from patchkit.recipe.load import parse_recipe


def _settings(kind, ex):
    point = dict(ex.point)
    if "function" not in point:
        point = {"class": "A", "method": "run", **point}
    data = {"id": "k", "description": "one kind's example", "target": {"package": "pkg", "files": ["pkg/m.py"]},
            "backend": "torch", "points": [point],
            "examples": [{"name": kind.name, "before": ex.source,
                          **({"after": ex.after} if ex.after else {"unchanged": True, "reason": ex.reason})}]}
    return parse_recipe(data, {}, f"<the {kind.name} kind's example>")


CASES = [(k, ex) for k in KINDS.values() for ex in (*k.valid, *k.invalid)]


@pytest.mark.parametrize("kind,ex", CASES, ids=[f"{k.name}-{'valid' if ex.after else 'invalid'}{i}"
                                                 for i, (k, ex) in enumerate(CASES)])
def test_each_kind_s_examples_hold(kind, ex):
    assert bool(ex.after) != bool(ex.reason), "an example gives either the output or the reason"
    (outcome,) = run_examples(_settings(kind, ex))
    assert outcome.ok, outcome.message


def test_every_kind_declares_itself_fully():
    assert list(KINDS) == ["method_start", "method_end", "on_exit", "after_call", "before_call", "before_loop",
                           "loop_start", "loop_end", "around_call", "method"]
    for kind in KINDS.values():
        assert kind.summary and kind.valid and kind.invalid, kind.name
        assert set(kind.actions) <= set(vocabulary.ACTIONS) and set(kind.needs) <= {"call", "loop"}
        assert all(ex.point["at"] == kind.name for ex in (*kind.valid, *kind.invalid))


def test_a_point_is_named_as_its_kind_says():
    assert describe(Point("A", "run", "after_call", call="self.work")) == "step after self.work in A.run"
    assert describe(Point(None, "train", "method_start", action="start")) == "start method_start in function train"
