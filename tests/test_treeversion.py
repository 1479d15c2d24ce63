"""The version a source tree declares, read as text: each kind of declaration, their order, what is skipped.

The git-history side (nearest tag, release branches) is in tests/test_checkout_versions.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.core.model import Target
from patchkit.state.targets import locate
from patchkit.state.treeversion import declared, next_dev, read, uses_scm


def write(root: Path, files: dict) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def git(top: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    done = subprocess.run(["git", "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", *args], cwd=top,
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("name,text,expected", [
    ("pkg/version/version", "0.4.0.dev\n", "0.4.0.dev"),  # verl
    ("pkg/__init__.py", '"""doc"""\nimport os\n\n__version__ = "0.5.5"\n', "0.5.5"),
    ("pkg/__init__.py", "__version__: str = '1.2.3'  # set by the release script\n", "1.2.3"),
    ("pkg/version.py", "__version__ = '0.5.5.post1'\n", "0.5.5.post1"),  # SGLang
    ("pkg/_version.py", "__version__ = version = '0.19.1rc2.dev1637+g182b75ea8'\n", "0.19.1rc2.dev1637+g182b75ea8"),
    ("pyproject.toml", '[project]\nname = "pkg"\nversion = "2.3.0"\n', "2.3.0"),
])
def test_each_kind_of_declaration_is_read_as_text(tmp_path, name, text, expected):
    root = write(tmp_path, {"pkg/__init__.py": "", name: text} if name != "pkg/__init__.py" else {name: text})
    (root / "pkg" / "__init__.py").write_text((root / "pkg" / "__init__.py").read_text() + "raise ImportError\n")
    found = declared(root, "pkg")
    assert found is not None and found.version == expected and found.kind == "file"
    assert name.split("/")[-1] in found.source and str(root) in found.source
    assert "pkg" not in sys.modules  # read, never imported


def test_what_is_not_a_declared_version_is_skipped(tmp_path):
    root = write(tmp_path, {
        "pkg/version/version": "unknown\n",  # not a PEP 440 version
        "pkg/__init__.py": "from ._version import __version__\n",  # not a literal
        "pkg/version.py": "with open('v') as f:\n    __version__ = f.read()\n",
        "pyproject.toml": '[project]\nname = "pkg"\nversion = "9.9"\ndynamic = ["version"]\n',  # contradictory: dynamic wins
    })
    assert declared(root, "pkg") is None
    (root / "pyproject.toml").write_text('[project]\nname = "pkg"\ndynamic = ["version"]\n[tool.setuptools.dynamic]\n'
                                         'version = {file = "pkg/version/version"}\n')
    assert declared(root, "pkg") is None
    (root / "pyproject.toml").write_text("[project\nbroken")
    assert declared(root, "pkg") is None


def test_the_version_file_comes_first_then_the_package_then_pyproject(tmp_path):
    root = write(tmp_path, {"pkg/version/version": "0.7.0.dev", "pkg/__init__.py": "__version__ = '0.6.0'\n",
                            "pkg/_version.py": "__version__ = '0.5.0'\n", "pyproject.toml": '[project]\nversion = "0.4.0"\n'})
    order = []
    for drop in ("pkg/version/version", "pkg/__init__.py", "pkg/_version.py", "pyproject.toml"):
        found = declared(root, "pkg")
        order.append(found.version if found else None)
        (root / drop).write_text("")
    assert order == ["0.7.0.dev", "0.6.0", "0.5.0", "0.4.0"]


def test_in_a_git_checkout_an_untracked_version_file_is_a_build_product_and_not_read(tmp_path):
    """setuptools-scm writes vllm_ascend/_version.py at build time; git ignores it and it goes stale."""
    top = write(tmp_path / "checkout", {".gitignore": "/pkg/_version.py\n", "pkg/__init__.py": "",
                                        "setup.py": "from setuptools_scm import get_version\n"})
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "one")
    git(top, "tag", "v1.4.0")
    git(top, "commit", "-q", "--allow-empty", "-m", "two")
    (top / "pkg" / "_version.py").write_text("__version__ = version = '0.1.dev3+gdeadbee'\n")  # stale build output
    found = read(top, "pkg")
    assert (found.version, found.kind) == ("1.4.1.dev1", "scm")
    git(top, "add", "-f", "pkg/_version.py")  # a project that commits its version file declares it
    git(top, "commit", "-q", "-m", "three")
    assert read(top, "pkg").version == "0.1.dev3+gdeadbee"


def test_reading_a_checkouts_version_asks_git_each_question_once(tmp_path, monkeypatch):
    from patchkit.state import gitrepo

    top = write(tmp_path / "checkout", {"pkg/__init__.py": "", "setup.py": "from setuptools_scm import get_version\n"})
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "one")
    git(top, "tag", "v1.4.0")
    asked = []
    real = gitrepo._ok
    monkeypatch.setattr(gitrepo, "_ok", lambda top, *args: asked.append(args[0]) or real(top, *args))
    assert read(top, "pkg").version == "1.4.0"
    # which declaring files git tracks, the branch and the commit, the nearest tag, the releases on other branches
    assert asked == ["ls-files", "symbolic-ref", "rev-parse", "describe", "rev-list"]
    asked.clear()
    assert read(top / "pkg", "nothing").version == "1.4.0"  # a folder inside: is it ignored? (once), the history
    assert asked == ["check-ignore", "symbolic-ref", "rev-parse", "describe", "rev-list"]
    asked.clear()
    write(top, {"pkg/version.py": "__version__ = '2.0'\n"})
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "two")
    assert read(top, "pkg").version == "2.0"
    assert asked == ["ls-files"]  # the tree declares it: no history is read (base is the top: nothing to ignore)


def test_setuptools_scm_is_recognised_from_pyproject_or_setup_py(tmp_path):
    cases = {
        "pyproject.toml": ['[tool.setuptools_scm]\n', '[tool.setuptools-scm]\nversion_file = "p/_version.py"\n',
                           '[build-system]\nrequires = ["setuptools>=64", "setuptools-scm>=8"]\n',  # vLLM-Ascend
                           '[build-system]\nrequires = ["setuptools_scm[toml]>=6.2"]\n'],
        "setup.py": ["from setuptools_scm import get_version\nVERSION = get_version(write_to='p/_version.py')\n",
                     "setup(use_scm_version=True)\n"],
    }
    for name, texts in cases.items():
        for n, text in enumerate(texts):
            assert uses_scm(write(tmp_path / f"{name}-{n}", {name: text})), text
    for n, files in enumerate([{}, {"pyproject.toml": '[build-system]\nrequires = ["setuptools-scmx", "hatchling"]\n'},
                               {"setup.py": "setup(version='1.0')\n"}]):
        assert not uses_scm(write(tmp_path / f"not-{n}", files)), files


def test_next_dev_is_setuptools_scms_default_guess():
    assert next_dev("0.19.1rc1", 1637) == "0.19.1rc2.dev1637"  # vLLM-Ascend main, August 2026
    assert next_dev("2.3.0", 3) == "2.3.1.dev3"
    assert next_dev("0.2", 1) == "0.3.dev1"
    assert next_dev("1.0.post1", 2) == "1.0.post2.dev2"
    assert next_dev("1.0.dev0", 4) == "1.0.dev4"
    assert next_dev("1.0+local.7", 1) == "1.1.dev1"
    assert next_dev("V1.0RC9", 1) == "1.0rc10.dev1"


def test_a_folder_outside_git_with_no_metadata_takes_its_declared_version(tmp_path):
    """A source tree unpacked from an archive: no .dist-info, no git, but verl/version/version."""
    root = write(tmp_path / "verl-src", {"verl/__init__.py": "", "verl/version/version": "0.7.0.dev\n"})
    installed = locate(Target("verl", "verl", ">=0.4", ("x.py",)), str(root))
    assert installed.version == "0.7.0.dev" and installed.version_from == f"verl/version/version in {root}"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to give the checkout away")
def test_a_checkout_git_refuses_to_read_still_gives_its_declared_version(tmp_path):
    """Another user's checkout (sudo, a container): git says "dubious ownership" and answers nothing."""
    top = write(tmp_path / "checkout", {"pkg/__init__.py": "", "pkg/version/version": "0.7.0.dev\n"})
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "one")
    for path in [top, *top.rglob("*")]:
        os.chown(path, 65534, 65534, follow_symlinks=False)
    probe = subprocess.run(["git", "ls-files"], cwd=top, capture_output=True, text=True,
                           env=dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull))
    assert probe.returncode != 0  # the premise: git refuses this checkout
    found = read(top, "pkg")
    assert found is not None and found.version == "0.7.0.dev"
