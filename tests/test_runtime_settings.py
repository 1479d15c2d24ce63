"""patchkit.runtime.settings: the settings every backend takes, their defaults and checks, and the note for those a
backend has no equivalent of."""

from __future__ import annotations

import pytest

from patchkit.runtime import finder
from patchkit.runtime.settings import DEFAULT, DEFAULTS, KEYS, no_equivalent, normalize, validate


def settings(**kw):
    s = dict(backend="torch", level="level0", contents=("cpu", "npu"), export_type="text", analysis=False,
             save_path="./outputs/patchkit/x", ranks="all", wait=1, warmup=1, active=3, repeat=1, skip_first=0,
             mstx=False)
    s.update(kw)
    return s


def test_the_defaults_are_valid_for_every_backend():
    assert DEFAULT in finder.names() and set(DEFAULTS) == set(KEYS)
    assert validate({}) == []
    for name in finder.names():
        assert validate(settings(backend=name)) == [], name


@pytest.mark.parametrize("bad, words", [
    ({"colour": "red"}, "unknown setting 'colour'"),
    ({"backend": "perf"}, "backend 'perf' is not one of " + ", ".join(finder.names())),
    ({"backend": 3}, "backend 3 is not one of"),
    ({"level": "Level1"}, "profiler.level"),
    ({"contents": ("npu", "gpu")}, "unknown 'gpu'"),
    ({"contents": "npu"}, "profiler.contents must be a list"),
    ({"export_type": "json"}, "profiler.export_type"),
    ({"analysis": "yes"}, "profiler.analysis must be true or false"),
    ({"ranks": (0, -1)}, "profiler.ranks"),
    ({"ranks": "some"}, "profiler.ranks"),
    ({"active": 0}, "schedule.active must be an integer >= 1"),
    ({"wait": -1}, "schedule.wait"),
    ({"repeat": 1.0}, "schedule.repeat"),
    ({"warmup": True}, "schedule.warmup"),
    ({"save_path": ""}, "profiler.save_path must be a non-empty path"),
])
def test_validate_names_the_problem(bad, words):
    problems = validate(settings(**bad))
    assert problems and any(words in p for p in problems), problems


@pytest.mark.parametrize("given, problem", [
    ({"ranks": (0,), "replicas": (1,)}, "profiler.replicas and profiler.ranks are both set: pick one"),
    ({"trigger": "manual", "active": 2}, "schedule.trigger manual records the steps `patchkit capture` asks for; "
                                         "it does not combine with schedule.active"),
    ({"steps": (3, 4), "wait": 2}, "schedule.steps picks the recorded steps itself; it does not combine with "
                                   "schedule.wait"),
])
def test_settings_that_do_not_go_together_are_one_problem(given, problem):
    assert validate({"backend": "torch", **given}) == [problem]


def test_normalize_fills_the_defaults_and_makes_lists_tuples():
    s = normalize({"backend": "torch", "contents": ["cpu"], "ranks": [1, 0], "steps": [4, 3, 4], "colour": "red"})
    assert s["contents"] == ("cpu",) and s["ranks"] == (1, 0) and s["steps"] == (3, 4) and "colour" not in s
    assert {k: v for k, v in s.items() if k not in ("backend", "contents", "ranks", "steps")} == {
        k: v for k, v in DEFAULTS.items() if k not in ("backend", "contents", "ranks", "steps")}


def test_a_backend_names_the_settings_its_profiler_has_no_equivalent_of_only_when_they_were_changed():
    assert no_equivalent("torch.profiler", dict(DEFAULTS), ("level", "mstx")) == []
    changed = dict(DEFAULTS, level="level2", mstx=True, wait=3)
    assert no_equivalent("torch.profiler", changed, ("level", "mstx", "wait")) == [
        "torch.profiler has no equivalent of profiler.level='level2', profiler.mstx=True, schedule.wait=3; not used"]
