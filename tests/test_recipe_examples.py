"""Every example of every built-in recipe: the recipes' own before/after pairs are the tests."""

from __future__ import annotations

import json

import pytest
import yaml

import patchkit
from patchkit.engine.examples import example_points
from patchkit.engine.codemod import strip, transform
from patchkit.core.model import AlreadyApplied, Applied
from patchkit.recipe import schema as recipe_schema

from conftest import RECIPES

CASES = [(s.id, i) for s in patchkit.all_recipes() for i in range(len(s.recipe.examples))]
CHANGING = [(s.id, i) for s in patchkit.all_recipes() for i, ex in enumerate(s.recipe.examples) if ex.after is not None]


def test_the_seed_recipes_are_built_in():
    assert {"vllm-ascend-decode", "sglang-forward", "verl-fsdp-logprob", "verl-fsdp-update",
            "verl-megatron-update"} <= set(patchkit.builtin_ids())


def test_every_recipe_has_examples_with_a_change_and_an_unchanged_input():
    for s in patchkit.all_recipes():
        kinds = {ex.after is None for ex in s.recipe.examples}
        assert False in kinds, f"{s.id} has no before/after example"


@pytest.mark.parametrize("rid,index", CASES, ids=[f"{r}[{i}]" for r, i in CASES])
def test_example(rid, index):
    settings = patchkit.load(rid)
    outcome = patchkit.run_examples(settings)[index]
    assert outcome.ok, outcome.message


@pytest.mark.parametrize("rid,index", CHANGING, ids=[f"{r}[{i}]" for r, i in CHANGING])
def test_example_applied_twice_is_applied_once(rid, index):
    ex = patchkit.load(rid).recipe.examples[index]
    chosen = patchkit.load(rid, [f"{k}={v}" for k, v in ex.options])
    points = example_points(chosen, ex.before)
    once = transform(ex.before, chosen, points)
    assert isinstance(once, Applied)
    twice = transform(once.text, chosen, points)
    assert isinstance(twice, AlreadyApplied) and twice.text == once.text
    assert strip(once.text) == ex.before
    assert all("patchkit" in ins.text for ins in once.insertions)


def test_built_in_recipes_validate_against_the_published_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(recipe_schema.PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    for path in sorted(RECIPES.glob("*.yaml")):
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)


def test_schema_knows_exactly_the_keys_the_loader_knows():
    from patchkit.recipe import load as r
    from patchkit.recipe import parts as recipe_parts
    from patchkit.recipe import points as recipe_points
    from patchkit.core import vocabulary

    schema = json.loads(recipe_schema.PATH.read_text())
    props = schema["properties"]
    assert set(props) == set(r.FORMAT_KEYS)
    assert set(props["target"]["properties"]) == set(r.TARGET_KEYS)
    from patchkit.core import spellings  # other tools' names, and verl's tool_config block, read as patchkit's

    others = set(spellings.KEY) | {spellings.NESTED[0]}
    assert set(props["profiler"]["properties"]) == set(vocabulary.PROFILER_KEYS) | others
    assert set(props["schedule"]["properties"]) == set(vocabulary.SCHEDULE_KEYS)
    assert set(schema["$defs"]["point"]["properties"]) == set(recipe_points.POINT_KEYS)
    assert set(schema["$defs"]["example"]["properties"]) == set(recipe_parts.EXAMPLE_KEYS)
