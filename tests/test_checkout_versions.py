"""The version of a source checkout on git histories laid out like the real verl and vLLM-Ascend repositories.

What the real repositories look like (read from their histories):

- verl tags some releases on main (v0.2, v0.5.0, v0.7.0) and the others on
  release branches (v0.3.0.post1 on v0.3.x, v0.4.0 and v0.4.1 on v0.4.x,
  v0.6.0 and v0.6.1 on release/v0.6.x).  ``verl/version/version`` on main says
  what main is heading for: 0.4.0.dev in June 2025 while ``git describe``
  says v0.2-668, 0.7.0.dev in October 2025 while it says v0.5.0-394, and
  0.8.0.dev in late January 2026 (v0.7.0-123).
- vLLM-Ascend computes its version with setuptools-scm (setup.py calls
  ``get_version(write_to="vllm_ascend/_version.py")``, which git ignores);
  the last tag on main is v0.19.1rc1 (April 2026), while v0.20.2rc1 to
  v0.25.1rc1 are tagged on ``releases/...`` branches that left main later.
  On main in August 2026 ``git describe`` says v0.19.1rc1-1637.

Each test builds a small repository with the same shape (the files are the
fixtures' verl and vLLM-Ascend trees) and drives the command line.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchkit.cli.commands import main
from patchkit.core.model import Target
from patchkit.state.targets import locate

from conftest import FIXTURES, RECIPES, snapshot

VERL_INIT = ('"""verl (test fixture)."""\nimport os\n\n'
             'with open(os.path.join(os.path.dirname(__file__), "version/version")) as f:\n'
             '    __version__ = f.read().strip()\n')


@pytest.fixture(autouse=True)
def git_env(monkeypatch, tmp_path_factory):
    for key, value in {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                       "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1",
                       "GIT_CONFIG_GLOBAL": str(tmp_path_factory.mktemp("gitconfig") / "none")}.items():
        monkeypatch.setenv(key, value)


class Repo:
    """A git repository built commit by commit."""

    def __init__(self, top: Path):
        self.top = top
        top.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        self.count = 0

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false",
                               "-c", "core.hooksPath=/dev/null", *args], cwd=self.top, capture_output=True, text=True)
        assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
        return done.stdout.strip()

    def commit(self, n: int = 1, version: str = "", files: dict = None) -> "Repo":
        """``n`` commits; the first writes ``files`` and, if given, verl's version file."""
        files = dict(files or {}, **({"verl/version/version": version + "\n"} if version else {}))
        for name, text in files.items():
            path = self.top / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        for _ in range(n):
            self.count += 1
            (self.top / "CHANGES").write_text(f"change {self.count}\n")
            self.git("add", "-A")
            self.git("commit", "-q", "-m", f"change {self.count}")
        return self

    def tag(self, name: str) -> "Repo":
        self.git("tag", name)
        return self

    def branch(self, name: str) -> "Repo":
        self.git("checkout", "-q", "-b", name)
        return self

    def checkout(self, ref: str) -> "Repo":
        self.git("checkout", "-q", ref)
        return self

    def describe(self) -> str:
        return self.git("describe", "--tags")


def run(*args, code=0):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result


def verl_repo(top: Path, fixture: str) -> Repo:
    """verl's main and release branches up to mid-2025: v0.2 on main, v0.3.0.post1 and v0.4.0 on release branches."""
    repo = Repo(top)
    shutil.copytree(FIXTURES / fixture / "verl", top / "verl")
    (top / "verl" / "__init__.py").write_text(VERL_INIT)
    repo.commit(3, version="0.2").tag("v0.2")
    repo.commit(20, version="0.2.0.dev")
    repo.branch("v0.3.x").commit(2, version="0.3.0.post1").tag("v0.3.0.post1").checkout("main")
    repo.commit(30, version="0.3.1.dev")
    repo.branch("v0.4.x").commit(2, version="0.4.0").tag("v0.4.0").checkout("main")
    return repo


