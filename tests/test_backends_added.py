"""A backend added exactly as docs/contributing.md says, and nothing else touched.

The module is the one the guide shows under "Writing a backend", read from
the guide itself (so the guide stays true), written to the path it names in a
copy of the package; then the guide's commands write the copy's schema and
``docs/reference.md`` again (before, the guide promised "no other file" and the
reference was rendered in memory only, while test_docs failed on the page).  A
process that imports the copy shows that the backend is found, accepted as a
recipe's ``backend:`` and as ``backend=``, listed in the schema and the
reference, printed by ``patchkit show``, and that it records a window through
the runtime from the lines ``apply`` inserts; that the layer tests and the
import contracts hold on the copy; and that the tests which loop over the
backends found run it.  The copy differs from this checkout in that module
and the two files the commands wrote (the reference page as its generator
makes it), nothing else.
"""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "contributing.md"


def guide():
    """What "Writing a backend" says to do: the module's path, its text, and the command to run after."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("## Writing a backend"):]
    section = section[:section.index("\n## ", 3)]
    path = re.search(r"file,\s+`(patchkit/runtime/backends/(\w+)\.py)`", section)
    code = re.search(r"```python\n(.*?)```", section, re.S)
    command = re.search(r"```bash\n(.*?)```", section, re.S)
    assert path and code and command, "docs/contributing.md's 'Writing a backend' lost its module, path or command"
    quick = re.search(r"`(python -m pytest -q [^`]*)`", section)
    assert quick, "docs/contributing.md's 'Writing a backend' names no quick subset of tests"
    return (path.group(1), path.group(2), code.group(1), command.group(1).strip().splitlines(),
            quick.group(1).split()[4:])


PATH, NAME, MODULE, COMMANDS, QUICK = guide()
GENERATED = ["patchkit/recipe/recipe.schema.json", "docs/reference.md"]

TRAINER = textwrap.dedent("""\
    def work(batch):
        return batch * 2


    class Trainer:
        def fit(self, batches):
            for batch in batches:
                batch = work(batch)
    """)

RECIPE = textwrap.dedent(f"""\
    id: fit-steps
    description: a step per batch
    target: {{package: plaintarget, files: [plaintarget/trainer.py]}}
    backend: {NAME}
    profiler: {{save_path: ./out}}
    schedule: {{wait: 1, active: 2, repeat: 1}}
    points:
      - {{class: Trainer, method: fit, at: loop_end, loop: {{iter: batches}}}}
    """)

# Run in a process that imports the copy: everything a backend name reaches, as JSON on stdout.
DRIVER = textwrap.dedent('''\
    import importlib, importlib.util, json, pstats, sys
    from pathlib import Path

    import patchkit
    from click.testing import CliRunner
    from patchkit.cli.commands import main
    from patchkit.recipe import schema
    from patchkit.recipe.load import load_recipe
    from patchkit.runtime import backends

    name, repo, copy = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    out = {"package": patchkit.__file__, "names": list(backends.names()),
           "is_backend": isinstance(backends.get(name), backends.Backend)}
    out["recipe"] = load_recipe(Path("fit-steps.yaml")).recipe.backend
    out["override"] = load_recipe(Path("fit-steps.yaml"), ["backend=torch"]).runtime_settings()["backend"]
    shipped = json.loads(schema.PATH.read_text())
    out["schema"] = shipped["properties"]["backend"]["enum"]
    out["schema_is_made"] = schema.PATH.read_text() == schema.text()
    spec = importlib.util.spec_from_file_location("reference_hook", repo / "docs" / "hooks" / "reference.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    out["reference"] = hook.backends_section(hook.declarations())
    shown = CliRunner().invoke(main, ["show", "fit-steps.yaml"])
    out["show"] = (shown.exit_code, shown.output)
    applied = CliRunner().invoke(main, ["apply", "fit-steps.yaml", "--root", "site"])
    out["apply"] = (applied.exit_code, applied.output)

    from patchkit import runtime
    sys.path.insert(0, "site")
    runtime.set_strict(True)
    importlib.import_module("plaintarget.trainer").Trainer().fit(list(range(6)))
    [report] = runtime.report()
    out["report"] = report
    out["functions"] = [sorted(f for (_, _, f) in pstats.Stats(t).stats) for t in report["traces"]]

    sys.path.insert(0, str(repo / "tests"))  # the layer tests, run on the copy: patchkit is the copy's
    import test_layers
    for check in ("test_no_import_cycle_lazy_imports_included", "test_each_layer_s_init_names_its_modules",
                  "test_every_module_has_its_test_module", "test_modules_stay_small"):
        getattr(test_layers, check)()
    out["layers"] = str(test_layers.PACKAGE)
    print(json.dumps(out))
    ''')


@pytest.fixture(scope="module")
def added(tmp_path_factory):
    """The copy with the guide's module added and its command run, and what a process importing it found."""
    top = tmp_path_factory.mktemp("added")
    copy, work = top / "checkout", top / "work"
    shutil.copytree(REPO / "patchkit", copy / "patchkit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "docs", copy / "docs", ignore=shutil.ignore_patterns("__pycache__"))  # the reference
    shutil.copy2(REPO / "pyproject.toml", copy / "pyproject.toml")  # the import contracts
    assert not (copy / PATH).exists(), f"{PATH} exists already: the guide must add a backend patchkit lacks"
    (copy / PATH).write_text(MODULE, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(copy), PATCHKIT_HOME=str(top / "home"))
    env.pop("PATCHKIT_STRICT", None)
    assert COMMANDS == ["python -m patchkit.recipe.schema", "python docs/hooks/reference.py"]
    for command in COMMANDS:
        done = subprocess.run([sys.executable, *command.split()[1:]], cwd=copy, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr

    work.mkdir()
    (work / "fit-steps.yaml").write_text(RECIPE)
    (work / "site" / "plaintarget").mkdir(parents=True)
    (work / "site" / "plaintarget" / "__init__.py").write_text("")
    (work / "site" / "plaintarget" / "trainer.py").write_text(TRAINER)
    (work / "driver.py").write_text(DRIVER)
    done = subprocess.run([sys.executable, "driver.py", NAME, str(REPO), str(copy)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    lint = subprocess.run([str(Path(sys.executable).with_name("lint-imports"))], cwd=copy, env=env,
                          capture_output=True, text=True, timeout=300)
    return copy, work, json.loads(done.stdout.splitlines()[-1]), lint


def test_it_is_found_and_is_a_backend(added):
    copy, _, found, _ = added
    assert Path(found["package"]).is_relative_to(copy)
    assert NAME in found["names"] and found["is_backend"]


def test_a_recipe_takes_it_as_its_backend(added):
    _, _, found, _ = added
    assert found["recipe"] == NAME and found["override"] == "torch"


def test_the_schema_and_the_reference_list_it(added):
    _, _, found, _ = added
    assert NAME in found["schema"] and found["schema_is_made"]
    section = found["reference"]
    assert f"### `{NAME}` {{#backend-{NAME}}}" in section and f"{NAME} backend: " in section
    assert f"patchkit show my-recipe --backend {NAME}" in section


def test_show_prints_its_code_and_the_runtime_records_a_window_with_it(added):
    _, work, found, _ = added
    code, shown = found["show"]
    assert code == 0 and f"profiler code the runtime builds ({NAME}):" in shown and "prof.enable()" in shown
    assert found["apply"][0] == 0, found["apply"][1]
    report = found["report"]
    assert report["backend"] == NAME and report["state"] == "finished" and report["error"] is None
    assert report["recorded"] == [[1, 2]]
    [trace] = report["traces"]
    assert (work / trace).parent.resolve() == (work / "out").resolve() and trace.endswith("_steps1-2.pstats")
    assert "work" in found["functions"][0]  # the function the loop calls, recorded inside the window


def test_the_layer_tests_and_the_import_contracts_hold_with_it(added):
    copy, _, found, lint = added
    assert found["layers"] == str(copy / "patchkit")
    assert lint.returncode == 0 and re.search(r"Contracts: \d+ kept, 0 broken\.", lint.stdout), lint.stdout + lint.stderr


def test_the_tests_that_loop_over_the_backends_found_run_it(added, tmp_path):
    copy, _, _, _ = added
    env = dict(os.environ, PYTHONPATH=str(copy))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
                           str(REPO / "tests" / "test_backends.py"), "-k", f"found and {NAME}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:]
    ran = re.findall(r"^PASSED \S+\[(\w+)\]", done.stdout, re.M)
    assert ran and set(ran) == {NAME}, done.stdout[-2000:]


def test_nothing_but_the_module_and_the_schema_the_command_made_differs(added):
    copy, _, _, _ = added
    differ = []

    def walk(ours: Path, theirs: Path):
        cmp = filecmp.dircmp(ours, theirs, ignore=["__pycache__"])
        differ.extend(str((theirs / n).relative_to(copy)) for n in cmp.left_only + cmp.right_only + cmp.diff_files)
        for sub in cmp.common_dirs:
            walk(ours / sub, theirs / sub)

    walk(REPO / "patchkit", copy / "patchkit")
    walk(REPO / "docs", copy / "docs")
    assert sorted(differ) == sorted([PATH, *GENERATED])


def test_the_committed_reference_of_the_copy_is_what_its_generator_makes(added):
    """What tests/test_docs.py checks of docs/reference.md, on the copy: the page on disk names the backend."""
    copy = added[0]
    done = subprocess.run([sys.executable, "docs/hooks/reference.py", "--check"], cwd=copy,
                          env=dict(os.environ, PYTHONPATH=str(copy)), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{{#backend-{NAME}}}" in (copy / "docs" / "reference.md").read_text(encoding="utf-8")


def test_the_quick_tests_the_guide_names_exist_and_hold_a_backend():
    assert QUICK and all((REPO / t).is_file() for t in QUICK), QUICK
    assert {"tests/test_backends.py", "tests/test_schema.py", "tests/test_docs.py"} <= set(QUICK)
