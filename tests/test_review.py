"""The review workflow: patches that `git apply` and `patch -p1` take, git checkouts, --commit,
--interactive, scriptable output and shell completion.

Every git repository here is a temporary one made from a copy of a fixture;
the git identity comes from environment variables set for the test only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchkit.state import gitrepo
from patchkit.cli.commands import main

from conftest import FIXTURES, snapshot

DP = "verl/workers/actor/dp_actor.py"
MEGATRON = "verl/workers/actor/megatron_actor.py"
BRANCH = "patchkit/verl-fsdp-update"


@pytest.fixture(autouse=True)
def git_env(monkeypatch, tmp_path_factory):
    """A git identity and no user or system configuration, for this test's processes only."""
    for key, value in {"GIT_AUTHOR_NAME": "patchkit tests", "GIT_AUTHOR_EMAIL": "tests@patchkit.invalid",
                       "GIT_COMMITTER_NAME": "patchkit tests", "GIT_COMMITTER_EMAIL": "tests@patchkit.invalid",
                       "GIT_CONFIG_NOSYSTEM": "1",
                       "GIT_CONFIG_GLOBAL": str(tmp_path_factory.mktemp("gitconfig") / "none")}.items():
        monkeypatch.setenv(key, value)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_repo(top: Path, fixture: str = "verl-0.6", under: str = "") -> Path:
    """A committed git checkout at ``top`` holding a copy of ``fixture`` (in ``top/under``); returns the root."""
    root = top / under if under else top
    shutil.copytree(FIXTURES / fixture, root)
    git(top, "init", "-q")
    git(top, "symbolic-ref", "HEAD", "refs/heads/main")
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "the checkout")
    return root


def run(*args, ok=True, input=None):
    result = CliRunner().invoke(main, [str(a) for a in args], input=input)
    if ok:
        assert result.exit_code == 0, result.output
    return result


def clean(top: Path) -> bool:
    return git(top, "status", "--porcelain", "--untracked-files=all") == ""


# ---------------------------------------------------------------- the patch is a real patch

@pytest.mark.parametrize("layout", ["plain folder", "plain folder, CRLF", "git checkout", "git checkout, root below the top"])
def test_git_apply_and_patch_p1_give_the_bytes_patchkit_apply_writes(tmp_path, layout):
    """`patchkit diff` output, applied by `git apply` and by `patch -p1` in the folder it names, equals `patchkit apply`."""
    top = tmp_path / "checkout"
    if layout.startswith("plain folder"):
        root = top
        shutil.copytree(FIXTURES / "verl-0.6", root)
        assert gitrepo.work_tree(root) is None, "the temporary folder must not be inside a git work tree"
        if "CRLF" in layout:
            (root / DP).write_bytes((root / DP).read_bytes().replace(b"\n", b"\r\n"))
        prefix = ""
    else:
        under = "python" if "below" in layout else ""
        root = make_repo(top, under=under)
        prefix = f"{under}/" if under else ""
    original = (root / DP).read_bytes()
    patch = tmp_path / "review.patch"
    out = run("diff", "verl-fsdp-update", "granularity=micro", "--root", root, "--output", patch)
    text = patch.read_text(encoding="utf-8")
    assert text.startswith(f"--- a/{prefix}{DP}\n+++ b/{prefix}{DP}\n")
    assert f"run in {top}" in out.stderr
    assert ("tracked in the git work tree" in out.stderr) == layout.startswith("git")
    assert (root / DP).read_bytes() == original

    results = {}
    for tool in (["git", "apply", str(patch)], ["patch", "-p1", "--quiet", "-i", str(patch)]):
        if shutil.which(tool[0]) is None:
            pytest.skip(f"{tool[0]} is not installed")
        subprocess.run(tool, cwd=top, check=True, capture_output=True)
        results[tool[0]] = (root / DP).read_bytes()
        (root / DP).write_bytes(original)
        for leftover in root.rglob("*.orig"):
            leftover.unlink()
    run("apply", "verl-fsdp-update", "granularity=micro", "--root", root)
    applied = (root / DP).read_bytes()
    assert applied != original
    assert results == {"git": applied, "patch": applied}


