"""The inserted lines: literals that never escape their quoting, and a header that never breaks the import.

The header's promise is tested with a real interpreter that has no patchkit
(a fresh virtualenv, run with ``-I`` so neither the working directory nor
PYTHONPATH lends it one): the patched module imports, its methods run, and
one line on stderr names the recipe, the interpreter and what to install.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import patchkit
from patchkit import DISTRIBUTION
from patchkit.engine.lines import header_lines, literal
from patchkit.state.ledger import Ledger
from patchkit.recipe.load import load_recipe

import realwheels

JOB = '''\
"""A job module."""
from __future__ import annotations

import json


class Worker:
    def run(self, batches):
        out = []
        for batch in batches:
            out.append(batch * 2)
        return json.dumps(out)

    def forward(self, x):
        return x + 1
'''

RECIPE = '''\
id: tiny-job
description: a loop in a small job
target: {package: tinyjob, files: [tinyjob/worker.py]}
backend: torch
points:
  - {class: Worker, method: run, at: method_start, action: start}
  - {class: Worker, method: run, at: loop_end, loop: [{iter: batches}]}
  - {class: Worker, method: forward, at: on_exit}
'''


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A Python with nothing installed: a new virtualenv without pip."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    probe = subprocess.run([str(python), "-I", "-c", "import patchkit"], capture_output=True, text=True)
    assert "No module named 'patchkit'" in probe.stderr, probe.stderr  # the premise: no patchkit there
    return str(python)


def _job(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    (root / "tinyjob").mkdir(parents=True)
    (root / "tinyjob" / "__init__.py").write_text("")
    (root / "tinyjob" / "worker.py").write_text(JOB)
    (tmp_path / "tiny-job.yaml").write_text(RECIPE)
    return root


def test_a_patched_module_imports_and_runs_where_patchkit_is_missing(tmp_path, bare_python):
    root = _job(tmp_path)
    settings = load_recipe(tmp_path / "tiny-job.yaml")
    outcomes = patchkit.apply(settings, str(root), ledger=Ledger())
    assert [o.state for o in outcomes] == ["patched"]
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import tinyjob.worker as w; "
            "print(w.Worker().run([1, 2, 3]), w.Worker().forward(1))")
    done = subprocess.run([bare_python, "-I", "-c", code, str(root)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[2, 4, 6] 2\n"
    said = done.stderr.splitlines()
    assert len(said) == 1, done.stderr  # once, for the module, however many steps ran
    assert said[0].startswith("patchkit: tiny-job is applied to tinyjob.worker, but ")
    assert bare_python in said[0] and "No module named 'patchkit'" in said[0]
    assert f"Install the same patchkit build ({DISTRIBUTION}, not the registry's patchkit)" in said[0]
    assert "patchkit revert tiny-job" in said[0]


def test_the_same_module_profiles_where_patchkit_is_installed(tmp_path, clean_runtime):
    root = _job(tmp_path)
    settings = load_recipe(tmp_path / "tiny-job.yaml", ["schedule.active=2", f"profiler.save_path={tmp_path / 'out'}"])
    patchkit.apply(settings, str(root), ledger=Ledger())
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import tinyjob.worker as w; w.Worker().run([1, 2, 3]); "
            "import patchkit.runtime as r; r.report()")
    done = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "cannot import patchkit.runtime" not in done.stderr
    assert list((tmp_path / "out").rglob("*.json")), done.stderr  # a real torch trace


def test_stderr_that_cannot_be_written_does_not_break_the_import(tmp_path, bare_python):
    root = _job(tmp_path)
    patchkit.apply(load_recipe(tmp_path / "tiny-job.yaml"), str(root), ledger=Ledger())
    code = ("import sys; sys.path.insert(0, sys.argv[1]); sys.stderr.close(); import tinyjob.worker as w; "
            "print(w.Worker().run([1]))")
    done = subprocess.run([bare_python, "-I", "-c", code, str(root)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "[2]\n"


GUARDED = '''\
id: tiny-guarded
description: guards that raise when the job runs
target: {package: tinyjob, files: [tinyjob/worker.py]}
backend: torch
points:
  - {class: Worker, method: run, at: method_start, action: start, guard: self.config.use_dynamic_bsz}
  - {class: Worker, method: run, at: loop_end, loop: [{iter: batches}], guard: 1/0 == 1}
  - {class: Worker, method: forward, at: on_exit, guard: x.missing}
'''


def test_a_guard_that_raises_is_false_and_said_once_per_point(tmp_path):
    """The job runs on, its results unchanged; stderr has one patchkit line per point, naming the point's line."""
    root = _job(tmp_path)
    (tmp_path / "tiny-guarded.yaml").write_text(GUARDED)
    patchkit.apply(load_recipe(tmp_path / "tiny-guarded.yaml", [f"profiler.save_path={tmp_path / 'out'}"]), str(root),
              ledger=Ledger())
    patched = (root / "tinyjob" / "worker.py").read_text()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import tinyjob.worker as w; "
            "print([w.Worker().run([1, 2, 3]) for _ in range(3)], [w.Worker().forward(1) for _ in range(3)])")
    done = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "['[2, 4, 6]', '[2, 4, 6]', '[2, 4, 6]'] [2, 2, 2]\n"
    said = [line for line in done.stderr.splitlines() if "patchkit" in line]
    assert len(said) == 3, done.stderr
    numbers = [n for n, line in enumerate(patched.splitlines(), 1)
               if line.lstrip().startswith(("_patchkit_runtime.st", "@_patchkit_runtime.on_exit", "if "))]
    assert len(numbers) == 3, patched
    for line, (number, what) in zip(sorted(said, key=lambda s: s.count("forward")),
                                    zip(numbers, ("AttributeError", "ZeroDivisionError", "AttributeError"))):
        assert f"worker.py:{number}" in line and what in line and "false" in line, line
    assert not (tmp_path / "out").exists()  # no guard held: no profiler, no trace


