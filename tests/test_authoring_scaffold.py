"""The text of a new recipe: a recipe file the loader reads back as written, with its comments."""

from __future__ import annotations

import yaml

from patchkit.recipe.load import load_recipe
from patchkit.authoring.scaffold import Draft, render

DRAFT = Draft(id="mine", description="step after the work", package="pkg", distribution="my-pkg",
              versions=">=1.2", versions_note="the installed version and later", files=("pkg/mod.py",),
              backend="torch", profiler={"level": "level0", "contents": ["cpu"], "save_path": "./out/mine"},
              schedule={"wait": 1, "warmup": 0, "active": 2, "repeat": 1, "skip_first": 0},
              points=({"class": "A", "method": "run", "at": "before_loop", "loop": {"iter": "xs"}, "action": "start"},
                      {"function": "go", "at": "after_call", "call": "self.work", "guard": "self.mode != 'a: b'"}),
              notes=("Turn the framework's profiler off: it's one per process.",),
              examples=(("A.run as in my-pkg 1.2", "class A:\n    def run(self):\n\n        pass\n", "x\n"),
                        ("trailing", "a  \n\tb\n", "c\n")),
              origin="Written from my-pkg 1.2.")


def test_the_text_reads_back_as_the_draft_says(tmp_path):
    text, starts = render(DRAFT)
    lines = text.splitlines()
    assert lines[0] == "# Written from my-pkg 1.2."
    assert "  versions: '>=1.2'  # the installed version and later" in lines
    assert [lines[s - 1] for s in starts] == ["  - class: A", "  - function: go"]
    data = yaml.safe_load(text)
    assert data["points"][1]["guard"] == "self.mode != 'a: b'"
    assert data["examples"][0]["before"] == DRAFT.examples[0][1]
    assert data["examples"][1]["before"] == "a  \n\tb\n"  # no block can hold it: quoted, the same text
    assert "before: |" in text
    path = tmp_path / "mine.yaml"
    path.write_text(text.replace("examples:", "x_examples:").split("x_examples:")[0])
    recipe = load_recipe(path).recipe
    assert (recipe.target.distribution, recipe.target.versions, recipe.schedule.active) == ("my-pkg", ">=1.2", 2)
    assert recipe.points[0].loop[0].iter == "xs" and recipe.notes == DRAFT.notes


def test_a_script_target_is_written_as_the_script_alone(tmp_path):
    draft = DRAFT._replace(script="jobs/train.py", package="", distribution="train.py", versions="",
                           files=("train.py",), examples=())
    text = render(draft)[0]
    target = text.split("target:\n")[1].split("backend:")[0]
    assert target == ("  script: jobs/train.py  # the job's script: its code runs as __main__; a relative path is "
                      "taken from this file's folder, or from --root DIR\n")
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    t = load_recipe(path).recipe.target
    assert (t.script.path, t.package, t.files) == ("jobs/train.py", "", ("train.py",))