def test_diff_stat_names_files_as_the_patch_does(tmp_path):
    root = make_repo(tmp_path / "checkout", under="src")
    out = run("diff", "verl-fsdp-update", "--root", root, "--stat").stdout
    assert out.splitlines()[0].split("|")[0].strip() == f"src/{DP}"
    assert "1 file changed, 12 insertions(+), 0 deletions(-)" in out


def test_an_ignored_virtualenv_inside_a_checkout_is_a_plain_folder(tmp_path):
    """site-packages in an ignored .venv of a project: paths from the root, no dirty check."""
    top = tmp_path / "project"
    top.mkdir()
    (top / ".gitignore").write_text(".venv/\n")
    git(top, "init", "-q")
    git(top, "symbolic-ref", "HEAD", "refs/heads/main")
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "project")
    root = top / ".venv" / "site-packages"
    shutil.copytree(FIXTURES / "verl-0.6", root)
    out = run("diff", "verl-fsdp-update", "--root", root)
    assert out.stdout.startswith(f"--- a/{DP}\n")
    assert "not tracked there" in out.stderr
    run("apply", "verl-fsdp-update", "--root", root)
    run("revert", "--all")
    assert clean(top)
    assert gitrepo.history(root) is None  # the project's branch is not the version of what is in its .venv
    assert gitrepo.history(top).branch == "main"


# ---------------------------------------------------------------- git checkouts

def test_apply_and_revert_in_a_clean_checkout_leave_it_clean(tmp_path):
    top = tmp_path / "verl"
    root = make_repo(top)
    head = git(top, "rev-parse", "HEAD")
    assert clean(top)
    out = run("apply", "verl-fsdp-update", "--root", root, "schedule.active=2")
    assert f"tracked in the git work tree {top} (on main)" in out.stderr
    assert git(top, "status", "--porcelain") == f" M {DP}\n"
    again = run("apply", "verl-fsdp-update", "--root", root, "schedule.active=3")  # patchkit's own lines are not "dirty"
    assert "updated:" in again.stderr
    run("revert", "verl-fsdp-update")
    assert clean(top)
    assert git(top, "rev-parse", "HEAD") == head
    assert git(top, "symbolic-ref", "--short", "HEAD").strip() == "main"


@pytest.mark.parametrize("how", ["modified", "staged"])
def test_a_target_with_uncommitted_changes_is_refused_unless_allow_dirty(tmp_path, patchkit_home, how):
    top = tmp_path / "verl"
    root = make_repo(top)
    target = root / DP
    target.write_bytes(target.read_bytes() + b"# a local experiment\n")
    if how == "staged":
        git(top, "add", DP)
    status_before = git(top, "status", "--porcelain")
    before = snapshot(top / "verl")

    refused = run("apply", "verl-fsdp-update", "--root", root, ok=False)
    assert refused.exit_code == 1
    assert DP in refused.stderr and "uncommitted changes" in refused.stderr and "--allow-dirty" in refused.stderr
    assert snapshot(top / "verl") == before
    assert not (patchkit_home / "ledger.json").exists() or json.loads(run("status", "--json").stdout)["files"] == []

    run("apply", "verl-fsdp-update", "--root", root, "--allow-dirty")
    assert b"patchkit:verl-fsdp-update" in target.read_bytes()
    run("revert", "--all")
    assert snapshot(top / "verl") == before
    assert git(top, "status", "--porcelain") == status_before


