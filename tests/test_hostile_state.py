"""Another user's link or folder on the way to the state folder never steers a command run as root.

A second, unprivileged user (the ``stranger`` fixture: made with useradd, so
these tests need root and skip with the reason otherwise) plants what a tester
on a shared node planted: a link in place of ``$PATCHKIT_HOME`` leading to a folder
of root's, a world-writable folder above it, a state folder of their own with
links in place of ``requests``, ``run-cache``, ``processes`` or ``answers``.
Every command refuses with the path and the fix, exit 1, no traceback, and
nothing lands in root's folder or the package.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from click.testing import CliRunner

from patchkit.cli.commands import main

from conftest import snapshot

RECIPE = "verl-fsdp-update"


def cli(*args):
    return CliRunner().invoke(main, list(args))


def commands(root):
    """Each command that reads or writes the state folder, as a user would type it."""
    return [["apply", RECIPE, "--root", str(root)], ["revert", "--all"], ["status"], ["status", "--json"],
            ["capture", RECIPE, "--timeout", "1"], ["run", RECIPE, "--root", str(root), "--print-env"],
            ["run", RECIPE, "--root", str(root), "--", "true"], ["traces"]]


@pytest.fixture
def roots_folder(tmp_path):
    """A folder of root's that a stranger would like root to write into."""
    folder = tmp_path / "roots-own"
    folder.mkdir(mode=0o700)
    return folder


def refused_everywhere(root, roots_folder, shown: str, why: str):
    before = snapshot(root)
    for command in commands(root):
        result = cli(*command)
        assert result.exit_code == 1, (command, result.output)
        assert "Traceback" not in result.output, (command, result.output)
        assert f"error: {shown}: refusing to use the state folder" in result.stderr, (command, result.stderr)
        assert why in result.stderr, (command, result.stderr)
        assert "hint: " in result.stderr
    assert list(roots_folder.iterdir()) == [], "a command wrote into root's folder through the stranger's link"
    assert snapshot(root) == before


def test_a_state_folder_that_is_another_user_s_link_is_refused_by_every_command(stranger, tree, roots_folder,
                                                                               monkeypatch):
    home = stranger.sticky / "pk"  # like /tmp: anyone may add a name, nobody may rename another's
    stranger.run("ln", "-s", str(roots_folder), str(home))
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    refused_everywhere(tree("verl-0.6"), roots_folder, str(home), f"is a symbolic link owned by uid {stranger.uid}")


def test_a_link_of_root_s_in_a_folder_others_can_write_is_refused(stranger, tree, roots_folder, monkeypatch):
    """Root's own link, but in a /tmp-like folder: the rule is the link's folder, not only its owner."""
    (stranger.sticky / "pk").symlink_to(roots_folder)
    monkeypatch.setenv("PATCHKIT_HOME", str(stranger.sticky / "pk"))
    refused_everywhere(tree("verl-0.6"), roots_folder, str(stranger.sticky / "pk"),
                       "others can write the folder holding it")


def test_a_state_folder_under_a_folder_anyone_can_rename_in_is_refused(stranger, tree, roots_folder, monkeypatch):
    """World-writable, not sticky: the stranger could swap root's own folder there for a link at any moment."""
    shared = stranger.sticky / "open"
    shared.mkdir()
    shared.chmod(0o777)
    home = shared / "pk"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    refused_everywhere(tree("verl-0.6"), roots_folder, str(shared),
                       "is writable by group or others and not sticky (mode 0777)")
    assert list(home.iterdir()) == []


@pytest.mark.parametrize("sub", ["requests", "run-cache", "processes", "answers"])
def test_a_state_folder_another_user_owns_steers_no_write_through_its_sub_folders(stranger, tree, roots_folder,
                                                                                  monkeypatch, sub):
    home = stranger.sticky / "pk"
    stranger.run("mkdir", "-m", "755", str(home))
    stranger.run("ln", "-s", str(roots_folder), str(home / sub))
    if sub != "processes":  # a live registration, so that `capture` writes a request
        stranger.run("mkdir", "-m", "755", str(home / "processes"))
        entry = {"pid": os.getpid(), "host": os.uname().nodename, "recipe": RECIPE, "key": RECIPE, "role": "",
                 "rank": 0, "time": time.time() - 5}
        stranger.run("sh", "-c", 'printf %s "$1" > "$2"', "sh", json.dumps(entry), str(home / "processes" / "x.json"))
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    refused_everywhere(tree("verl-0.6"), roots_folder, str(home), f"is owned by uid {stranger.uid}")


def test_a_link_inside_a_private_state_folder_is_refused_by_capture_and_run(tree, roots_folder, patchkit_home):
    """Nothing inside the state folder may be a link, whoever made it: `capture` and `run` check it too."""
    root = tree("verl-0.6")
    for sub in ("requests", "run-cache", "processes"):
        (patchkit_home / sub).symlink_to(roots_folder)
    (patchkit_home / "processes").unlink()
    (patchkit_home / "processes").mkdir(mode=0o700)
    entry = {"pid": os.getpid(), "host": os.uname().nodename, "recipe": RECIPE, "key": RECIPE, "role": "",
             "rank": 0, "time": time.time() - 5}
    (patchkit_home / "processes" / "x.json").write_text(json.dumps(entry))
    for command, sub in ((["capture", RECIPE, "--timeout", "1"], "requests"),
                         (["run", RECIPE, "--root", str(root), "--print-env"], "run-cache")):
        result = cli(*command)
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert f"{patchkit_home / sub}: refusing to use the state folder: it is a symbolic link" in result.stderr
    assert list(roots_folder.iterdir()) == []


def test_the_home_may_be_the_user_s_own_link_in_a_folder_only_they_can_write(tree, tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("PATCHKIT_HOME", str(tmp_path / "link"))
    root = tree("verl-0.6")
    assert cli("apply", RECIPE, "--root", str(root)).exit_code == 0
    assert (real / "ledger.json").is_file()
    assert cli("revert", "--all").exit_code == 0
