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