def test_commit_makes_a_branch_commit_and_revert_removes_it(tmp_path):
    top = tmp_path / "verl"
    root = make_repo(top)
    head = git(top, "rev-parse", "HEAD").strip()
    original = (root / DP).read_bytes()

    out = run("apply", "verl-fsdp-update", "--root", root, "--commit", "granularity=micro", "schedule.active=2")
    assert f"on the new branch {BRANCH} (was on main)" in out.stderr
    assert git(top, "symbolic-ref", "--short", "HEAD").strip() == BRANCH
    assert clean(top)
    assert git(top, "rev-parse", "HEAD^").strip() == head
    assert git(top, "diff", "--name-only", "HEAD^", "HEAD").split() == [DP]
    message = git(top, "log", "-1", "--format=%B")
    assert message.startswith("patchkit: apply verl-fsdp-update\n")
    for line in ("recipe: verl-fsdp-update", "backend: npu", "options: granularity=micro",
                 "command line: granularity=micro schedule.active=2", "  analysis: true", "  active: 2", f"  {DP}"):
        assert line in message.splitlines()
    patched = (root / DP).read_bytes()
    assert git(top, "show", f"HEAD:{DP}").encode() == patched

    record = json.loads(run("status", "--json").stdout)["files"][0]["recipes"]["verl-fsdp-update"]["git"]
    assert record["branch"] == BRANCH and record["previous"] == "main" and record["previous_commit"] == head
    assert record["commit"] == git(top, "rev-parse", "HEAD").strip()

    out = run("revert", "verl-fsdp-update")
    assert f"removed commit {record['commit'][:10]} and branch {BRANCH}; back on main" in out.stderr
    assert git(top, "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert git(top, "rev-parse", "HEAD").strip() == head
    assert git(top, "branch", "--list", BRANCH) == ""
    assert clean(top)
    assert (root / DP).read_bytes() == original


def test_revert_after_switching_branches_keeps_you_there_and_deletes_patchkits_branch(tmp_path):
    top = tmp_path / "verl"
    root = make_repo(top)
    original = (root / DP).read_bytes()
    run("apply", "verl-fsdp-update", "--root", root, "--commit")
    git(top, "checkout", "-q", "-b", "feature", "main")
    assert (root / DP).read_bytes() == original
    out = run("revert", "--all")
    assert f"removed branch {BRANCH}" in out.stderr and "stays on feature" in out.stderr
    assert git(top, "symbolic-ref", "--short", "HEAD").strip() == "feature"
    assert git(top, "branch", "--list", BRANCH) == ""
    assert clean(top)


def test_commit_twice_stacks_on_the_branch_and_revert_goes_back_to_the_start(tmp_path):
    top = tmp_path / "verl"
    root = make_repo(top)
    head = git(top, "rev-parse", "HEAD").strip()
    run("apply", "verl-fsdp-update", "--root", root, "--commit")
    out = run("apply", "verl-fsdp-update", "--root", root, "--commit", "schedule.active=4")
    assert f"on {BRANCH}" in out.stderr
    assert git(top, "rev-parse", "HEAD~2").strip() == head
    assert clean(top)
    run("revert", "verl-fsdp-update")
    assert git(top, "rev-parse", "HEAD").strip() == head
    assert git(top, "branch", "--list", "patchkit/*") == ""
    assert clean(top)


def test_commit_is_refused_for_a_dirty_file_an_existing_branch_or_a_plain_folder(tmp_path, tree):
    top = tmp_path / "verl"
    root = make_repo(top)
    target = root / DP
    target.write_bytes(target.read_bytes() + b"# mine\n")
    refused = run("apply", "verl-fsdp-update", "--root", root, "--commit", "--allow-dirty", ok=False)
    assert refused.exit_code == 1 and DP in refused.stderr and "--commit" in refused.stderr
    git(top, "checkout", "-q", "--", DP)

    git(top, "branch", BRANCH)
    before = snapshot(top / "verl")
    refused = run("apply", "verl-fsdp-update", "--root", root, "--commit", ok=False)
    assert refused.exit_code == 1 and f"branch {BRANCH} already exists" in refused.stderr
    assert snapshot(top / "verl") == before and clean(top)

    plain = tree("verl-0.6")
    before = snapshot(plain)
    refused = run("apply", "verl-fsdp-update", "--root", plain, "--commit", ok=False)
    assert refused.exit_code == 1 and "not tracked in a git work tree" in refused.stderr
    assert snapshot(plain) == before


def test_a_failing_commit_puts_the_files_and_the_branch_back(tmp_path, monkeypatch):
    top = tmp_path / "verl"
    root = make_repo(top)
    before = snapshot(top / "verl")
    git(top, "config", "user.useConfigOnly", "true")  # and no identity at all: git refuses to commit
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(key, raising=False)
    failed = run("apply", "verl-fsdp-update", "--root", root, "--commit", ok=False)
    assert failed.exit_code == 1 and "git" in failed.stderr
    assert snapshot(top / "verl") == before
    assert git(top, "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert git(top, "branch", "--list", BRANCH) == ""
    assert clean(top)
    assert json.loads(run("status", "--json").stdout)["files"] == []


# ---------------------------------------------------------------- apply --interactive

TWO_FILES = """\
id: two-files
description: the FSDP and the Megatron actor at once, to review two files
target:
  package: verl
  distribution: verl
  versions: ">=0.4,<0.8"
  files: [verl/workers/actor/dp_actor.py]
backend: torch
points:
  - {class: DataParallelPPOActor, method: update_policy, at: method_start, action: start}
  - {class: DataParallelPPOActor, method: update_policy, at: after_call, call: self._optimizer_step}
  - {class: MegatronPPOActor, method: update_policy, at: method_start, action: start,
     files: [verl/workers/actor/megatron_actor.py]}
"""


@pytest.mark.parametrize("answers, written", [("y\n", True), ("n\n", False), ("q\n", False), ("Y\n", True)])
def test_interactive_single_file(tree, answers, written):
    root = tree("verl-0.6")
    before = snapshot(root)
    result = run("apply", "verl-fsdp-update", "--root", root, "--interactive", input=answers, ok=written)
    assert f"--- a/{DP}" in result.stdout and "write verl/workers/actor/dp_actor.py?" in result.output
    if written:
        assert b"patchkit:verl-fsdp-update" in (root / DP).read_bytes()
    else:
        assert result.exit_code == 1 and "nothing written" in result.stderr
        assert snapshot(root) == before
        assert json.loads(run("status", "--json").stdout)["files"] == []


@pytest.mark.parametrize("answers, written, shown", [
    ("y\ny\n", True, 2), ("n\ny\n", False, 2), ("y\nn\n", False, 2), ("q\n", False, 1), ("y\nq\n", False, 2)])
def test_interactive_is_all_or_nothing_across_files(tree, tmp_path, answers, written, shown):
    root = tree("verl-0.6")
    recipe = tmp_path / "two-files.yaml"
    recipe.write_text(TWO_FILES)
    before = snapshot(root)
    result = run("apply", recipe, "--root", root, "-i", input=answers, ok=written)
    assert result.stdout.count("--- a/") == shown
    if written:
        assert all(b"patchkit:two-files" in (root / rel).read_bytes() for rel in (DP, MEGATRON))
    else:
        assert result.exit_code == 1 and "nothing written" in result.stderr
        assert snapshot(root) == before


def test_interactive_comes_after_the_git_checks(tmp_path):
    root = make_repo(tmp_path / "verl")
    (root / DP).write_bytes((root / DP).read_bytes() + b"# mine\n")
    refused = run("apply", "verl-fsdp-update", "--root", root, "-i", input="y\n", ok=False)
    assert refused.exit_code == 1 and "uncommitted changes" in refused.stderr and "write " not in refused.output


# ---------------------------------------------------------------- scriptable output

def test_status_json_parses_and_names_every_applied_recipe(tree, tmp_path):
    root = tree("verl-0.6")
    other = make_repo(tmp_path / "checkout")
    run("apply", "verl-fsdp-update", "--root", root)
    run("apply", "verl-fsdp-logprob", "role=ref", "--root", root)
    run("apply", "verl-megatron-update", "--root", root)
    run("apply", "verl-fsdp-update", "--root", other, "--commit")
    data = json.loads(run("status", "--json").stdout)
    assert set(data) == {"home", "files"}
    named = {(f["root"], rid) for f in data["files"] for rid in f["recipes"]}
    assert named == {(str(root), "verl-fsdp-update"), (str(root), "verl-fsdp-logprob"),
                     (str(root), "verl-megatron-update"), (str(other), "verl-fsdp-update")}
    for f in data["files"]:
        assert set(f) == {"path", "relpath", "root", "state", "backup", "distribution", "version", "recipes"}
        assert f["state"] == "applied"
        for rid, applied in f["recipes"].items():
            assert set(applied) == {"choices", "overrides", "backend", "git"}
            assert (applied["git"] is not None) == (f["root"] == str(other))
    assert data["files"][0]["recipes"]


def test_list_json_fields():
    data = json.loads(run("list", "--json").stdout)
    assert data and all({"id", "description", "package", "distribution", "versions", "files", "backend", "options"} <= set(r)
                        for r in data)


# ---------------------------------------------------------------- shell completion

def complete(words: str, shell: str = "bash") -> str:
    env = {"_PATCHKIT_COMPLETE": f"{shell}_complete", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1))}
    if shell == "zsh":
        env = {"_PATCHKIT_COMPLETE": "zsh_complete", "COMP_WORDS": words, "COMP_CWORD": env["COMP_CWORD"]}
    result = CliRunner().invoke(main, [], env=env, prog_name="patchkit")
    assert result.exit_code == 0, result.output
    return result.output


