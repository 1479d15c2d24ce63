"""A recipe planned on a job's own files, read as a stranger's: copied privately, links, FIFOs, other owners and
everyone-writable files refused, errors naming the job's files, never the copy."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

import attach_helpers as helpers
from patchkit.attach import jobfiles, payload
from patchkit.attach.process import AttachError


def settings(tmp: Path):
    return payload.settings(str(helpers.recipe(tmp, "logged")), [], None, 2)


def test_the_plan_is_made_on_a_copy_and_names_the_job_s_files(tmp_path):
    site = helpers.site(tmp_path)
    before = set(Path(tempfile.gettempdir()).glob("patchkit-plan-*"))
    spec = jobfiles.request(settings(tmp_path), 2, str(site), os.geteuid())
    assert set(Path(tempfile.gettempdir()).glob("patchkit-plan-*")) == before  # the private copy is gone
    (module,) = spec["modules"]
    assert module["file"] == str(site / "pkjob" / "train.py")
    assert module["name"] == "pkjob.train"
    assert spec["version"] == "1.0"  # read from the copied dist-info
    assert "patchkit-plan-" not in repr(spec)


def test_an_error_names_the_job_s_folder_not_the_private_copy(tmp_path):
    site = helpers.site(tmp_path)
    (site / "pkjob" / "train.py").write_text("class Other:\n    pass\n")
    with pytest.raises(Exception) as caught:
        jobfiles.request(settings(tmp_path), 2, str(site), os.geteuid())
    text = caught.value.render()
    assert "patchkit-plan-" not in text
    assert str(site) in text


@pytest.mark.parametrize("hostile", ["link-out", "fifo", "world-writable", "other-owner", "too-big", "folder-link"])
def test_a_target_file_that_is_not_a_plain_file_of_the_job_s_is_refused_naming_it(tmp_path, hostile):
    site = helpers.site(tmp_path)
    target = site / "pkjob" / "train.py"
    secret = tmp_path / "secret.py"
    secret.write_text(helpers.TRAIN)
    if hostile == "link-out":
        target.unlink()
        target.symlink_to(secret)
    elif hostile == "fifo":
        target.unlink()
        os.mkfifo(target)
    elif hostile == "world-writable":
        target.chmod(0o666)
    elif hostile == "other-owner":
        os.chown(target, 4321, 4321)
    elif hostile == "too-big":
        target.write_text(helpers.TRAIN + "#" * (jobfiles.LIMIT + 1))
    elif hostile == "folder-link":  # the package's folder itself leads out
        elsewhere = tmp_path / "elsewhere"
        (site / "pkjob").rename(elsewhere)
        (site / "pkjob").symlink_to(elsewhere)
    with pytest.raises(AttachError) as caught:
        jobfiles.request(settings(tmp_path), 2, str(site), os.geteuid() + 1 if hostile == "other-owner" else
                         os.geteuid())
    assert str(target) in caught.value.render()
    assert caught.value.hint.startswith("pass --root")


def test_missing_version_files_and_metadata_of_other_distributions_are_not_copied(tmp_path):
    site = helpers.site(tmp_path)
    (site / "other-2.0.dist-info").mkdir()
    (site / "other-2.0.dist-info" / "METADATA").write_text("Name: other\nVersion: 2.0\n")
    into = tmp_path / "into"
    into.mkdir()
    copied = jobfiles.copy(settings(tmp_path), str(site), os.geteuid(), str(into))
    assert sorted(copied) == ["pkjob-1.0.dist-info/METADATA", "pkjob/__init__.py", "pkjob/train.py"]
    assert not (into / "other-2.0.dist-info").exists()


def test_not_found_names_the_process_its_path_and_what_to_do():
    error = jobfiles.not_found(4242, "pkjob", [f"/p{i}" for i in range(9)])
    assert "process 4242" in error.message and "/p0" in error.message and "and 3 more" in error.message
    assert error.hint.startswith("pass --root DIR")
