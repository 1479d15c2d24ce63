"""patchkit.runtime.backends.register(): a registered backend is usable everywhere a backend name is.

The backend here is a module written by the test into a folder of its own:
its code only notes, in ``LOG``, what the runtime runs.  Registered, it is a
recipe's ``backend:``, a ``backend=`` override and a ``--backend`` choice,
``patchkit show`` prints its code, and a patched module drives it on CPU.
"""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest
from click.testing import CliRunner

from patchkit.runtime import backends
from patchkit.cli.commands import main
from patchkit.core.errors import OverrideError, RecipeError
from patchkit.recipe.load import load_recipe

ECHO = textwrap.dedent('''\
    """A backend for the tests: its profiler code notes each section it runs in LOG."""
    from patchkit.runtime.backends import SECTIONS, Plan

    LOG = []
    STATIC_FEATURES = {"version": None}


    def probe():
        return {"version": "echo 1"}


    def check(s):
        return ["profiler.level level2 is more than echo can note"] if s["level"] == "level2" else []


    def plan(s, features, key):
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
    """The backends registry as it is now; what a test registers is gone after it."""
    from patchkit.runtime.backends import registry as table

    saved = dict(table._REGISTRY)
    yield backends
    table._REGISTRY.clear()
    table._REGISTRY.update(saved)


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


def test_the_built_in_backends_are_registered_without_importing_them():
    import subprocess

    code = ("import sys, patchkit.runtime.backends as b; print(' '.join(b.names())); "
            "print(sorted(m for m in sys.modules if m.startswith('patchkit.runtime.backends.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["npu torch nsys memory", "['patchkit.runtime.backends.program', 'patchkit.runtime.backends.registry', "
                                                  "'patchkit.runtime.backends.schedule']"]  # the package's own parts, no backend


def test_the_backend_choices_of_the_command_line_import_no_backend():
    import subprocess

    code = ("import sys; sys.argv = ['patchkit', 'diff', '--help']; import patchkit.cli.commands as c\n"
            "try:\n    c.main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.rpartition('.')[2] in ('npu', 'torch', 'nsys', 'memory') or m in ('libcst', 'git')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "--backend [npu|torch|nsys|memory]" in out and out.splitlines()[-1] == "[]"


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
    assert "--backend [npu|torch|nsys|memory|echo]" in run("show", "--help").output
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
    assert info.value.message == "backend must be one of npu, torch, nsys, memory; got 'echo'" and info.value.where.line == 4
    assert run("show", str(path), "--backend", "echo", ok=False).exit_code == 2
    assert backends.validate({"backend": "echo"}) == ["backend 'echo' is not one of npu, torch, nsys, memory"]


def test_a_registered_module_that_cannot_be_used_is_a_recipe_error_at_its_line(tmp_path, registry):
    registry.register("ghost", "patchkit_no_such_backend_module")
    path = tmp_path / "echo-fit.yaml"
    path.write_text(recipe_text("ghost"))
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert "backend 'ghost' cannot be used: No module named 'patchkit_no_such_backend_module'" in info.value.message
    assert info.value.where.line == 4 and "pick another: npu, torch, nsys, memory, ghost" in info.value.hint
    assert backends.validate({"backend": "ghost"})[0].startswith("backend 'ghost' cannot be used")


def test_register_refuses_a_bad_name_or_a_module_that_is_no_backend(registry):
    with pytest.raises(ValueError, match="backend name 'My Profiler'"):
        registry.register("My Profiler", "x")
    with pytest.raises(TypeError, match="has no STATIC_FEATURES, probe, plan"):
        registry.register("empty", sys)
    assert "empty" not in registry.names()


def test_a_backend_names_the_settings_its_profiler_has_no_equivalent_of_only_when_they_were_changed():
    from patchkit.runtime.backends.registry import DEFAULTS, no_equivalent

    assert no_equivalent("torch.profiler", dict(DEFAULTS), ("level", "mstx")) == []
    changed = dict(DEFAULTS, level="level2", mstx=True)
    assert no_equivalent("torch.profiler", changed, ("level", "mstx")) == [
        "torch.profiler has no equivalent of profiler.level='level2', profiler.mstx=True; not used"]
