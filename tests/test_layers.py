"""What the layers' contracts in pyproject.toml cannot say, and those contracts run.

The layers are folders, declared for import-linter in ``pyproject.toml``
(``[tool.importlinter]``) from ``patchkit.cli`` down to ``patchkit.core``,
with what may never be imported inside the training process or by the
trace readers; :func:`test_the_import_contracts_hold` runs ``lint-imports``.
This file keeps the rest: no import cycle (inside a layer too), only the
command line prints, modules stay small, every module has its test module,
and each layer's ``__init__`` names its modules (a folder of modules found by
walking it, :data:`PLUGINS`, says so once instead).

``patchkit/__init__.py`` names the public API; its names load their module on
first use, so ``from . import NAME``, and ``patchkit.NAME`` in a module that
imports ``patchkit``, count as importing that module, as does a string
``"patchkit.MODULE:ATTRIBUTE"`` (a command the command line loads when it is
asked for).  Imports by computed name (``importlib.import_module(variable)``)
are not seen.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import Dict, List, Set

import pytest

import patchkit

PACKAGE = Path(patchkit.__file__).resolve().parent

# Folders whose modules are found by walking the folder (pkgutil), each module one extension of one kind: the
# folder's __init__ says so once rather than naming each, and each is tested by the test that runs every module
# found there.  Adding such a module touches nothing else.
PLUGINS = {"patchkit.recipe.kinds": "test_point_kinds",  # a kind of point each (docs/contributing.md)
           "patchkit.runtime.backends": "test_backends"}  # a backend each: tests/test_backends.py runs every one found


# A module named with one of its attributes, as the command line's table of commands names each one it loads later.
LAZY = re.compile(r"patchkit(\.\w+)+:\w+")


def plugin_folder(name: str) -> str:
    """The plugin folder whose module ``name`` is (not its ``__init__`` or an ``_underscored`` module), or ""."""
    folder, _, leaf = name.rpartition(".")
    return folder if folder in PLUGINS and not leaf.startswith("_") else ""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> Dict[str, Path]:
    """patchkit's modules (not the demo's bundled training sample)."""
    sample = PACKAGE / "demo" / "sample"
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if sample not in p.parents}


def imports(name: str, path: Path, known: Dict[str, Path]) -> Set[str]:
    """Every patchkit module the module ``name`` imports, at the top or inside a function."""
    is_package = path.name == "__init__.py"
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = []
            for alias in node.names:
                if f"{base}.{alias.name}" in known:  # a submodule
                    targets.append(f"{base}.{alias.name}")
                elif base == "patchkit" and alias.name in patchkit._EXPORTS:  # loads its module on first use
                    targets.append(f"patchkit.{patchkit._EXPORTS[alias.name]}")
                else:
                    targets.append(base)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "patchkit" \
                and node.attr in patchkit._EXPORTS:  # `import patchkit` ... `patchkit.apply_recipe(...)`
            targets = [f"patchkit.{patchkit._EXPORTS[node.attr]}"]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and LAZY.fullmatch(node.value):
            targets = [node.value.partition(":")[0]]  # "patchkit.cli.patch:status", imported when asked for
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import patchkit.runtime as r` imports patchkit.runtime
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


@functools.lru_cache(maxsize=None)
def graph() -> Dict[str, Set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(edges: Dict[str, Set[str]]) -> List[Set[str]]:
    """The groups of modules that import each other, directly or around a loop (Tarjan's components)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    out: List[Set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while not group or node not in group:
                group.add(stack.pop())
            if len(group) > 1:
                out.append(group)

    for start in sorted(edges):
        if start not in index:
            visit(start)
    return out


def test_no_import_cycle_lazy_imports_included():
    found = cycles(graph())
    assert not found, "modules that import each other: " + "; ".join(" <-> ".join(sorted(g)) for g in found)


def test_the_walk_sees_lazy_imports_and_names_of_the_package(tmp_path):
    """The walker is this file's instrument: it must see an import inside a function, resolve a name
    ``patchkit/__init__`` loads on use, and find a cycle through them."""
    edges = graph()
    assert "patchkit.engine.codemod" in edges["patchkit.state.planning"]  # imported inside a function only
    assert "patchkit.cluster.gather" in edges["patchkit.cli.traces"]  # the same
    assert "patchkit.cli.analysis" in edges["patchkit.cli.commands"]  # named "module:attribute", loaded when asked
    assert edges["patchkit"] == set()  # the package imports nothing until a name is used
    probe = tmp_path / "probe.py"
    probe.write_text("from . import DISTRIBUTION\n\ndef later():\n    from . import plan, _api\n\n"
                     "def called():\n    import patchkit\n    return patchkit.apply_recipe, patchkit.__version__\n\n"
                     "TABLE = {'status': ('patchkit.cli.patch:status', 'what is applied'), 'x': 'patchkit: no'}\n")
    assert imports("patchkit.probe", probe, modules()) == {"patchkit", "patchkit.state.planning", "patchkit._api",
                                                           "patchkit.cli.patch"}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []
    kinds = "patchkit.recipe.kinds"  # found by walking: the package imports its kinds by computed name only
    assert not any(m.startswith(kinds + ".") for m in edges[kinds]) and f"{kinds}.after_call" in edges


def test_the_import_contracts_hold():
    """``lint-imports`` with the contracts of pyproject.toml, on this checkout's package."""
    import os
    import subprocess
    import sys

    repo = PACKAGE.parent
    assert (repo / "pyproject.toml").is_file(), "run from a checkout"
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], cwd=repo, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(repo)))
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert "Contracts: 3 kept, 0 broken." in done.stdout


