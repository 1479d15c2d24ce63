"""editfree: the plan becomes cache entries and an environment; a node without the cache rebuilds an entry once."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.hook import editfree
from patchkit.recipe import load as recipe
from patchkit.hook import runcache
from patchkit.demo import SAMPLE
from patchkit.core.errors import TargetError

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _prepare(site, overrides=("backend=torch",)):
    settings = recipe.load("verl-fsdp-update", list(overrides))
    return editfree.prepare(settings, recipe.read_text(recipe.recipe_path("verl-fsdp-update")), str(site))


def test_module_names_follow_the_files():
    assert editfree.module_name("verl/workers/actor/dp_actor.py") == "verl.workers.actor.dp_actor"
    assert editfree.module_name("pkg/__init__.py") == "pkg"


def test_prepare_writes_one_cache_entry_per_patched_module_and_the_environment_leads_to_the_hook(tmp_path, home):
    site = tmp_path / "site"
    shutil.copytree(SAMPLE, site)
    spec = _prepare(site)
    (name,) = spec["modules"]
    entry = spec["modules"][name]
    cached = home / runcache.CACHE / runcache.cache_name(entry["sha256"], spec["key"])
    assert "_patchkit_runtime.step(" in cached.read_text() and spec["version"] == "0.6.1"
    env = editfree.environment(spec, {"PYTHONPATH": "/a"})
    assert env["PYTHONPATH"].split(os.pathsep) == [editfree.HOOK_DIR, "/a"]
    assert json.loads(env["PATCHKIT_RUN"])["modules"] == spec["modules"]
    assert _prepare(site)["key"] == spec["key"] and _prepare(site, ["backend=npu"])["key"] != spec["key"]


def test_nothing_is_planned_where_the_recipe_does_not_fit(tmp_path, home):
    with pytest.raises(TargetError):
        _prepare(tmp_path)  # no verl here
    assert not (home / runcache.CACHE).exists()


def test_a_process_without_the_cache_has_it_rebuilt_once_without_loading_the_engine_itself(tmp_path, home):
    site = tmp_path / "site"
    shutil.copytree(SAMPLE, site)
    spec = _prepare(site)
    shutil.rmtree(home / runcache.CACHE)  # as on another node of the cluster
    env = editfree.environment(spec, dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)])))
    check = ("import sys, verl.workers.actor.dp_actor as m; "
             "print(hasattr(m, '_patchkit_runtime'), 'libcst' in sys.modules)")
    first = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env)
    assert first.stdout.split() == ["True", "False"], first.stderr  # the engine, once, in a process of its own
    assert (home / runcache.CACHE / runcache.cache_name(spec["modules"][next(iter(spec["modules"]))]["sha256"],
                                                        spec["key"])).is_file()
    second = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env)
    assert second.stdout.split() == ["True", "False"], second.stderr


def _child_env(spec, site):
    return editfree.environment(spec, dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)])))


CHECK = "import sys, verl.workers.actor.dp_actor as m; print(hasattr(m, '_patchkit_runtime'), 'libcst' in sys.modules)"


def _planned(tmp_path, home):
    """A copy of the sample planned for `patchkit run`: (site, spec, its one module's entry, that entry's cache file)."""
    site = tmp_path / "site"
    shutil.copytree(SAMPLE, site)
    spec = _prepare(site)
    (entry,) = spec["modules"].values()
    return site, spec, entry, home / runcache.CACHE / runcache.cache_name(entry["sha256"], spec["key"])


def test_the_plan_records_the_sha256_of_each_patched_text_as_it_is_cached(tmp_path, home):
    _site, spec, entry, cached = _planned(tmp_path, home)
    assert entry["patched_sha256"] == hashlib.sha256(cached.read_bytes()).hexdigest()
    assert json.loads(editfree.environment(spec, {})["PATCHKIT_RUN"])["modules"] == spec["modules"]


def test_a_planted_cache_entry_is_never_executed(tmp_path, home):
    site, spec, _entry, cached = _planned(tmp_path, home)
    marker = tmp_path / "executed"
    cached.write_text(f"import os  # patchkit\nopen({str(marker)!r}, 'w').close()  # patchkit\n"
                      + cached.read_text())
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=_child_env(spec, site))
    assert done.stdout.split() == ["False", "False"], done.stderr  # the original, unpatched, and no engine run
    assert not marker.exists()
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("[patchkit]")]  # not the job's own warnings
    assert line.startswith("[patchkit] run: ") and "cached patched text" in line and "not the one" in line


def test_a_rebuilt_text_that_is_not_the_planned_one_is_neither_executed_nor_cached(tmp_path, home):
    site, spec, entry, _cached = _planned(tmp_path, home)
    shutil.rmtree(home / runcache.CACHE)  # another node, whose engine makes another text than the planner's
    entry["patched_sha256"] = hashlib.sha256(b"what the planning process made").hexdigest()
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=_child_env(spec, site))
    assert done.stdout.split() == ["False", "False"], done.stderr  # rebuilt (the engine ran elsewhere), refused
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("[patchkit]")]  # not the job's own warnings
    assert "rebuilt patched text" in line and "not the one `patchkit run` planned" in line
    assert not list((home / runcache.CACHE).glob("*.py"))  # nothing stored for later processes to trust