OLD_RUNTIME = """\
def configure(recipe_id, **settings): pass
def start(key): pass
def step(key): pass
def on_exit(key, guard=None): return lambda fn: fn
"""


def test_a_runtime_older_than_the_lines_is_the_stand_in_not_an_error(tmp_path, bare_python):
    """An older patchkit in the job's environment (its step takes no guard): the module says so once and runs on."""
    root = _job(tmp_path)
    (tmp_path / "tiny-guarded.yaml").write_text(GUARDED)
    patchkit.apply(load_recipe(tmp_path / "tiny-guarded.yaml"), str(root), ledger=Ledger())
    old = tmp_path / "old" / "patchkit"
    old.mkdir(parents=True)
    (old / "__init__.py").write_text("")
    (old / "runtime.py").write_text(OLD_RUNTIME)
    code = ("import sys; sys.path[:0] = sys.argv[1:]; import tinyjob.worker as w; "
            "print(w.Worker().run([1, 2]), w.Worker().forward(1))")
    done = subprocess.run([bare_python, "-I", "-c", code, str(root), str(old.parent)], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[2, 4] 2\n"
    (said,) = done.stderr.splitlines()
    assert "or imports an older build than these lines need" in said and "has no attribute 'require'" in said


def _newest_release(settings):
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    target = settings.recipe.target
    inside = [r for r in realwheels.releases() if r.dist.replace("_", "-") == target.distribution
              and SpecifierSet(target.versions).contains(Version(r.version), prereleases=True)]
    return max(inside, key=lambda r: Version(r.version)) if inside else None


REAL = [s for s in patchkit.all_recipes() if _newest_release(s) is not None]


@pytest.mark.parametrize("settings", REAL, ids=[s.id for s in REAL])
def test_real_targets_get_past_patchkits_lines_without_patchkit(settings, tmp_path, bare_python):
    """Each recipe on its newest real file: the module, run where patchkit is missing, fails only on its own imports."""
    rel = _newest_release(settings)
    root = tmp_path / "root"
    shutil.copytree(realwheels.release_root(rel.dist, rel.version), root)
    outcomes = patchkit.apply(settings, str(root), ledger=Ledger())
    for o in outcomes:
        code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('patched_target', sys.argv[1]); "
                "spec.loader.exec_module(importlib.util.module_from_spec(spec))")
        done = subprocess.run([bare_python, "-I", "-c", code, str(o.path)], capture_output=True, text=True,
                              cwd=tmp_path)
        lines = done.stderr.splitlines()
        assert lines[0].startswith(f"patchkit: {settings.id} is applied to patched_target, but "), done.stderr
        last = lines[-1]
        assert "patchkit" not in last, done.stderr  # what stops it is the package's own imports (torch, vllm, ...)
        assert last.startswith(("ModuleNotFoundError", "ImportError")), done.stderr