def test_each_layer_s_init_names_its_modules():
    """A newcomer opens a layer's ``__init__`` and finds every module of the folder named there."""
    for name, path in modules().items():
        if path.name != "__init__.py" or name in ("patchkit", "patchkit.demo", "patchkit.hook._run"):
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        inside = sorted(p.stem if p.name != "__init__.py" else p.parent.name for p in path.parent.iterdir()
                        if (p.suffix == ".py" and p.name != "__init__.py")
                        or (p.is_dir() and (p / "__init__.py").is_file()))
        missing = [m for m in inside if f".{m}`" not in doc and f"``{m}" not in doc and f"{m}/" not in doc
                   and not plugin_folder(f"{name}.{m}")]
        assert not missing, f"{name}'s docstring does not name {missing}"


def test_only_the_command_line_prints():
    """No module but cli*.py writes to the terminal.  The runtime and the demo's training script run inside the
    training process; the demo runner writes through the ``echo`` the demo command hands it."""
    allowed = {"patchkit.runtime", "patchkit.demo.train", "patchkit.demo.runner"}
    for name, path in modules().items():
        if name.startswith("patchkit.cli") or name in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                assert called not in ("print", "echo", "secho", "prompt", "confirm"), f"{path.name}:{node.lineno} prints"


# The layers above the API, which call it through its public names (patchkit.NAME); every other module imports the
# module that defines what it uses, so the face is never a way round the layers.
ABOVE_THE_API = ("patchkit.cli", "patchkit.demo", "patchkit.cluster", "patchkit.api")


def test_only_the_layers_above_the_api_use_its_public_names():
    faced = []
    for name, path in modules().items():
        if name.startswith(ABOVE_THE_API) or name == "patchkit":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "patchkit" and not node.level:
                faced += [f"{name}: {a.name}" for a in node.names if a.name in patchkit._EXPORTS]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "patchkit" \
                    and node.attr in patchkit._EXPORTS:
                faced.append(f"{name}: patchkit.{node.attr}")
    assert not faced, f"modules below the API that reach it through patchkit's names: {faced}"


# Modules still over the size, each with its ceiling; every other module stays within about 300 lines.
ABOUT = 320
LARGER: dict = {}  # module -> a ceiling above ABOUT, for a module that cannot be split yet (none today)


def test_modules_stay_small():
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules().items()}
    big = {name: n for name, n in sizes.items() if n > LARGER.get(name, ABOUT)}
    assert not big, f"split these modules (lines): {big}"


# Modules whose tests live in a module named for what they are tested through, with the reason.
TESTED_IN = {
    "patchkit": "test_api",  # the public API it names
    "patchkit.api": "test_api",  # the deprecated second list of those names
    "patchkit.__main__": "test_cli_commands",  # `python -m patchkit` is the command line
    "patchkit.engine.points.positions": "test_points",
    "patchkit.demo.runner": "test_demo",  # `patchkit demo` runs both for real
    "patchkit.demo.train": "test_demo",
    "patchkit.cluster.gather": "test_collect",  # collect --ray and traces --ray on a real two-node cluster
    "patchkit.hook._run": "test_importhook",  # the folder `patchkit run` puts on PYTHONPATH
    "patchkit.hook._run.sitecustomize": "test_importhook",  # run at start-up by every process of the command
    "patchkit.cluster.capture": "test_cli_capture",  # capture --ray on a real two-node cluster
}


def _defines(path: Path) -> bool:
    return any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in ast.parse(path.read_text()).body)


