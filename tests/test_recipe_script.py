"""A recipe whose target is a script (``target.script``): read as the job's ``__main__``, every bad shape refused at
its line, the schema agreeing with the loader."""

from __future__ import annotations

import json
import textwrap

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from patchkit.cli.commands import main
from patchkit.core.errors import RecipeError
from patchkit.recipe import schema
from patchkit.recipe.load import load_recipe

RECIPE = textwrap.dedent("""\
    id: ts
    description: a step in a script
    target:
    {target}
    backend: torch
    points:
      - class: Tiny
        method: training_step
        at: method_start
    {more}""")


def write(tmp_path, target="  script: train.py", more=""):
    path = tmp_path / "ts.yaml"
    path.write_text(RECIPE.format(target=target, more=more))
    return path


def test_a_script_target_names_the_script_and_no_package(tmp_path):
    t = load_recipe(write(tmp_path)).recipe.target
    assert (t.package, t.distribution, t.versions, t.files) == ("", "train.py", "", ("train.py",))
    assert t.script.path == "train.py" and t.script.base == str(tmp_path) and t.script.name == "train.py"
    assert t.script.where.line == 4 and t.script.where.path == str(tmp_path / "ts.yaml")
    assert t.shown == "the script train.py"
    nested = load_recipe(write(tmp_path, "  script: jobs/train.py\n  files: [train.py]")).recipe.target
    assert nested.script.name == "train.py" and nested.files == ("train.py",)
    assert load_recipe(write(tmp_path, "  script: /srv/job/train.py")).recipe.target.script.path == "/srv/job/train.py"


@pytest.mark.parametrize("target,line,says", [
    ("  script: train.py\n  package: tiny", 5, "target.script names a script, which has no package"),
    ("  package: tiny\n  script: train.py\n  files: [tiny/a.py]", 4, "which has no package"),
    ("  script: train.py\n  versions: '>=1'", 5, "which has no versions"),
    ("  script: ../elsewhere/train.py", 4, "leaves the recipe's folder ('..')"),
    ("  script: jobs/../../train.py", 4, "leaves the recipe's folder"),
    ("  script: train.txt", 4, "is not a .py file"),
    ("  script: jobs/", 4, "is not a .py file"),
    ("  script: '.py'", 4, "is not a .py file"),
    ("  script: 'a\\\\b.py'", 4, "a backslash"),
    ("  script: \"a\\0.py\"", 4, "a NUL byte"),
    ("  script: ''", 4, "must not be empty"),
    ("  script: [train.py]", 4, "must be the script's path"),
    ("  script: train.py\n  files: [other.py]", 5, "patches its script train.py alone"),
])
def test_a_bad_script_target_is_refused_at_its_line(tmp_path, target, line, says):
    path = write(tmp_path, target)
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert says in info.value.message and info.value.where.path == str(path) and info.value.where.line == line
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 1 and f"ts.yaml:{line}:" in result.output and "Traceback" not in result.output


def test_a_point_of_a_script_recipe_names_no_other_file(tmp_path):
    path = write(tmp_path, more="    files: [other.py]\n")
    with pytest.raises(RecipeError, match="the point's files name 'other.py', but a script recipe patches its "
                                          "script train.py alone") as info:
        load_recipe(path)
    assert info.value.where.line == 10
    assert load_recipe(write(tmp_path, more="    files: [train.py]\n")).recipe.points[0].files == ("train.py",)


@pytest.mark.parametrize("target,ok", [
    ("  script: train.py", True),
    ("  script: train.py\n  files: [train.py]", True),
    ("  package: tiny\n  files: [tiny/a.py]", True),
    ("  script: train.py\n  package: tiny", False),
    ("  script: train.py\n  distribution: tiny", False),
    ("  script: train.txt", False),
    ("  files: [tiny/a.py]", False),
])
def test_the_schema_and_the_loader_agree_on_script_targets(tmp_path, target, ok):
    path = write(tmp_path, target)
    data = yaml.safe_load(path.read_text())
    shipped = json.loads(schema.PATH.read_text(encoding="utf-8"))
    if ok:
        load_recipe(path)
        jsonschema.validate(data, shipped)
    else:
        with pytest.raises(RecipeError):
            load_recipe(path)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(data, shipped)
