"""The version of a source checkout: what the tree declares, else what its git history says.

Most verl and vLLM-Ascend users run a checkout of ``main``, where the nearest
git tag is the wrong answer: release tags live on release branches, so
``git describe`` on verl's main of mid-2025 names v0.2 while
``verl/version/version`` says 0.4.0.dev.  In order, the first that gives a
PEP 440 version wins:

1. What the tree declares, read as text (nothing is imported):
   ``<package>/version/version`` (verl), ``__version__ = "..."`` in
   ``<package>/__init__.py``, ``version.py`` or ``_version.py``, then a static
   ``[project] version`` in ``pyproject.toml``.  In a git checkout only files
   git tracks count: a ``_version.py`` that setuptools-scm wrote at build
   time is ignored by git and goes stale with every ``git pull``.
2. For a project built with setuptools-scm (vLLM-Ascend), what it would
   compute with its default scheme: the nearest tag when HEAD is on it,
   else the tag with its last number bumped plus ``.dev<distance>``
   (v0.19.1rc1 and 1637 commits: ``0.19.1rc2.dev1637``).
3. The nearest tag (``v2.3.0`` -> ``2.3.0``), saying how many commits past it.
4. The branch.

After 2 or 3, one question is left: were releases made since that tag on
branches that left this history (:func:`patchkit.state.gitrepo.history`)?  Then
the tag belongs to an older line of development, and all that is known is
that the checkout is at least as new as the newest of those releases:
vLLM-Ascend's main of August 2026 is "0.25.1rc1 or later", not 0.19.1rc1.
``at_least`` says so; the version check accepts such a lower bound only for
a range without an upper bound (see :func:`patchkit.state.targets.check_version`).
Without such releases, a checkout past a tag counts as that tag's line (a
release branch with fixes on top, a work branch made from a release).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple, Optional, Tuple

from patchkit.state import gitrepo
from patchkit.recipe.versions import InvalidVersion, Version


class TreeVersion(NamedTuple):
    version: str
    source: str  # where it was read, for messages
    ref: Optional[str] = None  # the git tag or branch it came from (matched against a recipe's target.tags)
    at_least: bool = False  # the checkout is this version or later (see the module's docstring)
    kind: str = "file"  # file, scm, tag, branch (git, no tag) or forked (a lower bound from release branches)


_ASSIGNED = re.compile(r"""^__version__\s*(?::[^=\n]*)?=\s*(?:[A-Za-z_]\w*\s*=\s*)*(['"])([^'"\n]+)\1""", re.M)
_SCM = re.compile(r"^setuptools[-_]scm(?![\w.-])", re.I)


def read(base: Path, package: str) -> Optional[TreeVersion]:
    """The version of the checkout ``base`` (the folder that holds ``package``/), or None if it says nothing.

    git is asked once for each thing it knows: whether ``base`` is in a work tree it keeps (no git at all
    outside one), which declaring files it tracks, and, only when no file declares a version, the history.
    """
    top = gitrepo.source_top(base)
    found = declared(base, package, top)
    if found is not None or top is None:
        return found
    history = gitrepo.history(base, top)
    return from_git(history, base) if history is not None else None


def declared(base: Path, package: str, top: Optional[Path] = None) -> Optional[TreeVersion]:
    """The version the tree declares in a file; with ``top`` (a git work tree) only files git tracks count."""
    files = [base / package / "version" / "version"] + [base / package / n for n in ("__init__.py", "version.py", "_version.py")]
    files = [f for f in files + [base / "pyproject.toml"] if f.is_file()]
    if top is not None and files:
        kept = gitrepo.tracked(top, files)
        if kept is not None:  # git cannot tell: every declared file counts
            files = [f for f in files if f in kept]
    for path in files:
        version, what = _version_in_file(path)
        if version is not None:
            return TreeVersion(version, f"{what} in {path}" if what else _shown(base, path))
    return None


def _version_in_file(path: Path) -> Tuple[Optional[str], str]:
    """``(version, what)`` from one candidate file; what is "" for a plain version file."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None, ""
    if path.name == "version":
        found, what = text.strip(), ""
    elif path.name == "pyproject.toml":
        project = _toml(text).get("project", {})
        static = isinstance(project, dict) and "version" not in (project.get("dynamic") or ())
        found, what = (project.get("version") if static else None), "[project] version"
    else:
        match = _ASSIGNED.search(text)
        found, what = (match.group(2) if match else None), "__version__"
    return (found.strip(), what) if isinstance(found, str) and _valid(found) else (None, what)


def _shown(base: Path, path: Path) -> str:
    return f"{Path(os.path.relpath(path, base)).as_posix()} in {base}"


def _valid(text: str) -> bool:
    try:
        Version(text)
        return True
    except InvalidVersion:
        return False


def _toml(text: str) -> dict:
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        try:
            import tomli as tomllib
        except ImportError:
            return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def uses_scm(base: Path) -> bool:
    """Whether the project in ``base`` takes its version from setuptools-scm (pyproject.toml or setup.py say so)."""
    try:
        config = _toml((base / "pyproject.toml").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        config = {}
    tool = config.get("tool", {})
    if isinstance(tool, dict) and ("setuptools_scm" in tool or "setuptools-scm" in tool):
        return True
    requires = config.get("build-system", {}).get("requires", [])
    if any(isinstance(r, str) and _SCM.match(r.strip()) for r in requires):
        return True
    try:
        setup = (base / "setup.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "setuptools_scm" in setup or "use_scm_version" in setup


def next_dev(tag_version: str, distance: int) -> str:
    """setuptools-scm's default guess for a commit ``distance`` past a tag: the next version's ``.devN``.

    The tag's last number goes up by one (``0.19.1rc1`` -> ``0.19.1rc2``,
    ``2.3.0`` -> ``2.3.1``, ``1.0.post1`` -> ``1.0.post2``); a tag that is
    already a development release keeps its number (``1.0.dev0`` -> ``1.0``).
    """
    version = Version(tag_version)
    text = str(version).split("+")[0]
    if version.dev is not None:
        text = text[: text.rindex(".dev")]
    else:
        digits = len(text) - len(text.rstrip("0123456789"))
        text = text[:-digits] + str(int(text[-digits:]) + 1)
    return f"{text}.dev{distance}"


def from_git(history, base: Path) -> Optional[TreeVersion]:
    """The version from the nearest tag (or setuptools-scm's guess from it), else the branch; see the module."""
    top, tag, distance = history.top, history.tag, history.distance
    tagged = _tag_version(tag) if tag else None
    past = f", {distance} commit{'s' if distance != 1 else ''} past it" if distance and tag else ""
    if tag is not None:
        version, source = tagged or tag, f"git tag {tag}{past}"
        if tagged and distance and uses_scm(base):
            version = next_dev(tagged, distance)
            source = f"setuptools-scm's guess from git tag {tag}{past}"
    elif history.branch:
        version, source = history.branch, f"git branch {history.branch}"
    else:
        return None
    newer = _newest(history.forked, tagged)
    if newer is not None:
        name, bound = newer
        others = len(history.forked) - 1
        where = (f"git tag {tag}{past}, in {top}" if tag else
                 f"git branch {history.branch}, which has no tag in its history, in {top}")
        why = (f"{where}; but {name}{f' (and {others} other tags)' if others > 1 else ' (and 1 other tag)' if others else ''}"
               f" came later, on branches that left this history, so the checkout is {bound} or later")
        if version != (tagged or tag):
            why += f" (setuptools-scm would say {version})"
        return TreeVersion(bound, why, history.branch, at_least=True, kind="forked")
    kind = "branch" if tag is None else "scm" if version != (tagged or tag) else "tag"
    return TreeVersion(version, f"{source}{',' if past else ''} in {top}", tag if tag is not None else history.branch,
                       kind=kind)


def _tag_version(tag: str) -> Optional[str]:
    """``v2.3.0`` -> ``2.3.0``; None for a tag that is no PEP 440 version."""
    text = tag[1:] if tag[:1] in ("v", "V") and tag[1:2].isdigit() else tag
    return text if _valid(text) else None


def _newest(tags, than: Optional[str]) -> Optional[Tuple[str, str]]:
    """``(tag, version)`` of the newest release among ``tags``, if newer than ``than``."""
    best = None
    for tag in tags:
        version = _tag_version(tag)
        if version is not None and (best is None or Version(version) > Version(best[1])):
            best = (tag, version)
    if best is None or (than is not None and Version(best[1]) <= Version(than)):
        return None
    return best
