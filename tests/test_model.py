"""model: the shapes patchkit passes between layers; Settings picks the points and settings in use."""

from __future__ import annotations

from patchkit.core import vocabulary
from patchkit.core.model import LoopSelector, Option, Point, Profiler, Recipe, Schedule, Settings, Target


def _recipe(**kw):
    points = (Point("A", "run", "method_start", action="start"),
              Point("A", "run", "after_call", call="self.work", when=(("granularity", "micro"),)),
              Point("A", "run", "loop_end", loop=(LoopSelector(iter="mbs"),), when=(("granularity", "mini"),)))
    return Recipe(id="r", description="d", target=Target("pkg", "pkg", "", ("pkg/m.py",)), backend="torch",
                  profiler=Profiler(), schedule=Schedule(), options=(Option("granularity", ("mini", "micro"), "mini", ""),),
                  points=points, **kw)


def test_the_points_in_use_follow_the_chosen_options():
    s = Settings(_recipe(), choices=(("granularity", "micro"),))
    assert [p.at for p in s.active_points()] == ["method_start", "after_call"]
    assert s.choice("granularity") == "micro" and s.choice("other") is None and s.id == "r"
    assert s.recipe.option("granularity").default == "mini" and s.recipe.option("x") is None


def test_runtime_settings_hold_every_setting_of_the_table_in_its_order():
    out = Settings(_recipe()).runtime_settings()
    assert list(out) == ["backend", *(s.name for s in vocabulary.SETTINGS)]
    assert out["backend"] == "torch" and out["active"] == vocabulary.DEFAULTS["active"]
    assert out["contents"] == tuple(vocabulary.DEFAULTS["contents"])


def test_a_point_names_its_scope():
    assert Point("A", "run", "method_start").scope == "A.run"
    assert Point(None, "train", "method_start").scope == "train"
    assert Point("A", "run", "method_start", nested="inner").scope == "A.run.inner"
    assert LoopSelector(iter="mbs", target="mb").describe() == "over mbs with target mb"


def test_a_target_is_a_package_unless_it_names_a_script():
    from patchkit.core.model import Script, Target

    package = Target("verl", "verl", ">=0.4", ("verl/a.py",))
    assert package.script is None and package.shown == "verl"
    script = Target("", "train.py", "", ("train.py",), script=Script("jobs/train.py", "/srv"))
    assert script.script.name == "train.py" and script.shown == "the script jobs/train.py"
