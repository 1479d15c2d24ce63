"""patchkit.authoring.backendpick: `patchkit new` without --backend picks the backend whose profiler library the
target's environment has, without importing it, and says which and why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from patchkit.authoring.backendpick import Picked, pick, places, target_folder
from patchkit.authoring.funcref import resolve
from patchkit.runtime import finder
from patchkit.runtime.backend import Backend, Plan

REPO = Path(__file__).resolve().parent.parent
TRAP = "raise SystemExit('imported: a library is looked for, never imported')\n"


def environment(folder: Path, *libraries: str) -> Path:
    """A folder that plays a site-packages: the package tj (tj/loop.py, Loop.step) and each library, as a trap."""
    (folder / "tj").mkdir(parents=True)
    (folder / "tj" / "__init__.py").write_text("")
    (folder / "tj" / "loop.py").write_text("class Loop:\n    def step(self, i):\n        return i + 1\n")
    for lib in libraries:
        (folder / lib).mkdir()
        (folder / lib / "__init__.py").write_text(TRAP)
    return folder


@pytest.mark.parametrize("libraries,backend,why", [
    (("torch_npu", "torch"), "npu", "torch_npu is installed there ({site})"),
    (("torch",), "torch", "torch is installed there ({site}); torch_npu is not"),
    ((), "npu", "no profiler library patchkit knows (torch_npu, torch) is installed where {site} is: npu is "
                "patchkit's default"),
])
def test_the_backend_is_the_one_whose_library_the_target_s_environment_has(tmp_path, libraries, backend, why):
    site = environment(tmp_path / "site", *libraries)
    ref = resolve("tj.loop:Loop.step", str(site))
    assert target_folder(ref) == site.resolve()
    assert pick(ref) == Picked(backend, why.format(site=site.resolve()))
    assert not imported_from(site)


def imported_from(folder: Path):
    """The libraries of ``folder`` imported in this process (a trap's import would have ended it, too)."""
    return [n for n in ("torch", "torch_npu", "jaxish")
            if str(getattr(sys.modules.get(n), "__file__", "") or "").startswith(str(folder))]


class Jaxish(Backend):
    LIBRARY = "jaxish"

    def probe(self):
        return {"version": "1"}

    def plan(self, settings, features, key):
        return Plan(sections={"advance": "pass\n"})


def test_else_the_first_backend_whose_library_is_there(tmp_path, monkeypatch):
    monkeypatch.setitem(finder._REGISTRY, "jaxish", Jaxish())
    site = environment(tmp_path / "site", "jaxish")
    assert pick(resolve("tj.loop:Loop.step", str(site))) == Picked(
        "jaxish", f"jaxish is installed there ({site.resolve()}); torch_npu is not; torch is not")
    assert not imported_from(site)


def test_a_target_in_this_environment_is_looked_for_on_its_whole_path(tmp_path, monkeypatch):
    site = environment(tmp_path / "site")
    other = environment(tmp_path / "other", "torch")
    ref = resolve("tj.loop:Loop.step", str(site))
    assert places(site) == [str(site)]  # another environment's site-packages: alone
    monkeypatch.setattr(sys, "path", [str(site), str(other)])
    assert places(site) == [str(site), str(site), str(other)]
    assert pick(ref) == Picked("torch", f"torch is installed there ({other}); torch_npu is not")
    assert not imported_from(other)


def new(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "patchkit", "new", "mine", *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)


def test_new_says_the_backend_it_picked_and_why_and_writes_it(tmp_path):
    site = environment(tmp_path / "site", "torch")
    done = new(tmp_path, "--root", str(site), "--point", "tj.loop:Loop.step at: method_start")
    assert done.returncode == 0, done.stderr
    assert (f"backend: torch, since torch is installed there ({site.resolve()}); torch_npu is not; --backend B "
            "chooses another\n") in done.stderr and done.stdout == ""
    assert yaml.safe_load((tmp_path / "mine.yaml").read_text())["backend"] == "torch"


@pytest.mark.parametrize("given", [["--backend", "nsys"], ["--from", "mindspeed-rl-update"]])
def test_a_backend_given_or_taken_from_a_recipe_is_not_picked_nor_said(tmp_path, given):
    site = environment(tmp_path / "site", "torch")
    done = new(tmp_path, "--root", str(site), "--point", "tj.loop:Loop.step at: method_start", *given)
    assert done.returncode == 0 and "backend:" not in done.stderr, done.stderr
    backend = yaml.safe_load((tmp_path / "mine.yaml").read_text())["backend"]
    assert backend == ("nsys" if given[0] == "--backend" else "npu")