# ---------------------------------------------------------------- verl main, April to July 2025

def test_verl_main_of_mid_2025_reads_its_version_file_not_the_tag_v0_2(tmp_path):
    repo = verl_repo(tmp_path / "verl", "verl-0.6")
    repo.commit(40, version="0.4.0.dev")
    assert repo.describe().startswith("v0.2-")  # what the tag alone says: 0.2, refused before
    result = run("diff", "verl-fsdp-update", "--root", repo.top)
    assert "--- a/verl/workers/actor/dp_actor.py" in result.stdout
    assert f"(verl 0.4.0.dev, from verl/version/version in {repo.top})" in result.stderr
    installed = locate(Target("verl", "verl", "", ("x",)), str(repo.top))
    assert (installed.version, installed.kind, installed.at_least) == ("0.4.0.dev", "file", False)


def test_verl_main_of_may_2025_is_patched_and_code_that_no_built_in_recipe_covers_says_so(tmp_path):
    """May 2025: main says 0.3.1.dev, inside verl-fsdp-update's range (proven from 0.3 on).  A tree that says 0.1.1.dev
    is older than every verl recipe: refused, and verl-engine-update (0.6 on) is not offered."""
    repo = verl_repo(tmp_path / "verl", "verl-0.6")
    result = run("diff", "verl-fsdp-update", "--root", repo.top)
    assert "+++ b/verl/workers/actor/dp_actor.py" in result.stdout and "note:" not in result.stderr
    repo.commit(1, version="0.1.1.dev")
    before = snapshot(repo.top)
    result = run("diff", "verl-fsdp-update", "--root", repo.top, code=1)
    assert "verl 0.1.1.dev is installed (verl/version/version in" in result.stderr
    assert "verl-fsdp-update is proven on verl >=0.3,<=0.7.1, newest 0.7.1" in result.stderr
    assert "verl-engine-update" not in result.stderr
    assert "no built-in recipe covers verl 0.1.1.dev" in result.stderr
    assert "verl-fsdp-update.yaml" in result.stderr and "target.versions" in result.stderr
    assert "`patchkit diff ./verl-fsdp-update.yaml`" in result.stderr and "--skip-version-check" in result.stderr
    assert snapshot(repo.top) == before


# ---------------------------------------------------------------- verl main, October 2025 to January 2026

def verl_repo_late(top: Path, fixture: str) -> Repo:
    """verl from July 2025: v0.5.0 on main, v0.6.0 and v0.6.1 on release/v0.6.x."""
    repo = verl_repo(top, fixture)
    repo.commit(5, version="0.5.0").tag("v0.5.0")
    repo.commit(30, version="0.5.0.dev")
    repo.branch("release/v0.6.x").commit(1, version="0.6.0").tag("v0.6.0")
    repo.commit(1, version="0.6.1").tag("v0.6.1").checkout("main")
    return repo


def test_verl_main_of_late_2025_is_0_7_0_dev_and_verl_engine_update_takes_it(tmp_path):
    repo = verl_repo_late(tmp_path / "verl", "verl-0.6")
    repo.commit(60, version="0.7.0.dev")
    assert repo.describe().startswith("v0.5.0-")  # 0.5.0: refused by verl-engine-update before
    result = run("diff", "verl-engine-update", "--root", repo.top)
    assert "+++ b/verl/workers/engine/base.py" in result.stdout
    assert f"(verl 0.7.0.dev, from verl/version/version in {repo.top})" in result.stderr
    run("diff", "verl-fsdp-update", "--root", repo.top)  # the legacy actor is still there in 0.7


