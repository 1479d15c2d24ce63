"""gitrepo: the git checkout holding a target file, and apply --commit's commit made and taken out again.

Each test makes its own small repository; git's identity and configuration
come from environment variables set for the test only.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.state import gitrepo
from patchkit.core.errors import TargetError


@pytest.fixture(autouse=True)
def git_env(monkeypatch, tmp_path_factory):
    for key, value in {"GIT_AUTHOR_NAME": "patchkit tests", "GIT_AUTHOR_EMAIL": "tests@patchkit.invalid",
                       "GIT_COMMITTER_NAME": "patchkit tests", "GIT_COMMITTER_EMAIL": "tests@patchkit.invalid",
                       "GIT_CONFIG_NOSYSTEM": "1",
                       "GIT_CONFIG_GLOBAL": str(tmp_path_factory.mktemp("gitconfig") / "none")}.items():
        monkeypatch.setenv(key, value)


def git(top: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=top, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> Path:
    """A checkout on ``main`` with a committed ``pkg/a.py``, an ignored ``venv/`` and an untracked ``pkg/b.py``."""
    top = tmp_path / "repo"
    (top / "pkg").mkdir(parents=True)
    (top / "pkg" / "a.py").write_text("x = 1\n")
    (top / ".gitignore").write_text("venv/\n")
    git(top, "init", "-q")
    git(top, "symbolic-ref", "HEAD", "refs/heads/main")
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "start")
    (top / "pkg" / "b.py").write_text("y = 2\n")
    (top / "venv" / "lib").mkdir(parents=True)
    (top / "venv" / "lib" / "c.py").write_text("z = 3\n")
    return top


def test_work_tree_walks_up_to_the_dot_git_and_needs_no_git(repo, tmp_path):
    assert gitrepo.work_tree(repo / "pkg" / "a.py") == repo
    assert gitrepo.work_tree(repo / "pkg") == repo
    assert gitrepo.work_tree(repo / "pkg" / "not-there.py") == repo
    assert gitrepo.work_tree(tmp_path / "elsewhere.py") is None
    code = f"import sys, patchkit.state.gitrepo as g; g.work_tree({str(repo / 'pkg')!r}); print('git' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def test_checkout_of_tells_tracked_files_from_untracked_and_ignored_ones(repo, tmp_path):
    assert gitrepo.checkout_of(repo / "pkg" / "a.py") == (repo, True)
    assert gitrepo.checkout_of(repo / "pkg" / "b.py") == (repo, False)
    assert gitrepo.checkout_of(repo / "venv" / "lib" / "c.py") == (repo, False)
    assert gitrepo.tracked(repo, [repo / "pkg" / "a.py", repo / "pkg" / "b.py"]) == {repo / "pkg" / "a.py"}
    fake = tmp_path / "fake"
    (fake / ".git").mkdir(parents=True)  # a .git that is no repository
    (fake / "m.py").write_text("")
    assert gitrepo.checkout_of(fake / "m.py") == (None, False)


def test_uncommitted_and_committed_read_the_file_against_head(repo):
    a = repo / "pkg" / "a.py"
    assert gitrepo.uncommitted(a) == ""
    a.write_text("x = 2\n")
    assert gitrepo.uncommitted(a) == " M"
    git(repo, "add", "pkg/a.py")
    assert gitrepo.uncommitted(a, repo) == "M "
    assert gitrepo.committed(a) == b"x = 1\n"
    assert gitrepo.committed(repo / "pkg" / "b.py") is None


def test_head_and_branch_tip(repo):
    branch, commit = gitrepo.head(repo)
    assert branch == "main" and commit == git(repo, "rev-parse", "HEAD")
    assert gitrepo.branch_tip(repo, "main") == commit and gitrepo.branch_tip(repo, "nope") is None
    git(repo, "checkout", "-q", "--detach")
    assert gitrepo.head(repo) == (None, commit)


def test_a_commit_on_a_new_branch_and_taking_it_out_leaves_the_checkout_as_it_was(repo):
    start = gitrepo.head(repo)
    a = repo / "pkg" / "a.py"
    a.write_text("x = 1\nprofile()  # patchkit:r\n")
    (repo / "pkg" / "b.py").write_text("changed, not committed\n")
    info = gitrepo.commit_on_branch(repo, "patchkit/r", ["pkg/a.py"], "patchkit: apply r\n")
    assert info["made"] and (info["previous"], info["previous_commit"]) == start and info["files"] == ["pkg/a.py"]
    assert gitrepo.head(repo) == ("patchkit/r", info["commit"])
    assert git(repo, "log", "-1", "--format=%s") == "patchkit: apply r"
    assert git(repo, "show", "--name-only", "--format=", "HEAD") == "pkg/a.py"  # only the patched file

    a.write_text("x = 1\n")  # revert puts the bytes back first; git writes no file
    said = gitrepo.drop_commit(info)
    assert said == f"removed commit {info['commit'][:10]} and branch patchkit/r; back on main"
    assert gitrepo.head(repo) == start and gitrepo.branch_tip(repo, "patchkit/r") is None
    assert gitrepo.uncommitted(a) == "" and (repo / "pkg" / "b.py").read_text() == "changed, not committed\n"


def test_undo_of_a_commit_on_patchkits_own_branch_moves_the_branch_back(repo):
    a = repo / "pkg" / "a.py"
    a.write_text("one\n")
    first = gitrepo.commit_on_branch(repo, "patchkit/r", ["pkg/a.py"], "patchkit: apply r\n")
    a.write_text("two\n")
    second = gitrepo.commit_on_branch(repo, "patchkit/r", ["pkg/a.py"], "patchkit: apply r\n")
    assert not second["made"] and second["previous_commit"] == first["commit"]
    a.write_text("one\n")
    gitrepo.undo_commit(second)
    assert gitrepo.head(repo) == ("patchkit/r", first["commit"]) and gitrepo.uncommitted(a) == ""


def test_a_branch_with_commits_after_patchkits_is_kept(repo):
    (repo / "pkg" / "a.py").write_text("patched\n")
    info = gitrepo.commit_on_branch(repo, "patchkit/r", ["pkg/a.py"], "patchkit: apply r\n")
    (repo / "pkg" / "a.py").write_text("mine\n")
    git(repo, "commit", "-q", "-am", "my own work")
    said = gitrepo.drop_commit(info)
    assert said.startswith("kept branch patchkit/r: it has commits after patchkit's")
    assert f"git rebase --onto {info['commit'][:10]}^" in said
    assert gitrepo.branch_tip(repo, "patchkit/r") is not None


def test_checked_out_elsewhere_only_the_branch_goes(repo):
    (repo / "pkg" / "a.py").write_text("patched\n")
    info = gitrepo.commit_on_branch(repo, "patchkit/r", ["pkg/a.py"], "patchkit: apply r\n")
    git(repo, "checkout", "-q", "main")
    assert gitrepo.drop_commit(info) == (f"removed branch patchkit/r (commit {info['commit'][:10]}); "
                                         "the work tree stays on main")
    assert gitrepo.drop_commit(info) == "branch patchkit/r is already gone"


def test_no_commit_to_branch_from_is_refused(tmp_path):
    top = tmp_path / "empty"
    top.mkdir()
    git(top, "init", "-q")
    (top / "a.py").write_text("")
    with pytest.raises(TargetError) as exc:
        gitrepo.commit_on_branch(top, "patchkit/r", ["a.py"], "m")
    assert "has no commit yet" in exc.value.message and exc.value.hint


def test_a_failing_git_command_quotes_git(repo):
    with pytest.raises(TargetError) as exc:
        gitrepo.commit_on_branch(repo, "patchkit/r", ["pkg/not-there.py"], "m")
    assert "`git commit" in exc.value.message and "failed in" in exc.value.message
    assert gitrepo.head(repo)[0] == "main" and gitrepo.branch_tip(repo, "patchkit/r") is None  # branch taken back
