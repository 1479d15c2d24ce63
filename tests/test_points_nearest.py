"""A point that does not fit, for every kind of point: the error names the recipe's point (file:line:col) and the
target's file and line, and the hint offers the nearest real names of the same function, each as the recipe line
that selects it, or, when none is close, the few that exist."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from patchkit.cli.commands import main
from patchkit.core import vocabulary
from patchkit.recipe.kinds import KINDS

from conftest import snapshot

OWN = Path(__file__).resolve().parent / "own_code" / "installed"
TARGET = OWN / "tinytrain" / "loop.py"

NEEDED = {"call": {"call": "self.forward"}, "loop": {"loop": {"target": "epoch"}}}  # a key each kind may need


def diff(tmp_path, point):
    """`patchkit diff` of a recipe with one point in Trainer.fit (unless the point names its own scope)."""
    recipe = tmp_path / "mine.yaml"
    scope = {} if "function" in point or "class" in point else {"class": "Trainer", "method": "fit"}
    text = yaml.safe_dump({"id": "mine", "description": "d",
                           "target": {"package": "tinytrain", "distribution": "tiny-train", "files": ["tinytrain/loop.py"]},
                           "points": [{**scope, **point}]}, sort_keys=False)
    recipe.write_text(text)
    before = snapshot(OWN)
    result = CliRunner().invoke(main, ["diff", str(recipe), "--root", str(OWN)])
    assert result.exit_code == 1, result.output
    assert snapshot(OWN) == before and "Traceback" not in result.output
    line = text.splitlines().index(next(ln for ln in text.splitlines() if ln.startswith("- "))) + 1
    return result.stderr, f"{recipe}:{line}:3"


def point_of(kind, **changes):
    """A point of ``kind`` in Trainer.fit that resolves: the keys it needs, and an action it takes."""
    declared = KINDS[kind]
    point = {"at": kind, **{k: v for need in declared.needs for k, v in NEEDED[need].items()}}
    if vocabulary.DEFAULT_ACTION not in declared.actions:
        point.update(action=declared.actions[0], name="fit")
    return {**point, **changes}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_misspelt_class_or_method_in_any_kind_names_both_places_and_the_real_names(tmp_path, kind):
    err, recipe = diff(tmp_path, {"class": "Trainr", "method": "fit", **point_of(kind)})
    assert err.startswith(f"error: {TARGET}: no class Trainr at the top level of the file, named by the recipe at "
                          f"{recipe}")
    assert "hint: did you mean `class: Trainer` (line 4)?" in err
    err, recipe = diff(tmp_path, {"class": "Trainer", "method": "fitt", **point_of(kind)})
    assert err.startswith(f"error: {TARGET}:4:1: class Trainer has no method fitt, named by the recipe at {recipe}")
    assert "hint: did you mean `method: fit` (line 18)?" in err
    err, recipe = diff(tmp_path, {"function": "evaluat", **point_of(kind)})
    assert f"no function evaluat at the top level of the file, named by the recipe at {recipe}" in err
    assert "hint: did you mean `function: evaluate` (line 31)?" in err


@pytest.mark.parametrize("kind", sorted(k for k, v in KINDS.items() if "call" in v.needs))
def test_a_misspelt_call_names_the_point_and_the_nearest_calls(tmp_path, kind):
    err, recipe = diff(tmp_path, point_of(kind, call="self.foward"))
    assert err.startswith(f"error: {TARGET}:18: no statement calling self.foward in Trainer.fit, "
                          f"in the point at {recipe}")
    assert "hint: did you mean `call: self.forward` (line 24)?" in err
    err, _ = diff(tmp_path, point_of(kind, call="optimizer.zero_grad"))
    assert ("hint: the statements of Trainer.fit call: `call: self.forward` (line 24), `call: self.update` (line 25), "
            "`call: history.append` (line 27); `patchkit points` lists every place") in err


@pytest.mark.parametrize("kind", sorted(k for k, v in KINDS.items() if "loop" in v.needs))
def test_a_misspelt_loop_names_the_point_and_the_nearest_loops(tmp_path, kind):
    err, recipe = diff(tmp_path, point_of(kind, loop={"iter": "batchs"}))
    assert err.startswith(f"error: {TARGET}:18: no loop over batchs in Trainer.fit, in the point at {recipe}")
    assert "hint: did you mean `loop: {iter: batches}` (line 21)?" in err
    err, _ = diff(tmp_path, point_of(kind, loop={"target": "epoh"}))
    assert "hint: did you mean `loop: {target: epoch}` (line 20)?" in err
    err, _ = diff(tmp_path, point_of(kind, loop={"calls": "self.updat"}))
    assert "hint: did you mean `loop: {calls: self.update}` (line 21)?" in err
    err, _ = diff(tmp_path, point_of(kind, loop={"iter": "samples"}))
    assert ("hint: the loops of Trainer.fit: `loop: {target: epoch}` (line 20), `loop: {iter: batches}` (line 21); "
            "`patchkit points` lists every place") in err


def test_a_call_made_only_inside_an_expression_says_so(tmp_path):
    err, _ = diff(tmp_path, {"function": "evaluate", "at": "after_call", "call": "trainer.forward"})
    assert "hint: trainer.forward is called at line 34 inside an expression" in err
    assert "`call: abs` (line 34)" in err
