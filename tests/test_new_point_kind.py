"""A new kind of point, added exactly as docs/contributing.md says, in a copy of the checkout: its module (taken
from the guide's own code block), then the guide's own commands, which write the schema and docs/reference.md
again.  The copy then finds it, validates it in a recipe, lists it in the schema and the committed reference
(the copy's tests/test_docs.py passes: before, the guide promised "no other file" and the reference was rendered
in memory only, so the claim was certified while test_docs failed), shows and applies it, offers it in
`patchkit points`, and runs its examples in tests/test_point_kinds.py, with tests/test_layers.py's rules kept;
and no file of the copy but those three changed."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict

import pytest

REPO = Path(__file__).resolve().parent.parent
GUIDE = "docs/contributing.md"
MODULE = "patchkit/recipe/kinds/after_loop.py"  # the path the guide's block names
COPIED = ("patchkit", "recipes", "docs", "tests", "pyproject.toml", "mkdocs.yml")
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")


def files(root: Path) -> Dict[str, str]:
    """Every file under ``root`` (caches left out), by path, with the hash of its bytes."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
            and ".pytest_cache" not in p.parts}


def guide_block(guide: str, title: str) -> str:
    """The code block of the guide whose title is ``title``, as the file it shows (its list indent taken off)."""
    found = re.search(r'^( *)```python title="' + re.escape(title) + r'"\n(.*?)^\1```', guide, re.S | re.M)
    assert found, f"{GUIDE} has no code block titled {title}"
    return textwrap.dedent(found.group(2))


def guide_steps(guide: str) -> list:
    """The commands the guide's numbered steps for a new kind say to run (``python ...``), in order."""
    section = guide[guide.index("### A new kind of point"):]
    section = section[:section.index("\n## ")]
    return re.findall(r"^\d+\. Run `python ([^`]+)`", section, re.M)


def quick_tests(guide: str) -> list:
    """The test modules the guide's section names to run after adding a kind."""
    section = guide[guide.index("### A new kind of point"):]
    section = section[:section.index("\n## ")]
    block = re.search(r"```bash\n(python -m pytest -q [^\n]*)\n```", section)
    assert block, f"{GUIDE} names no quick subset of tests to run after adding a kind"
    return block.group(1).split()[4:]