def test_every_module_has_its_test_module():
    tests = Path(__file__).resolve().parent
    missing = []
    for name in modules():
        parts = name.split(".")[1:] or ["patchkit"]
        if parts[-1] == "__init__":
            parts = parts[:-1] or ["patchkit"]
        candidates = {f"test_{'_'.join(parts)}", f"test_{'_'.join(parts[-2:])}", f"test_{parts[-1]}",
                      TESTED_IN.get(name, ""), PLUGINS.get(plugin_folder(name), "")}
        if modules()[name].name == "__init__.py" and not _defines(modules()[name]):
            candidates.add("test_layers")  # a layer's surface: test_each_layer_s_init_names_its_modules
        if not any((tests / f"{c}.py").is_file() for c in candidates if c):
            missing.append(name)
    assert not missing, f"modules without a test module (tests/test_<name>.py): {missing}"


@pytest.fixture(scope="module")
def home_of_a_module_fixture():
    import os

    return os.environ.get("PATCHKIT_HOME", "")


def test_the_suite_never_uses_the_machine_s_own_patchkit_home(home_of_a_module_fixture):
    """Module fixtures (a two-rank run, a Ray cluster) apply recipes before any test's own home is set."""
    assert "pytest" in home_of_a_module_fixture and "session-home" in home_of_a_module_fixture


# What an assertion of the suite may not order: a clock read, or a number measured in a run (a trace's step time).
CLOCKS = {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "process_time"}
MEASURED = re.compile(r"(_us|_ms|_ns|_seconds)(_per_step)?$|duration|elapsed")


def _measured(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in CLOCKS:
            return True
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and MEASURED.search(n.value):
            return True
        if isinstance(n, ast.Name) and MEASURED.search(n.id):
            return True
    return False


def timed_assertions(source: str) -> List[int]:
    """The lines of ``source`` whose ``assert`` orders (<, >, <=, >=) a clock read or a measured duration."""
    order = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
    return [a.lineno for a in ast.walk(ast.parse(source)) if isinstance(a, ast.Assert)
            for c in ast.walk(a.test) if isinstance(c, ast.Compare) and any(isinstance(o, order) for o in c.ops)
            and _measured(c)]


def test_no_assertion_of_the_suite_depends_on_how_fast_the_machine_is():
    """A loaded machine makes any run slow and any of two runs the quicker: the suite asserts what was computed
    (which number came from where, their difference), never that a measured time is under a bound or above
    another.  A wait is driven by a clock the test moves, or guarded by a subprocess timeout, not asserted."""
    tests = Path(__file__).resolve().parent
    found = {f"{path.relative_to(tests)}:{line}" for path in sorted(tests.rglob("*.py"))
             for line in timed_assertions(path.read_text(encoding="utf-8"))}
    assert not found, f"assertions on measured time: {sorted(found)}"
    assert timed_assertions("assert time.monotonic() - t0 < 5\nassert r['b_mean_step_us'] > r['a_mean_step_us']\n"
                            "assert elapsed <= 3\nassert r['delta_us'] == 2.0\nassert n > 3\n") == [1, 2, 3]


IN_JOB = "patchkit.runtime"  # everything that runs inside a job: the lines' runtime, and what attach runs there
IN_JOB_MAY_IMPORT = ("patchkit.runtime", "patchkit.core")
PROFILERS = {"torch", "torch_npu"}  # a backend's own library, imported when its capture starts


def external_imports(path: Path) -> Set[str]:
    """The top-level names of the modules outside patchkit that ``path`` imports, at the top or in a function."""
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found - {"patchkit", "__future__"}


def test_code_that_runs_in_a_job_imports_only_the_standard_library_the_runtime_and_core():
    """An allow-list, not a list of what is forbidden: a module added anywhere else is outside it by itself.  Every
    module under patchkit.runtime, and every patchkit module those reach (lazy imports included), is in
    patchkit.runtime or patchkit.core; what they import from outside patchkit is the standard library, or a
    profiler's own library (only in the modules that start one)."""
    import sys

    edges, known = graph(), modules()
    todo = [m for m in known if m == IN_JOB or m.startswith(IN_JOB + ".")]
    reached = set(todo)
    while todo:
        for target in edges[todo.pop()]:
            if target == "patchkit":  # the package itself, imported as every module's parent: its names load lazily
                continue
            if target not in reached:
                reached.add(target)
                todo.append(target)
    outside = sorted(m for m in reached if not any(m == a or m.startswith(a + ".") for a in IN_JOB_MAY_IMPORT))
    assert not outside, f"code run in a job reaches {outside}"
    foreign = {m: sorted(external_imports(known[m]) - set(sys.stdlib_module_names) - PROFILERS) for m in reached}
    assert not {m: names for m, names in foreign.items() if names}, "code run in a job imports outside the stdlib"
