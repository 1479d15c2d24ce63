"""patchkit's modules import one way: no cycle, imports inside functions included; only the CLI prints.

The layers, each importing only from those above it::

    errors, versions                    the error hierarchy, version ranges
    model, marks, outcome, yamlpos,     data shapes, patchkit's own lines, named results,
      backends, points, codegen           YAML positions, profiler code, point finders
    gitrepo                             the git checkout holding a file (git imported on use)
    recipe_reader, overrides,           typed YAML access with positions; KEY=VALUE
      recipe_parts, recipe_points         a recipe's options, roles, examples and points
    recipe, catalogue, targets,         recipes from YAML; where the target files are and
      treeversion                         which version is installed
    engine, diff, ledger, unrecorded,   the pure transform; records and backups;
      state, environment                  what is applied where
    planning                            Settings -> Plan (reads, writes nothing)
    review                              the git checks and apply --commit's branch
    transaction, examples               apply and revert; a recipe's own examples
    api, node, cluster                  the importable API; the same on every Ray node
    cli_patch, cli_cluster,             what each command says (the only modules that print)
      cli_recipes
    cli                                 the commands and their options

``patchkit/__init__.py`` names the public API; its names load their module on
first use, so ``from . import NAME`` counts as importing that module.
Imports by computed name (``importlib.import_module(variable)``) are not seen.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Dict, List, Set

import pytest

import patchkit

PACKAGE = Path(patchkit.__file__).resolve().parent

# A cycle known to be there: points/__init__ fills its registry by importing its finders, which import
# the registry back from the package.  It may stay inside that package; no module outside may join it.
KNOWN_CYCLE_INSIDE = ("patchkit.points",)


def known(group: Set[str]) -> bool:
    return any(all(m == pkg or m.startswith(pkg + ".") for m in group) for pkg in KNOWN_CYCLE_INSIDE)


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


def reach(edges: Dict[str, Set[str]], start: str) -> Set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in edges.get(todo.pop(), set()) - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_no_import_cycle_lazy_imports_included():
    found = [group for group in cycles(graph()) if not known(group)]
    assert not found, "modules that import each other: " + "; ".join(" <-> ".join(sorted(g)) for g in found)


def test_the_walk_sees_lazy_imports_and_names_of_the_package(tmp_path):
    """The walker is this file's instrument: it must see an import inside a function, resolve a name
    ``patchkit/__init__`` loads on use, and find a cycle through them."""
    edges = graph()
    assert "patchkit.engine" in edges["patchkit.planning"]  # imported inside a function only
    assert "patchkit.cli_cluster" in edges["patchkit.cli"]  # the same
    assert edges["patchkit"] == set()  # the package imports nothing until a name is used
    probe = tmp_path / "probe.py"
    probe.write_text("from . import DISTRIBUTION\n\ndef later():\n    from . import plan, diff\n")
    assert imports("patchkit.probe", probe, modules()) == {"patchkit", "patchkit.planning", "patchkit.diff"}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert known({"patchkit.points", "patchkit.points.loops"})
    assert not known({"patchkit.points", "patchkit.engine"})  # a cycle leaving the package is not excused


def test_gitrepo_and_targets_no_longer_import_each_other():
    edges = graph()
    assert "patchkit.targets" not in reach(edges, "patchkit.gitrepo")
    assert "patchkit.gitrepo" in edges["patchkit.targets"]


@pytest.mark.parametrize("low,high", [
    ("patchkit.planning", "patchkit.transaction"), ("patchkit.review", "patchkit.transaction"),
    ("patchkit.transaction", "patchkit.api"), ("patchkit.state", "patchkit.api"), ("patchkit.node", "patchkit.cluster"),
    ("patchkit.cluster", "patchkit.cli_cluster"), ("patchkit.api", "patchkit.cli"), ("patchkit.outcome", "patchkit.ledger"),
    ("patchkit.cli_patch", "patchkit.cli"), ("patchkit.cli_cluster", "patchkit.cli"), ("patchkit.cli_recipes", "patchkit.cli"),
])
def test_lower_layers_do_not_reach_up(low, high):
    assert high not in reach(graph(), low), f"{low} imports {high}, directly or through another module"


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
    "patchkit.__main__": "test_cli",  # `python -m patchkit` is the command line
    "patchkit.points.method": "test_point_kinds",  # a kind's own VALID / INVALID examples, run for every kind
    "patchkit.points.calls": "test_point_kinds",
    "patchkit.points.loops": "test_point_kinds",
    "patchkit.points.ranges": "test_point_kinds",
    "patchkit.points.registry": "test_point_kinds",  # the declarations, checked for every kind
    "patchkit.backends.npu": "test_backends",  # the code each backend renders, and that it is the code that runs
    "patchkit.backends.torch": "test_backends",
    "patchkit.backends.nsys": "test_backends",
    "patchkit.backends.program": "test_backends",
    "patchkit.demo.runner": "test_demo",  # `patchkit demo` runs both for real
    "patchkit.demo.train": "test_demo",
    "patchkit.gather": "test_collect",  # collect --ray and traces --ray on a real two-node cluster
    "patchkit._run": "test_importhook",  # the folder `patchkit run` puts on PYTHONPATH
    "patchkit._run.sitecustomize": "test_importhook",  # run at start-up by every process of the command
    "patchkit.ondemand_cluster": "test_cli_capture",  # capture --ray on a real two-node cluster
}


def test_every_module_has_its_test_module():
    tests = Path(__file__).resolve().parent
    missing = []
    for name in modules():
        parts = name.split(".")[1:] or ["patchkit"]
        if parts[-1] == "__init__":
            parts = parts[:-1] or ["patchkit"]
        candidates = {f"test_{'_'.join(parts)}", f"test_{parts[-1]}", TESTED_IN.get(name, "")}
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
