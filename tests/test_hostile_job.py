"""Inside a root job, a folder another user controls never takes a write: one line, and the job goes on.

The runtime writes the captures index, registrations and answers under
``$PATCHKIT_HOME`` and each capture's manifest under its save path; a
process of `patchkit run` on a node without the run cache stores the text it
rebuilt.  A second user (the ``stranger`` fixture: useradd, so root only;
skipped with the reason otherwise) plants links in those places leading to a folder of
root's.  Each feature is then left out with one ``[patchkit]`` line naming the
place and why, the job never sees an exception, and root's folder stays empty.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from patchkit.core import manifest
from patchkit.runtime import ondemand as runtime_ondemand
from patchkit.runtime.process import finished

from runtime_helpers import lines, settings


@pytest.fixture
def roots_folder(tmp_path):
    folder = tmp_path / "roots-own"
    folder.mkdir(mode=0o700)
    return folder


@pytest.fixture
def strangers_home(stranger, monkeypatch):
    """``$PATCHKIT_HOME`` a folder the stranger made in a /tmp-like folder (so they can plant links in it)."""
    home = stranger.sticky / "pk"
    stranger.run("mkdir", "-m", "755", str(home))
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    return home


@pytest.fixture
def parked(monkeypatch):
    runtime_ondemand._entries.clear()
    runtime_ondemand._taken.clear()
    runtime_ondemand.pending.clear()
    yield
    runtime_ondemand._entries.clear()


def test_a_manual_trigger_does_not_register_through_another_user_s_state_folder(
        stranger, strangers_home, roots_folder, clean_runtime, parked, capsys, tmp_path):
    stranger.run("ln", "-s", str(roots_folder), str(strangers_home / "processes"))
    clean_runtime.configure("k", **settings(tmp_path / "out", trigger="manual"))
    for _ in range(3):
        clean_runtime.step("k")  # never raises into the job
    said = lines(capsys)
    assert len(said) == 1, said
    assert str(strangers_home) in said[0] and f"is owned by uid {stranger.uid}" in said[0]
    assert "k" in finished and list(roots_folder.iterdir()) == []


def test_the_captures_index_is_not_written_into_another_user_s_state_folder(stranger, strangers_home,
                                                                            roots_folder, monkeypatch):
    from patchkit.core.private import NotPrivate

    stranger.run("ln", "-s", str(roots_folder / "captures"), str(strangers_home / "captures"))
    monkeypatch.setattr(manifest, "_noted", set())
    with pytest.raises(NotPrivate, match=f"owned by uid {stranger.uid}"):
        manifest.note_folder("/some/outputs")
    assert list(roots_folder.iterdir()) == []


def test_a_manifests_folder_that_is_another_user_s_link_takes_no_manifest(stranger, roots_folder, clean_runtime,
                                                                          capsys):
    torch = pytest.importorskip("torch")
    out = stranger.sticky / "outputs"  # a shared outputs folder anyone may write, sticky as /tmp is (a folder the
    out.mkdir()  # stranger made takes no trace at all: tests/test_hostile_save_path.py)
    out.chmod(0o1777)
    stranger.run("ln", "-s", str(roots_folder), str(out / manifest.FOLDER))
    clean_runtime.configure("m", **settings(out, wait=0, warmup=0, active=1))
    x = torch.randn(4, 4)
    for _ in range(3):
        x = x @ x
        clean_runtime.step("m")
    said = [ln for ln in lines(capsys) if "manifest" in ln]
    assert len(said) == 1 and "was not written" in said[0] and str(out) in said[0], said
    assert list(roots_folder.iterdir()) == []
    assert clean_runtime.report()[0]["error"] is None  # the capture itself is the job's: it went on


def test_a_manifest_is_not_written_under_a_save_path_another_user_can_swap(stranger):
    shared = stranger.sticky / "open"  # root's own folders, in a folder anyone can rename in
    shared.mkdir()
    shared.chmod(0o777)
    out = shared / "outputs"
    out.mkdir()
    with pytest.raises(Exception, match="writable by group or others and not sticky"):
        manifest.write(str(out / manifest.FOLDER), "cap", {"n": 1})
    assert not (out / manifest.FOLDER).exists()


def test_a_rebuilt_run_cache_entry_is_used_but_not_stored_in_another_user_s_state_folder(
        stranger, roots_folder, tmp_path):
    from patchkit.demo import SAMPLE
    from patchkit.hook import editfree
    from patchkit.recipe import load as recipe

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    site = tmp_path / "site"
    shutil.copytree(SAMPLE, site)
    settings_ = recipe.load("verl-fsdp-update", ["backend=torch"])
    spec = editfree.prepare(settings_, recipe.read_text(recipe.recipe_path("verl-fsdp-update")), str(site))
    home = stranger.sticky / "pk"  # the job's node: its state folder is the stranger's
    stranger.run("mkdir", "-m", "755", str(home))
    stranger.run("ln", "-s", str(roots_folder), str(home / "run-cache"))
    env = editfree.environment(spec, dict(os.environ, PATCHKIT_HOME=str(home),
                                          PYTHONPATH=os.pathsep.join([str(site), repo])))
    check = "import verl.workers.actor.dp_actor as m; print(hasattr(m, '_patchkit_runtime'))"
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env)
    assert done.stdout.split() == ["True"], done.stderr  # patched all the same: the text's sha256 is the planned one
    said = [ln for ln in done.stderr.splitlines() if ln.startswith("[patchkit]")]
    assert len(said) == 1 and "not stored" in said[0] and f"owned by uid {stranger.uid}" in said[0], said
    assert list(roots_folder.iterdir()) == []
