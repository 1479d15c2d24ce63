"""patchkit.runtime.finder: the backends are the modules of patchkit.runtime.backends, found without importing
them, and code may register more; a registered backend is usable everywhere a backend name is.

The backend registered here is a module written by the test into a folder of
its own: its code only notes, in ``LOG``, what the runtime runs.  Registered,
it is a recipe's ``backend:``, a ``backend=`` override and a ``--backend``
choice, ``patchkit show`` prints its code, and a patched module drives it on
CPU.  (A backend added to the package's folder: tests/test_backends_added.py.)
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchkit.runtime import backends, finder
from patchkit.cli.commands import main
from patchkit.core.errors import OverrideError, RecipeError
from patchkit.recipe.load import load_recipe

ECHO = textwrap.dedent('''\
    """A backend for the tests: its profiler code notes each section it runs in LOG."""
    from patchkit.runtime.backends import SECTIONS, Backend, Plan

    LOG = []


    class Echo(Backend):
        def probe(self):
            return {"version": "echo 1"}

        def check(self, s):
            return ["profiler.level level2 is more than echo can note"] if s["level"] == "level2" else []

        def plan(self, s, features, key):
            code = {name: "import echo_backend\\necho_backend.LOG.append((%r, step))\\n" % name for name in SECTIONS}
            return Plan(sections=code, trace_dir=None, notes=("echo writes no trace",))
    ''')

TRAINER = "class Trainer:\n    def fit(self, batches):\n        for batch in batches:\n            batch += 1\n"


def recipe_text(backend):
    return textwrap.dedent(f"""\
        id: echo-fit
        description: a step per batch
        target: {{package: echotarget, files: [echotarget/trainer.py]}}
        backend: {backend}
        schedule: {{wait: 1, active: 2, repeat: 1}}
        points:
          - {{class: Trainer, method: fit, at: loop_end, loop: {{iter: batches}}}}
        """)


@pytest.fixture
def registry(monkeypatch):
    """The backends registered as they are now; what a test registers is gone after it."""
    saved = dict(finder._REGISTRY)
    yield backends
    finder._REGISTRY.clear()
    finder._REGISTRY.update(saved)


@pytest.fixture
def echo(tmp_path, monkeypatch, registry):
    folder = tmp_path / "plugins"
    folder.mkdir()
    monkeypatch.chdir(tmp_path)  # its windows' manifests go to the (relative) save path: not into the checkout
    (folder / "echo_backend.py").write_text(ECHO)
    monkeypatch.syspath_prepend(str(folder))
    registry.register("echo", "echo_backend")  # by path: imported when first used
    yield
    sys.modules.pop("echo_backend", None)


def run(*args, ok=True):
    result = CliRunner().invoke(main, list(args))
    if ok:
        assert result.exit_code == 0, result.output
    return result


FOLDER = Path(backends.__file__).parent
ON_DISK = tuple(sorted(p.stem for p in FOLDER.glob("*.py") if not p.name.startswith("_")))  # what the walk must find


def test_the_backends_are_the_modules_of_their_folder_found_without_importing_them():
    import subprocess

    code = ("import sys, patchkit.runtime.backends as b; print(' '.join(b.names())); "
            "print(sorted(m for m in sys.modules if m.startswith('patchkit.runtime.backends.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert ON_DISK and out.splitlines() == [" ".join(ON_DISK), "[]"]  # found, and none imported


def test_the_backend_choices_of_the_command_line_import_no_backend():
    import subprocess

    code = ("import sys; sys.argv = ['patchkit', 'diff', '--help']; import patchkit.cli.commands as c\n"
            "try:\n    c.main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('patchkit.runtime.backends.') "
            "or m in ('libcst', 'git', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert f"--backend [{'|'.join(ON_DISK)}]" in out and out.splitlines()[-1] == "[]"


def test_each_backend_found_is_its_module_s_one_backend():
    for name in finder.found():
        backend = finder.get(name)
        assert isinstance(backend, backends.Backend) and type(backend).__module__ == f"{finder.PACKAGE}.{name}"
        assert finder.get(name) is backend  # made once


def test_a_registered_backend_is_usable_from_recipes_the_command_line_and_the_runtime(echo, tmp_path, monkeypatch,
                                                                                      clean_runtime):
    mine = tmp_path / "echo-fit.yaml"
    mine.write_text(recipe_text("echo"))
    theirs = tmp_path / "torch" / "echo-fit.yaml"
    theirs.parent.mkdir()
    theirs.write_text(recipe_text("torch"))

    # a recipe's backend:, a backend= override, --backend
    assert load_recipe(mine).recipe.backend == "echo"
    assert load_recipe(theirs, ["backend=echo"]).runtime_settings()["backend"] == "echo"
    assert f"--backend [{'|'.join(ON_DISK)}|echo]" in run("show", "--help").output
    shown = run("show", str(theirs), "--backend", "echo").output
    assert "backend:  echo" in shown and "profiler code the runtime builds (echo):" in shown
    assert "echo_backend.LOG.append(('window_open', step))" in shown and "# Note: echo writes no trace" in shown

    # its own check() is the recipe's
    with pytest.raises(OverrideError, match="profiler.level=level2: profiler.level level2 is more than echo can note"):
        load_recipe(mine, ["profiler.level=level2"])

    # the runtime, through the lines apply inserts
    site = tmp_path / "site"
    (site / "echotarget").mkdir(parents=True)
    (site / "echotarget" / "__init__.py").write_text("")
    (site / "echotarget" / "trainer.py").write_text(TRAINER)
    run("apply", str(mine), "--root", str(site))
    monkeypatch.syspath_prepend(str(site))
    clean_runtime.set_strict(True)
    try:
        trainer = importlib.import_module("echotarget.trainer")
        trainer.Trainer().fit([1, 2, 3, 4, 5])
    finally:
        for name in ("echotarget.trainer", "echotarget"):
            sys.modules.pop(name, None)
    log = sys.modules["echo_backend"].LOG
    assert [name for name, _ in log if name in ("create", "begin")] == ["create", "begin"]  # once
    assert [(name, step) for name, step in log if name in ("window_open", "window_close", "end")] == [
        ("window_open", 1), ("window_close", 2), ("end", 3)]  # wait 1, active 2: steps 1-2; over at step 3
    assert [step for name, step in log if name == "step_enter"] == [1, 2]


def test_a_name_nobody_registered_is_refused_everywhere(tmp_path, registry):
    path = tmp_path / "echo-fit.yaml"
    path.write_text(recipe_text("echo"))
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    known = ", ".join(ON_DISK)
    assert info.value.message == f"backend must be one of {known}; got 'echo'" and info.value.where.line == 4
    assert run("show", str(path), "--backend", "echo", ok=False).exit_code == 2
    assert backends.validate({"backend": "echo"}) == [f"backend 'echo' is not one of {known}"]


def test_a_registered_module_that_cannot_be_used_is_a_recipe_error_at_its_line(tmp_path, registry):
    registry.register("ghost", "patchkit_no_such_backend_module")
    path = tmp_path / "echo-fit.yaml"
    path.write_text(recipe_text("ghost"))
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert "backend 'ghost' cannot be used: No module named 'patchkit_no_such_backend_module'" in info.value.message
    assert info.value.where.line == 4 and f"pick another: {', '.join(ON_DISK)}, ghost" in info.value.hint
    assert backends.validate({"backend": "ghost"})[0].startswith("backend 'ghost' cannot be used")


def test_register_refuses_a_bad_name_or_what_is_no_backend(registry):
    with pytest.raises(ValueError, match="backend name 'My Profiler'"):
        registry.register("My Profiler", "x")
    with pytest.raises(TypeError, match="is not a patchkit.runtime.backend.Backend"):
        registry.register("empty", sys)
    assert "empty" not in registry.names()


class Half(backends.Backend):
    def probe(self):
        return {}


def test_a_module_must_define_one_whole_backend(registry, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    for module, text, words in [
            ("pk_none_backend", "X = 1\n", "defines no subclasses"),
            ("pk_two_backend", "from patchkit.runtime.backend import Backend\nclass A(Backend):\n    pass\n"
                               "class B(Backend):\n    pass\n", "defines 2 (A, B) subclasses"),
            ("pk_half_backend", "from patchkit.runtime.backend import Backend\nclass Half(Backend):\n"
                                "    def probe(self):\n        return {}\n", "Half does not define plan")]:
        (tmp_path / f"{module}.py").write_text(text)
        registry.register(module, module)
        with pytest.raises(TypeError, match=words.replace("(", r"\(").replace(")", r"\)")):
            registry.get(module)
        assert backends.validate({"backend": module})[0].startswith(f"backend {module!r} cannot be used")
    with pytest.raises(TypeError, match="does not define plan"):
        registry.register("half", Half)
    with pytest.raises(KeyError):
        registry.get("nobody")


def test_a_registered_name_comes_before_the_found_one(registry):
    class Quiet(type(finder.get("torch"))):
        pass

    registry.register("torch", Quiet())
    assert isinstance(registry.get("torch"), Quiet) and registry.names() == ON_DISK
