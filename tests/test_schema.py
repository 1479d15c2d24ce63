"""recipe.schema.json: its vocabulary is made from the table and the registries, and it agrees with the loader."""

from __future__ import annotations

import json

import pytest

from patchkit.runtime import backends
from patchkit.engine import points
from patchkit.recipe import schema
from patchkit.core import vocabulary
from patchkit.core.errors import RecipeError
from patchkit.recipe.load import load_recipe
from patchkit.core.vocabulary import SETTINGS

jsonschema = pytest.importorskip("jsonschema")

SHIPPED = schema.PATH.read_text(encoding="utf-8")


def test_the_shipped_schema_is_what_python_m_patchkit_schema_makes():
    assert schema.text() == SHIPPED, "the vocabulary changed: run `python -m patchkit.recipe.schema` and commit the file"


def test_making_it_restores_a_stale_vocabulary():
    stale = json.loads(SHIPPED)
    stale["properties"]["profiler"]["properties"]["level"]["enum"].remove("level2")
    stale["properties"]["backend"]["enum"] = ["npu"]
    stale["$defs"]["point"]["properties"]["at"]["enum"].pop()
    assert schema.text(json.dumps(stale)) == SHIPPED


def _enums(node, path=""):
    if isinstance(node, dict):
        if "enum" in node:
            yield path, node["enum"]
        for key, value in node.items():
            yield from _enums(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _enums(value, f"{path}/{i}")


def test_every_enum_of_the_schema_is_the_table_or_a_registry():
    profiler = "/properties/profiler/properties"
    expected = {
        "/properties/backend": list(backends.names()),
        f"{profiler}/level": list(vocabulary.LEVELS),
        f"{profiler}/contents/oneOf/0": list(vocabulary.CONTENTS),
        f"{profiler}/contents/oneOf/1/items": list(vocabulary.CONTENTS),
        f"{profiler}/export_type": list(vocabulary.EXPORT_TYPES),
        f"{profiler}/aic_metrics": list(vocabulary.AIC_METRICS),
        "/properties/schedule/properties/trigger": ["schedule", "manual"],
        f"{profiler}/host_sys/oneOf/0": list(vocabulary.HOST_SYS),
        f"{profiler}/host_sys/oneOf/1/items": list(vocabulary.HOST_SYS),
        "/$defs/point/properties/at": list(points.KINDS),
        "/$defs/point/properties/action": list(vocabulary.ACTIONS),
    }
    assert dict(_enums(json.loads(SHIPPED))) == expected
    worded = {s.key for s in SETTINGS if s.values}
    assert worded == {"profiler.level", "profiler.contents", "profiler.export_type", "profiler.aic_metrics",
                      "profiler.host_sys", "schedule.trigger"}  # each has its enum above


def _recipe(tmp_path, section, name, value):
    # a rollout package: profiler.replicas is for rollout workers only
    data = {"id": "r", "description": "d", "target": {"package": "vllm", "files": ["vllm/m.py"]}, "backend": "torch",
            section: {name: value}, "points": [{"class": "A", "method": "run", "at": "method_start"}]}
    path = tmp_path / "r.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML
    return data, path


def _cases():
    for s in SETTINGS:
        good = [s.default, *s.values] if s.kind != vocabulary.WORDS else [list(s.default), s.values[0], list(s.values)]
        bad = ["no-such-word", 1] if s.values else []
        if s.kind == vocabulary.COUNT:
            good, bad = [s.minimum, s.minimum + 5], [s.minimum - 1, "1", 1.5, True]
        elif s.kind == vocabulary.FLAG:
            good, bad = [True, False], ["yes", 1]
        elif s.kind == vocabulary.RANKS:
            good, bad = ["all", 3, [0, 2]], ["some", -1, [], [0, -1], [True]]
        elif s.kind == vocabulary.THRESHOLD:
            good, bad = [None, 0, 2.5, "none"], [-1, "soon", True]
        elif s.kind == vocabulary.STEPS:
            good, bad = [[], 3, [5, 1, 2]], ["all", -1, [-1], [True], 1.5]
        elif s.kind == vocabulary.PATH:
            good, bad = ["./out", "/tmp/x"], ["", 1]
        elif s.kind == vocabulary.WORDS:
            bad = ["gpu", ["npu", "gpu"]] + ([[]] if s.default else [])
        for value in good:
            yield s, value, True
        for value in bad:
            yield s, value, False


CASES = list(_cases())


@pytest.mark.parametrize("setting,value,ok", CASES, ids=[f"{s.key}={v!r}" for s, v, _ in CASES])
def test_the_schema_and_the_loader_agree_on_each_setting(tmp_path, setting, value, ok):
    data, path = _recipe(tmp_path, setting.section, setting.name, value)
    shipped = json.loads(SHIPPED)
    if ok:
        jsonschema.validate(data, shipped)
        load_recipe(path)
    else:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(data, shipped)
        with pytest.raises(RecipeError):
            load_recipe(path)