def test_verl_main_of_2026_is_0_8_0_dev_and_the_actor_recipes_decide_by_the_files_there(tmp_path):
    """Main between 0.7 and 0.8 still trains through dp_actor.py: the legacy recipes patch it, with a note; once the
    file is gone they name verl-engine-update, which takes that checkout and names no recipe back."""
    repo = verl_repo_late(tmp_path / "verl", "verl-0.6")
    repo.commit(1, version="0.7.0.dev").tag("v0.7.0")
    repo.commit(20, version="0.8.0.dev")
    result = run("diff", "verl-fsdp-update", "--root", repo.top)
    assert "+++ b/verl/workers/actor/dp_actor.py" in result.stdout
    assert ("note: verl 0.8.0.dev is newer than the releases verl-fsdp-update is proven on (>=0.3,<=0.7.1, newest "
            "0.7.1): its places were found by their structure; review them with `patchkit diff`") in result.stderr
    shutil.rmtree(repo.top / "verl" / "workers" / "actor")
    repo.commit()
    before = snapshot(repo.top)
    result = run("diff", "verl-fsdp-update", "--root", repo.top, code=1)
    assert "none of the recipe's files is in" in result.stderr and "(verl 0.8.0.dev)" in result.stderr
    assert "use verl-engine-update (verl >=0.6,<=0.9.1) for this version" in result.stderr
    engine = run("diff", "verl-engine-update", "--root", repo.top)
    assert "+++ b/verl/workers/engine/base.py" in engine.stdout and "verl-fsdp-update" not in engine.stderr
    assert snapshot(repo.top) == before


# ---------------------------------------------------------------- vLLM-Ascend main, August 2026

ASCEND_SETUP = ('from setuptools import setup\nfrom setuptools_scm import get_version\n\n'
                'VERSION = get_version(write_to="vllm_ascend/_version.py")\nsetup(name="vllm_ascend", version=VERSION)\n')
ASCEND_PYPROJECT = '[build-system]\nrequires = ["setuptools>=64", "setuptools-scm>=8"]\nbuild-backend = "setuptools.build_meta"\n'


FORKS = (("releases/v0.20.2rc", "v0.20.2rc1"), ("releases/v0.23.0", "v0.23.0rc1"), ("releases/v0.23.0", "v0.23.0"),
         ("releases/v0.24.0rc", "v0.24.0rc1"), ("releases/v0.25.1rc", "v0.25.1rc1"))


def ascend_repo(top: Path, forks=FORKS) -> Repo:
    """vLLM-Ascend: v0.17.0rc1 and v0.19.1rc1 on main, v0.18.0 before and the releases ``forks`` after on their
    own branches; main ends 40 commits past v0.19.1rc1, with a stale, git-ignored _version.py from a build."""
    repo = Repo(top)
    shutil.copytree(FIXTURES / "vllm-ascend-0.23" / "vllm_ascend", top / "vllm_ascend")
    repo.commit(3, files={"setup.py": ASCEND_SETUP, "pyproject.toml": ASCEND_PYPROJECT,
                          ".gitignore": "/vllm_ascend/_version.py\n"})
    repo.commit().tag("v0.17.0rc1")
    repo.commit(5).branch("releases/v0.18.0").commit(2).tag("v0.18.0rc1").commit().tag("v0.18.0").checkout("main")
    repo.commit(4).tag("v0.19.1rc1")
    made = set()
    for branch, tag in forks:  # each branch leaves main 8 commits after the one before
        if branch in made:
            repo.checkout(branch)
        else:
            repo.commit(8).branch(branch)
            made.add(branch)
        repo.commit(2).tag(tag).checkout("main")
    repo.commit(40 - 8 * len(made))
    (top / "vllm_ascend" / "_version.py").write_text("__version__ = version = '0.19.1rc2.dev10+g1234567'\n")
    return repo


