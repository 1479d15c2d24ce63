"""recipe.schema.json: its vocabulary is made from the table and the registries, and it agrees with the loader."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from patchkit.runtime import backends
from patchkit.engine import points
from patchkit.recipe import schema
from patchkit.core import vocabulary
from patchkit.core.errors import RecipeError
from patchkit.recipe.load import load_recipe
from patchkit.core import spellings
from patchkit.core.vocabulary import SETTINGS

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


def _words(name: str) -> list:
    """A profiler setting's words, then torch_npu's spellings of them."""
    values = next(s.values for s in SETTINGS if s.section == "profiler" and s.name == name)
    return list(values) + [w for w in spellings.VALUES.get(name, {}) if w not in values]


def test_every_enum_of_the_schema_is_the_table_or_a_registry():
    fixed = {
        "/properties/backend": list(backends.names()),
        "/properties/schedule/properties/trigger": ["schedule", "manual"],
        "/$defs/point/properties/at": list(points.KINDS),
        "/$defs/point/properties/action": list(vocabulary.ACTIONS),
    }
    found = dict(_enums(json.loads(SHIPPED)))
    for path, enum in found.items():
        if path in fixed:
            assert enum == fixed[path], path
            continue
        name = re.fullmatch(r"/properties/profiler/properties/(?:tool_config/properties/npu/properties/)?(\w+)"
                            r"(?:/oneOf/[01](?:/items)?)?", path).group(1)
        assert enum == _words(spellings.KEY[name].key if name in spellings.KEY else name), path
    profiler = "/properties/profiler/properties"
    assert set(fixed) | {f"{profiler}/{n}" for n in ("level", "export_type", "aic_metrics")} <= set(found)
    worded = {s.key for s in SETTINGS if s.values}
    assert worded == {"profiler.level", "profiler.contents", "profiler.export_type", "profiler.aic_metrics",
                      "profiler.host_sys", "schedule.trigger"}  # each has its enum above


SPELLED = [  # (the profiler section as a verl, MindSpeed-RL or torch_npu user writes it, whether it loads)
    ({"level": "ProfilerLevel.Level1", "aic_metrics": "PipeUtilization", "export_type": "torch_npu.profiler.ExportType.Db"},
     True),
    ({"contents": ["torch_npu.profiler.ProfilerActivity.NPU", "CPU"]}, True),
    ({"profile_level": "Level2", "profile_with_memory": True, "profile_save_path": "./out"}, True),
    ({"tool_config": {"npu": {"level": "level1", "contents": ["npu"], "analysis": True}}, "all_ranks": True}, True),
    ({"profiler_level": "Level0", "msprof_tx": True, "with_flops": False}, True),
    ({"discrete": False}, False),  # patchkit always records the recipe's own window
    ({"profile_level": "Level9"}, False),
    ({"tool_config": {"gpu": {"level": "level1"}}}, False),
]


@pytest.mark.parametrize("profiler,ok", SPELLED, ids=[json.dumps(p) for p, _ in SPELLED])
def test_the_schema_and_the_loader_agree_on_other_tools_spellings(tmp_path, profiler, ok):
    data = {"id": "r", "description": "d", "target": {"package": "pkg", "files": ["pkg/m.py"]}, "backend": "npu",
            "profiler": profiler, "points": [{"class": "A", "method": "run", "at": "method_start"}]}
    path = tmp_path / "r.yaml"
    path.write_text(json.dumps(data))
    if ok:
        jsonschema.validate(data, json.loads(SHIPPED))
        load_recipe(path)
    else:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(data, json.loads(SHIPPED))
        with pytest.raises(RecipeError):
            load_recipe(path)


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