def run(copy: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(copy), "PATCHKIT_HOME": str(copy.parent / "home")}
    env.pop("PATCHKIT_ROOT", None)
    return subprocess.run([sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=timeout)


PROBE = r'''
import json, sys
from pathlib import Path
import importlib.util
from click.testing import CliRunner

import jsonschema
import yaml

import patchkit
from patchkit.cli import main
from patchkit.recipe.kinds import KINDS

copy = Path.cwd()
own = copy / "tests" / "own_code" / "installed"
out = {"package": str(Path(patchkit.__file__).resolve().parent), "kinds": list(KINDS),
       "module": sys.modules[type(KINDS["after_loop"]).__module__].__file__}
scope = {"class": "Trainer", "method": "fit"}
recipe = {"id": "mine", "description": "d", "backend": "torch",
          "target": {"package": "tinytrain", "distribution": "tiny-train", "files": ["tinytrain/loop.py"]},
          "points": [{**scope, "at": "after_loop", "loop": {"iter": "batches"}}]}
Path("mine.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
bad = dict(recipe, id="bad", points=[{**scope, "at": "after_loop"}])
Path("bad.yaml").write_text(yaml.safe_dump(bad, sort_keys=False))
runner = CliRunner()
def cli(*args):
    done = runner.invoke(main, list(args))
    return {"code": done.exit_code, "out": done.stdout, "err": done.stderr}
out["validate"] = cli("validate", "mine.yaml")
out["validate_bad"] = cli("validate", "bad.yaml")
out["show"] = cli("show", "./mine.yaml", "--root", str(own))
out["diff"] = cli("diff", "./mine.yaml", "--root", str(own))
out["points"] = cli("points", "tinytrain.loop:Trainer.fit", "--root", str(own), "--all")
schema = json.loads((copy / "patchkit" / "recipe" / "recipe.schema.json").read_text())
out["schema_at"] = schema["$defs"]["point"]["properties"]["at"]
jsonschema.validate(recipe, schema)
spec = importlib.util.spec_from_file_location("hook", copy / "docs" / "hooks" / "reference.py")
hook = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hook)
out["reference"] = hook.kinds_section(hook.declarations())
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def added(tmp_path_factory):
    """The copy, its files before, and its files after the guide's two steps."""
    copy = tmp_path_factory.mktemp("newkind") / "checkout"
    for name in COPIED:
        source = REPO / name
        (shutil.copytree(source, copy / name, ignore=SKIP) if source.is_dir()
         else shutil.copy2(source, copy / name))
    before = files(copy)
    # step 1: the module, exactly as the guide shows it
    (copy / MODULE).write_text(guide_block((copy / GUIDE).read_text(encoding="utf-8"), MODULE), encoding="utf-8")
    # the steps after it: the commands the guide names, as it writes them
    steps = guide_steps((copy / GUIDE).read_text(encoding="utf-8"))
    assert steps == ["-m patchkit.recipe.schema", "docs/hooks/reference.py"]
    for step in steps:
        done = run(copy, *step.split())
        assert done.returncode == 0, done.stderr
    return copy, before, files(copy)


def test_the_guide_s_steps_change_the_module_and_the_two_generated_files_only(added):
    copy, before, after = added
    assert not (REPO / MODULE).exists()  # the real checkout is untouched
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    assert changed == ["docs/reference.md", MODULE, "patchkit/recipe/recipe.schema.json"]


def test_the_quick_tests_the_guide_names_exist_and_hold_a_kind():
    named = quick_tests((REPO / GUIDE).read_text(encoding="utf-8"))
    assert named and all((REPO / t).is_file() for t in named), named
    assert {"tests/test_point_kinds.py", "tests/test_schema.py", "tests/test_docs.py"} <= set(named)


def test_the_new_kind_is_found_validated_documented_shown_applied_and_offered(added):
    copy = added[0]
    done = run(copy, "-c", PROBE)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["package"] == str((copy / "patchkit").resolve()) and out["module"] == str(copy / MODULE)
    assert "after_loop" in out["kinds"]  # found by the walk of the folder
    assert out["validate"]["code"] == 0, out["validate"]
    assert out["validate_bad"]["code"] == 1 and "`at: after_loop` needs `loop:`" in out["validate_bad"]["err"]
    assert "after_loop" in out["schema_at"]["enum"]
    assert "after_loop, the line after the loop `loop:` selects" in out["schema_at"]["description"]
    assert "{#at-after_loop}" in out["reference"] and "has an else block at line 5" in out["reference"]
    assert out["show"]["code"] == 0 and "step after_loop of the loop over batches in Trainer.fit" in out["show"]["out"]
    assert out["diff"]["code"] == 0, out["diff"]
    diff = out["diff"]["out"].splitlines()
    at = diff.index("                 self.seen += 1")
    assert diff[at + 1] == '+            _patchkit_runtime.step("mine")  # patchkit:mine'  # after the inner loop
    offered = out["points"]["out"]
    assert out["points"]["code"] == 0
    assert "at: after_loop loop: {iter: batches}" in offered and "at: after_loop loop: {target: epoch}" in offered


def test_the_kinds_test_runs_its_examples_and_the_layers_rules_hold(added):
    copy = added[0]
    done = run(copy, "-m", "pytest", "-v", "-p", "no:cacheprovider", "tests/test_point_kinds.py",
               "tests/test_layers.py", "tests/test_schema.py",
               "tests/test_docs.py::test_the_committed_reference_is_what_its_generator_makes", timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "test_the_committed_reference_is_what_its_generator_makes PASSED" in done.stdout
    passed = [ln for ln in done.stdout.splitlines() if "PASSED" in ln]
    assert sum("after_loop-valid" in ln for ln in passed) == 1 and sum("after_loop-invalid" in ln for ln in passed) == 1
    assert not any("FAILED" in ln or "ERROR" in ln for ln in done.stdout.splitlines())