def test_vllm_ascend_main_of_august_2026_is_only_known_to_be_0_25_1rc1_or_later_and_is_patched_with_a_note(tmp_path):
    repo = ascend_repo(tmp_path / "vllm-ascend")
    assert repo.describe().startswith("v0.19.1rc1-40-")  # what was taken for its version before, and accepted
    assert repo.git("status", "--porcelain") == ""
    before = snapshot(repo.top)
    result = run("diff", "vllm-ascend-decode", "--root", repo.top)
    err = result.stderr
    assert "+++ b/vllm_ascend/worker/worker.py" in result.stdout
    assert ("note: vllm-ascend 0.25.1rc1 or later may be past the releases vllm-ascend-decode is proven on "
            "(>=0.7.3rc2,<=0.30.0rc2, newest 0.30.0rc2)") in err
    assert "git tag v0.19.1rc1, 40 commits past it" in err and "v0.25.1rc1 (and 4 other tags) came later" in err
    assert "setuptools-scm would say 0.19.1rc2.dev40" in err
    assert "no release tag" not in err
    strict = run("diff", "vllm-ascend-decode", "--root", repo.top, "--strict-versions", code=1).stderr
    assert "vllm-ascend 0.25.1rc1 or later is installed" in strict and "only releases it is proven on" in strict
    assert "--skip-version-check" in strict and "+++" not in strict
    assert snapshot(repo.top) == before


def test_a_checkout_past_the_proven_range_still_needs_the_points(tmp_path):
    repo = ascend_repo(tmp_path / "vllm-ascend")
    before = snapshot(repo.top)
    result = run("diff", "vllm-ascend-decode", "--root", repo.top, "--strict-versions", "--skip-version-check")
    assert "warning: version check skipped (--skip-version-check): vllm-ascend 0.25.1rc1 or later is installed" in result.stderr
    result = run("apply", "vllm-ascend-decode", "--root", repo.top)
    assert "note: vllm-ascend 0.25.1rc1 or later may be past" in result.stderr and "patched:" in result.stderr
    assert "version check skipped" not in result.stderr
    status = run("status").stdout
    assert "(vllm-ascend 0.25.1rc1 or later)" in status
    run("revert", "vllm-ascend-decode")
    assert snapshot(repo.top) == before
    worker = repo.top / "vllm_ascend" / "worker" / "worker.py"
    worker.write_text(worker.read_text().replace("self.model_runner.execute_model(", "self.model_runner.run_model("))
    result = run("diff", "vllm-ascend-decode", "--root", repo.top, code=1)
    assert "self.model_runner.execute_model" in result.stderr and str(worker) in result.stderr
    assert "(vllm-ascend 0.25.1rc1 or later; vllm-ascend-decode is proven on >=0.7.3rc2,<=0.30.0rc2)" in result.stderr


def test_vllm_ascend_release_branch_and_early_main_count_as_the_tags_line(tmp_path):
    repo = ascend_repo(tmp_path / "vllm-ascend")
    repo.checkout("releases/v0.23.0").commit(3)  # fixes on the release branch, after v0.23.0
    result = run("diff", "vllm-ascend-decode", "--root", repo.top)
    assert f"(vllm-ascend 0.23.1.dev3, from setuptools-scm's guess from git tag v0.23.0, 3 commits past it, in {repo.top})" \
        in result.stderr
    early = repo.git("rev-list", "-1", "--skip=35", "main")  # main 5 commits past v0.19.1rc1, before any release branch
    repo.checkout(early)
    assert repo.describe().startswith("v0.19.1rc1-5-")
    result = run("diff", "vllm-ascend-decode", "--root", repo.top)
    assert "(vllm-ascend 0.19.1rc2.dev5, from setuptools-scm's guess from git tag v0.19.1rc1, 5 commits past it" \
        in result.stderr
    repo.checkout("v0.23.0")
    assert f"(vllm-ascend 0.23.0, from git tag v0.23.0 in {repo.top})" in run("diff", "vllm-ascend-decode", "--root",
                                                                              repo.top).stderr


