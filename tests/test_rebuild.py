"""hook/rebuild.py: a run-cache entry rebuilt in a process of its own, stored only when it is the planned text."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.demo import SAMPLE
from patchkit.hook import editfree, rebuild, runcache
from patchkit.recipe import load as recipe

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def planned(tmp_path, monkeypatch):
    """(the run spec, the module's name, its source bytes, the entry's path, the planned sha256) for the sample."""
    monkeypatch.setenv("PATCHKIT_HOME", str(tmp_path / "home"))
    site = tmp_path / "site"
    shutil.copytree(SAMPLE, site)
    settings = recipe.load("verl-fsdp-update", ["backend=torch"])
    spec = editfree.prepare(settings, recipe.read_text(recipe.recipe_path("verl-fsdp-update")), str(site))
    (name,) = spec["modules"]
    entry = spec["modules"][name]
    path = os.path.join(runcache.cache_dir(), runcache.cache_name(entry["sha256"], spec["key"]))
    os.unlink(path)  # as on a node that never had the cache
    return spec, name, Path(entry["path"]).read_bytes(), path, entry["patched_sha256"]


def test_the_planned_text_is_rebuilt_and_stored(planned):
    spec, name, source, path, sha = planned
    text = rebuild.build(spec, name, source, path, sha)
    assert runcache.text_sha256(text) == sha and Path(path).read_text() == text


def test_a_text_that_is_not_the_planned_one_is_returned_but_never_stored(planned):
    spec, name, source, path, _sha = planned
    text = rebuild.build(spec, name, source, path, "0" * 64)
    assert "_patchkit_runtime" in text and not os.path.exists(path)


def test_the_process_reads_its_request_on_stdin_and_says_a_failure_in_one_line(planned):
    spec, name, source, path, sha = planned
    env = dict(os.environ, PYTHONPATH=str(REPO))
    ask = {"spec": spec, "name": name, "source": base64.b64encode(source).decode(), "path": path, "expected": sha}
    done = subprocess.run([sys.executable, "-m", "patchkit.hook.rebuild"], input=json.dumps(ask).encode(),
                          capture_output=True, env=env, timeout=120)
    assert done.returncode == 0 and runcache.text_sha256(done.stdout.decode()) == sha
    bad = dict(ask, source=base64.b64encode(b"class Nothing:\n    pass\n").decode())
    failed = subprocess.run([sys.executable, "-m", "patchkit.hook.rebuild"], input=json.dumps(bad).encode(),
                            capture_output=True, env=env, timeout=120)
    assert failed.returncode == 1 and failed.stdout == b""
    assert failed.stderr.decode().count("\n") == 1 and "does not apply" in failed.stderr.decode()
