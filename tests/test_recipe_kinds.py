"""The kinds of point: declared without libcst, each one module of patchkit/recipe/kinds/ holding its own find.

Commands that only read recipes (``validate``, ``list``) load the declarations and never the codemod.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.recipe.kinds import KINDS, describe
from patchkit.recipe.pointkind import PointKind
from patchkit.core.model import LoopSelector, Point

REPO = Path(__file__).resolve().parent.parent
# the engine's modules that import libcst (lines and marks are text, and show prints the lines)
CODEMOD = ("patchkit.engine.codemod", "patchkit.engine.codegen", "patchkit.engine.points", "patchkit.engine.examples")


def test_every_kind_found_holds_its_own_find_in_its_own_module():
    assert list(KINDS)
    for name, kind in KINDS.items():
        cls = type(kind)
        assert cls.__module__ == f"patchkit.recipe.kinds.{name}" and cls.find is not PointKind.find, name


def test_every_kind_has_a_valid_and_an_invalid_example():
    for kind in KINDS.values():
        assert kind.VALID and kind.INVALID, kind.name


def test_a_point_is_named_as_messages_name_it():
    point = Point(cls="A", method="run", at="loop_end", action="step", loop=(LoopSelector(iter="batches"),))
    assert describe(point) == "step loop_end of the loop over batches in A.run"


@pytest.mark.parametrize("args", [["validate", str(REPO / "recipes" / "verl-fsdp-update.yaml")], ["list"],
                                  ["show", "verl-fsdp-update", "--root", str(REPO / "fixtures" / "verl-0.6")],
                                  ["show", "vllm-ascend-decode", "--root", str(REPO / "fixtures" / "vllm-ascend-0.11")],
                                  ["show", "verl-fsdp-logprob", "role=ref", "--root", str(REPO / "fixtures" / "verl-0.9")]],
                         ids=["validate", "list", "show", "show-two-candidates", "show-refused"])
def test_reading_recipes_loads_no_libcst_and_no_codemod(args, tmp_path):
    probe = (f"import sys\nCODEMOD = {CODEMOD!r}\nfrom click.testing import CliRunner\nfrom patchkit.cli import main\n"
             f"result = CliRunner().invoke(main, {args!r})\n"
             "assert result.exit_code == 0, result.output\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'libcst' or m.startswith(CODEMOD)))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={"PATCHKIT_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin",
                               "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _kinds_imported(args, tmp_path) -> list:
    probe = ("import sys\nfrom click.testing import CliRunner\nfrom patchkit.cli import main\n"
             f"result = CliRunner().invoke(main, {args!r})\nassert result.exit_code == 0, result.output\n"
             "print(sorted(m.rpartition('.')[2] for m in sys.modules if m.startswith('patchkit.recipe.kinds.')))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={"PATCHKIT_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin",
                               "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    return eval(done.stdout.strip())


def test_reading_a_recipe_imports_only_the_kinds_its_points_name(tmp_path):
    """A kind's module is imported when the kind is asked for: `validate` and `show` load the kinds of the
    recipe's points, `list` and `--help` none (the folder is still walked for their names)."""
    import patchkit

    named = sorted({p.at for p in patchkit.load("verl-fsdp-update").recipe.points})
    assert 0 < len(named) < len(KINDS)
    assert _kinds_imported(["validate", str(REPO / "recipes" / "verl-fsdp-update.yaml")], tmp_path) == named
    show = ["show", "verl-fsdp-update", "--root", str(REPO / "fixtures" / "verl-0.6")]
    assert _kinds_imported(show, tmp_path) == named
    assert _kinds_imported(["list"], tmp_path) == _kinds_imported(["--help"], tmp_path) == []


def test_kinds_is_the_walk_s_dict_imported_as_asked(tmp_path):
    code = ("import sys\nfrom patchkit.recipe import kinds\n"
            "def loaded():\n"
            "    return sorted(m.rpartition('.')[2] for m in sys.modules if m.startswith(kinds.__name__ + '.'))\n"
            "print(len(kinds.KINDS), 'method_end' in kinds.KINDS, 'nowhere' in kinds.KINDS, loaded())\n"
            "print(kinds.KINDS['method_end'].name, loaded())\n"
            "print(list(kinds.KINDS) == list(kinds.found()), len(loaded()) == len(kinds.KINDS))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}).stdout.splitlines()
    assert out == [f"{len(KINDS)} True False []", "method_end ['method_end']", "True True"]
