"""places: with no folder named, `traces` and `collect` look at this project's captures first, and at the other
projects' that share the state folder's captures index only when asked (``--all``).

Root's state folder is shared by every project run as root on a node: before, `patchkit traces` run in a project of
one's own listed every folder of the index, newest first, another project's broken capture among them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from patchkit.core import manifest
from patchkit.traces import places
from patchkit.traces.captures import CaptureError, search

from capturing import patched

TRACE = {"schemaVersion": 1, "distributedInfo": {"rank": 0}, "traceEvents": []}


def _capture(folder: Path, name: str, mtime: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.pt.trace.json"
    path.write_text(json.dumps(TRACE))
    os.utime(path, (mtime, mtime))
    return path


def _index(home: Path, *folders: Path) -> None:
    (home / manifest.INDEX).write_text("".join(f"{f}\n" for f in folders))
    os.chmod(home / manifest.INDEX, 0o600)


@pytest.fixture
def project(tmp_path, patchkit_home, monkeypatch):
    """An applied recipe saving to ``<project>/out/applied``, a save path of a job run from ``<project>``, and
    another project's; the other's capture is the newest, this project's applied one the oldest."""
    me = tmp_path / "project"
    applied = _capture(me / "out" / "applied", "h_1.1", 1_700_000_000)
    here = _capture(me / "run" / "traces", "h_2.1", 1_700_000_100)
    other = _capture(tmp_path / "theirs" / "traces", "h_3.1", 1_700_000_200)
    patched(tmp_path / "env", f"profiler.save_path={me / 'out' / 'applied'}")  # this test's ledger
    _index(patchkit_home, other.parent, here.parent)
    monkeypatch.chdir(me)
    return applied, here, other


def test_this_project_s_captures_come_first_and_the_others_only_when_asked(project):
    applied, here, other = project
    assert [c.where for c in search()] == [str(applied), str(here)]  # before: other, here, applied (newest first)
    assert [c.where for c in search(every=True)] == [str(applied), str(here), str(other)]
    assert places.others() == 1
    assert [p.group for p in places.places()] == ["applied", "here", "other"]


def test_a_folder_named_by_the_ledger_and_the_index_is_searched_once(project, patchkit_home):
    applied, here, other = project
    _index(patchkit_home, other.parent, here.parent, applied.parent, Path(f"{here.parent}/"), here.parent)
    assert [c.where for c in search()] == [str(applied), str(here)]
    assert [p.folder for p in places.places()] == [str(applied.parent), str(here.parent), str(other.parent)]


def test_the_current_folder_is_searched_when_it_is_a_save_path(tmp_path, monkeypatch):
    cap = _capture(tmp_path / "save", "h_4.1", 1_700_000_000)
    (tmp_path / "save" / manifest.FOLDER).mkdir()
    monkeypatch.chdir(tmp_path / "save")
    assert [c.where for c in search()] == [str(cap)]


def test_before_the_first_window_the_applied_recipe_s_save_path_is_named_as_not_there_yet(tmp_path, monkeypatch):
    patched(tmp_path / "env", "profiler.save_path=outputs/traces")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CaptureError) as info:
        search()
    said = info.value.message
    assert said.startswith("no capture yet: the save path of the applied recipe does not exist yet: "
                           f"{tmp_path / 'outputs' / 'traces'} (recipe verl-fsdp-update)")  # before: "no folder to
    assert "first recording window" in info.value.hint  # look in: no applied recipe has a save path here"


def test_with_nothing_applied_the_other_projects_folders_are_counted_and_named_as_left_out(tmp_path, patchkit_home,
                                                                                        monkeypatch):
    other = _capture(tmp_path / "theirs", "h_5.1", 1_700_000_000)
    _index(patchkit_home, other.parent)
    (tmp_path / "mine").mkdir()
    monkeypatch.chdir(tmp_path / "mine")
    with pytest.raises(CaptureError) as info:
        search()
    assert info.value.message.startswith("no folder to look in: no recipe is applied, and no folder listed in ")
    assert "1 capture folder(s) of other projects" in info.value.message and "--all" in info.value.message
    assert [c.where for c in search(every=True)] == [str(other)]
