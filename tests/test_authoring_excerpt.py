"""One function cut out of its file with its class line, and the recipe's example made from it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from patchkit.authoring.excerpt import example, excerpt
from patchkit.recipe.load import load_recipe

SOURCE = textwrap.dedent('''\
    """Module."""
    import os


    @dataclass
    class Trainer(Base):
        """Doc."""

        # the fit
        @torch.no_grad()
        def fit(self, batches):   \r
            for b in batches:
                self.step(b)

        def other(self):
            pass


    def evaluate(x):
        return x
    ''')


def test_a_method_comes_with_its_class_line_only_and_a_function_alone():
    assert excerpt(SOURCE, "Trainer", "fit") == textwrap.dedent('''\
        @dataclass
        class Trainer(Base):
            @torch.no_grad()
            def fit(self, batches):
                for b in batches:
                    self.step(b)
        ''')
    assert excerpt(SOURCE, None, "evaluate") == "def evaluate(x):\n    return x\n"
    with pytest.raises(LookupError):
        excerpt(SOURCE, "Trainer", "nope")


def test_the_example_is_the_excerpt_and_what_the_points_make_of_it(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("id: t\ndescription: d\ntarget: {package: p, files: [p/m.py]}\n"
                    "points:\n  - {class: Trainer, method: fit, at: loop_end, loop: {iter: batches}}\n")
    settings = load_recipe(path)
    before, after = example(SOURCE, settings, "Trainer", "fit", settings.recipe.points)
    assert before == excerpt(SOURCE, "Trainer", "fit")
    assert after.splitlines()[-1] == '            _patchkit_runtime.step("t")  # patchkit:t'
    assert "configure" not in after
    bad = settings.recipe._replace(points=(settings.recipe.points[0]._replace(loop=()), ))
    with pytest.raises(ValueError):
        example(SOURCE, settings._replace(recipe=bad), "Trainer", "fit",
                [settings.recipe.points[0]._replace(at="after_call", call="self.nope", loop=())])
    assert Path(path).is_file()