def test_completion_offers_recipe_ids():
    offered = complete("patchkit apply verl-fsdp").split()
    assert "plain,verl-fsdp-update" in offered and "plain,verl-fsdp-logprob" in offered
    assert not any("sglang" in line for line in offered)
    for command in ("diff", "show", "test"):
        assert "plain,sglang-forward" in complete(f"patchkit {command} sgl").split()
    assert "--commit" in complete("patchkit apply --co")
    script = CliRunner().invoke(main, [], env={"_PATCHKIT_COMPLETE": "bash_source"}, prog_name="patchkit").output
    assert "_PATCHKIT_COMPLETE=bash_complete" in script


def test_revert_completes_the_applied_recipes(tree):
    root = tree("verl-0.6")
    assert complete("patchkit revert ").split() == []
    run("apply", "verl-megatron-update", "--root", root)
    assert complete("patchkit revert ").split() == ["plain,verl-megatron-update"]


# ---------------------------------------------------------------- git stays out of the way

def test_commands_outside_git_never_import_git(tree):
    root = tree("verl-0.6")
    code = ("import sys; from click.testing import CliRunner; from patchkit.cli.commands import main; "
            f"r = CliRunner().invoke(main, ['diff', 'verl-fsdp-update', '--root', {str(root)!r}]); "
            f"r2 = CliRunner().invoke(main, ['apply', 'verl-fsdp-update', '--root', {str(root)!r}]); "
            "r3 = CliRunner().invoke(main, ['status']); "
            "assert (r.exit_code, r2.exit_code, r3.exit_code) == (0, 0, 0), (r.output, r2.output); "
            "print(sorted(m for m in sys.modules if m == 'git' or m.startswith('git.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_history_reads_the_nearest_tag_its_distance_and_the_branch(tmp_path, tree):
    top = tmp_path / "verl"
    root = make_repo(top)
    assert gitrepo.history(root) == gitrepo.History(top, None, 1, "main", ())
    git(top, "tag", "v2.3.0")
    git(top, "commit", "-q", "--allow-empty", "-m", "after the release")
    assert gitrepo.history(root / "verl") == gitrepo.History(top, "v2.3.0", 1, "main", ())
    assert gitrepo.history(tree("verl-0.4")) is None
    assert gitrepo.work_tree(root / DP) == top


@pytest.mark.parametrize("killed", ["before its commit", "before recording its commit"])
def test_revert_after_an_apply_commit_that_was_killed_half_way(tmp_path, patchkit_home, killed):
    """apply --commit records the branch before git runs; a kill leaves the commit unrecorded, and revert still cleans up."""
    top = tmp_path / "verl"
    root = make_repo(top)
    head = git(top, "rev-parse", "HEAD").strip()
    run("apply", "verl-fsdp-update", "--root", root, "--commit")
    if killed == "before its commit":  # the state right after `git checkout -b`: the branch at the start, files patched
        git(top, "reset", "-q", "--mixed", "HEAD^")
        assert git(top, "status", "--porcelain") == f" M {DP}\n"
    ledger = patchkit_home / "ledger.json"
    data = json.loads(ledger.read_text())
    for rec in data["files"].values():
        rec["recipes"]["verl-fsdp-update"]["git"]["commit"] = None
    ledger.write_text(json.dumps(data))
    assert git(top, "symbolic-ref", "--short", "HEAD").strip() == BRANCH

    out = run("revert", "--all")
    assert f"branch {BRANCH}" in out.stderr and "back on main" in out.stderr
    assert git(top, "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert git(top, "rev-parse", "HEAD").strip() == head
    assert git(top, "branch", "--list", BRANCH) == ""
    assert clean(top)


def test_revert_keeps_a_branch_you_committed_on(tmp_path):
    top = tmp_path / "verl"
    root = make_repo(top)
    run("apply", "verl-fsdp-update", "--root", root, "--commit")
    (root / "NOTES.md").write_text("my findings\n")
    git(top, "add", "NOTES.md")
    git(top, "commit", "-q", "-m", "notes from the profiling run")
    out = run("revert", "--all")
    assert f"kept branch {BRANCH}" in out.stderr
    assert git(top, "log", "-1", "--format=%s", BRANCH).strip() == "notes from the profiling run"


def test_apply_keeps_the_compiled_copies_git_tracks_and_drops_the_others(tmp_path):
    """A checkout that commits its .pyc files keeps them; an untracked stale one is still dropped."""
    top = tmp_path / "verl"
    shutil.copytree(FIXTURES / "verl-0.6", top)
    cache = top / "verl/workers/actor/__pycache__"
    cache.mkdir()
    committed = cache / "dp_actor.cpython-311.pyc"
    committed.write_bytes(b"committed on purpose")
    git(top, "init", "-q")
    git(top, "add", "-A")
    git(top, "add", "-f", str(committed.relative_to(top)))
    git(top, "commit", "-q", "-m", "the checkout, .pyc included")
    stale = cache / "dp_actor.cpython-312.pyc"
    stale.write_bytes(b"stale")
    run("apply", "verl-fsdp-update", "--root", top)
    assert committed.read_bytes() == b"committed on purpose" and not stale.exists()
    assert git(top, "status", "--porcelain") == f" M {DP}\n"
    run("revert", "--all")
    assert committed.read_bytes() == b"committed on purpose"
    assert stale.read_bytes() == b"stale"  # put back, as it was before apply (patchkit.state.compiled)
    assert git(top, "status", "--porcelain", "--untracked-files=all") == \
        "?? verl/workers/actor/__pycache__/dp_actor.cpython-312.pyc\n"  # the checkout as before apply


def test_revert_without_a_record_in_a_checkout_puts_the_content_back_and_names_the_branch_left(tmp_path):
    """apply --commit under another PATCHKIT_HOME: its branch is not known here, so only the file content goes back."""
    root = make_repo(tmp_path / "checkout")
    committed = (root / DP).read_bytes()
    env = {"PATCHKIT_HOME": str(tmp_path / "other-home")}
    applied = CliRunner().invoke(main, ["apply", "verl-fsdp-update", "--root", str(root), "--commit"], env=env)
    assert applied.exit_code == 0, applied.output
    result = run("revert", "verl-fsdp-update", "--root", root)
    assert "reverted without a backup" in result.stderr
    assert f"git: in the git work tree {root}: only the file's content is put back; a branch {BRANCH}" in result.stderr
    assert (root / DP).read_bytes() == committed
    assert gitrepo.branch_tip(root, BRANCH) is not None  # left for the user: this ledger never made it


# ---------------------------------------------------------------- patchkit.state.review, called directly

def test_check_git_notes_each_file_and_refuses_the_users_own_changes(tmp_path):
    from patchkit.state import planning
    from patchkit.state import review
    from patchkit.core.errors import TargetError
    from patchkit.state.ledger import Ledger
    from patchkit.recipe.load import load

    top = tmp_path / "verl"
    root = make_repo(top)
    settings = load("verl-fsdp-update")
    with Ledger().locked() as led:
        p = planning.plan(settings, str(root))
        assert review.check_git(settings, p, led, allow_dirty=False, commit=False) == {
            p.files[0].path: f"tracked in the git work tree {top} (on main)"}
        (root / DP).write_text((root / DP).read_text() + "# mine\n")
        p = planning.plan(settings, str(root))
        with pytest.raises(TargetError, match=r"uncommitted changes in verl/workers/actor/dp_actor.py \(git status 'M'\)"):
            review.check_git(settings, p, led, allow_dirty=False, commit=False)
        assert review.check_git(settings, p, led, allow_dirty=True, commit=False)  # noted, not refused
        with pytest.raises(TargetError) as exc:
            review.check_git(settings, p, led, allow_dirty=True, commit=True)
        assert exc.value.hint == "--commit commits only patchkit's lines: commit or stash your changes first"
    assert git(top, "status", "--porcelain").split() == ["M", DP]  # checks only: nothing written, nothing committed