def test_a_lower_bound_inside_the_range_gets_a_note_under_an_upper_bound_and_none_without_one(tmp_path):
    repo = ascend_repo(tmp_path / "vllm-ascend", forks=FORKS[:1])
    result = run("diff", "vllm-ascend-decode", "--root", repo.top)
    assert "note: vllm-ascend 0.20.2rc1 or later may be past the releases" in result.stderr
    copy = tmp_path / "mine" / "vllm-ascend-decode.yaml"
    copy.parent.mkdir()
    text = (RECIPES / "vllm-ascend-decode.yaml").read_text()
    copy.write_text(text.replace('versions: ">=0.7.3rc2,<=0.30.0rc2"', 'versions: ">=0.9.1"'))
    result = run("diff", str(copy), "--root", repo.top, "--strict-versions")
    assert "(vllm-ascend 0.20.2rc1 or later, from git tag v0.19.1rc1" in result.stderr and "note:" not in result.stderr


# ---------------------------------------------------------------- what the refusal says about git

def test_a_refusal_never_says_a_tag_it_names_has_no_release_tag(tmp_path):
    repo = Repo(tmp_path / "verl")
    shutil.copytree(FIXTURES / "verl-0.9" / "verl", repo.top / "verl")
    (repo.top / "verl" / "__init__.py").write_text('"""verl"""\n')
    repo.commit().tag("v0.8.0").commit(2)
    result = run("diff", "verl-fsdp-update", "--root", repo.top, "--strict-versions", code=1)
    assert f"verl 0.8.0 is installed (git tag v0.8.0, 2 commits past it, in {repo.top})" in result.stderr
    assert "no release tag" not in result.stderr and "has no tag" not in result.stderr
    assert "use verl-engine-update" in result.stderr and "check out a release the recipe supports" in result.stderr
    untagged = Repo(tmp_path / "untagged")
    shutil.copytree(FIXTURES / "verl-0.9" / "verl", untagged.top / "verl")
    (untagged.top / "verl" / "__init__.py").write_text('"""verl"""\n')
    untagged.commit().branch("work")
    result = run("diff", "verl-fsdp-update", "--root", untagged.top, "--strict-versions", code=1)
    assert f"verl in {untagged.top} is a checkout of git branch work with no release tag: no version" in result.stderr
    assert "git branch work has no tag in its history" in result.stderr
    assert "no built-in recipe covers verl work" in result.stderr
    assert "add the branch to target.tags there (tags: [work])" in result.stderr  # a branch is no version range


# ---------------------------------------------------------------- editable installs and build leftovers

def test_an_editable_checkout_on_sys_path_takes_the_trees_version_not_its_install_time_metadata(tmp_path, monkeypatch):
    """`pip install -e .` of verl main: the dist-info in site-packages says what the tree said at install time."""
    repo = verl_repo_late(tmp_path / "verl", "verl-0.9")
    repo.commit(3, version="0.8.0.dev")
    site = tmp_path / "site-packages"
    (site / "verl-0.7.0.dev0.dist-info").mkdir(parents=True)
    (site / "verl-0.7.0.dev0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: verl\nVersion: 0.7.0.dev0\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(repo.top))
    installed = locate(Target("verl", "verl", "", ("x",)))
    assert installed.package_dir == (repo.top / "verl").resolve()
    assert (installed.version, installed.version_from) == ("0.8.0.dev", f"verl/version/version in {repo.top.resolve()}")


def test_an_egg_info_left_in_a_checkout_by_an_earlier_build_does_not_hide_the_trees_version(tmp_path):
    repo = verl_repo(tmp_path / "verl", "verl-0.6")
    repo.commit(2, version="0.4.0.dev")
    egg = repo.top / "verl.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: verl\nVersion: 0.3.1.dev0\n")
    installed = locate(Target("verl", "verl", "", ("x",)), str(repo.top))
    assert installed.version == "0.4.0.dev"
    shutil.rmtree(repo.top / ".git")  # the same tree outside git: the metadata is what there is to go by
    assert locate(Target("verl", "verl", "", ("x",)), str(repo.top)).version == "0.3.1.dev0"