def test_header_lines_each_carry_the_marker_and_compile_alone(tmp_path):
    settings = load_recipe(_recipe_file(tmp_path), ['profiler.save_path=a"b\\c\u2028d'])
    lines = header_lines(settings)
    assert all(line.endswith("  # patchkit:tiny-job") for line in lines)
    tree = ast.parse("\n".join(lines) + "\n")
    assert [type(node).__name__ for node in tree.body] == ["Try", "Expr"]
    assert all(ln.isascii() for ln in lines)


def _recipe_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-job.yaml"
    path.write_text(RECIPE)
    return path


@pytest.mark.parametrize("value", ["plain", 'quote " and \\ backslash', "new\nline", "\u00e9\U0001f600", ""])
def test_literals_stay_literals(value):
    text = literal(value)
    assert text.isascii() and ast.literal_eval(text) == value
    assert ast.literal_eval(literal([value, 1, True, None])) == (value, 1, True, None)


def test_the_noop_stand_in_offers_every_name_the_generated_lines_call(tmp_path):
    """Every ``_patchkit_runtime.<name>`` that any built-in recipe's lines call exists on the stand-in and does nothing."""
    import re

    import patchkit.engine.lines as codegen

    stand_in = eval(codegen.NOOP.format(codegen.NOOP_LABELLED))  # noqa: S307 - patchkit's own constant
    called = set()
    for settings in patchkit.all_recipes():
        for point in settings.active_points():
            called |= set(re.findall(r"_patchkit_runtime\.(\w+)\(", "\n".join(codegen.shown(settings, point))))
        called |= set(re.findall(r"_patchkit_runtime\.(\w+)\(", "\n".join(header_lines(settings))))
    called |= {"mark", "range_start", "range_end", "ranged"}  # what range and mark points call
    called -= {"require"}  # asked of the real runtime inside the header's try: the stand-in is what it falls back to
    assert {"configure", "start", "step", "refuse", "on_exit"} <= called
    for name in called:
        assert callable(getattr(stand_in, name)), name
    assert stand_in.on_exit("k", lambda *a: True)(len) is len and stand_in.ranged("k", "n")(len) is len
    assert "ranged=" not in codegen.NOOP.format("")  # recipes without ranges or marks keep the short stand-in
    assert stand_in.configure("r", backend="torch") is None and stand_in.step("k") is None
    assert stand_in.start("k") is None and stand_in.refuse("k", "why") is None


def test_no_header_line_holds_two_statements(tmp_path):
    """A formatter (black, ruff) splits `try: x` into two lines and the marker stays on one: the header has none."""
    settings = load_recipe(_recipe_file(tmp_path))
    for line in header_lines(settings):
        code = line[: line.index("  # patchkit:")].strip()
        if code.startswith(("try", "except")):
            assert code.endswith(":"), line
