"""Where a recipe's files are, and which version is installed, without importing the package."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import NamedTuple, Optional

from patchkit.core.errors import Location, TargetError
from patchkit.core.model import Script, Target


class Installed(NamedTuple):
    root: Path  # the folder that holds the package: site-packages, or a source checkout
    package_dir: Path
    version: Optional[str]
    version_from: str  # where the version was read, for messages
    ref: Optional[str] = None  # the git tag or branch the version came from (source checkouts)
    at_least: bool = False  # a source checkout known only to be ``version`` or later (see treeversion)
    kind: str = "metadata"  # metadata, or how a source checkout's version was read (treeversion.TreeVersion.kind)

    @property
    def shown(self) -> Optional[str]:
        """The version for people: ``0.25.1rc1 or later`` for a lower bound; None when unknown."""
        return f"{self.version} or later" if self.at_least and self.version else self.version


def canonical(name: str) -> str:
    """A distribution name as the registry compares names (PEP 503): ``Tiny_Train`` -> ``tiny-train``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _headers(path: str) -> dict:
    """The ``Key: value`` lines at the top of a METADATA file (up to the first blank line)."""
    head = {}
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                break
            key, sep, value = line.partition(": ")
            if sep and key not in head:
                head[key] = value.strip()
    return head


def version_in(folder: Path, distribution: str, dist_info: bool = True) -> Optional[str]:
    """The version in ``folder``'s ``<name>-<version>.dist-info/METADATA``, or (``dist_info`` false) in other
    metadata importlib finds there (``.egg-info``)."""
    wanted = canonical(distribution)
    if not dist_info:
        import importlib.metadata as metadata

        for dist in metadata.distributions(path=[str(folder)]):
            name = dist.metadata["Name"] if dist.metadata else None
            if name and canonical(name) == wanted:
                return dist.version
        return None
    try:
        entries = os.listdir(folder)
    except OSError:
        return None
    for entry in entries:
        if entry.endswith(".dist-info") and canonical(entry[: -len(".dist-info")].rsplit("-", 1)[0]) == wanted:
            try:
                head = _headers(os.path.join(folder, entry, "METADATA"))
            except OSError:
                continue
            if canonical(head.get("Name", "")) == wanted and head.get("Version"):
                return head["Version"].strip()
    return None


def default_root() -> Optional[str]:
    return os.environ.get("PATCHKIT_ROOT") or None


def root_dir(root: str) -> Path:
    """``--root`` as an absolute folder, or a clear error."""
    base = Path(root).expanduser().resolve()
    if not base.is_dir():
        raise TargetError(f"--root {root} is not a directory", Location(str(root)),
                          "pass the site-packages folder or the source checkout that holds the package")
    return base


def find_package(package: str, base: Optional[Path] = None) -> Optional[Path]:
    """The folder of ``package`` under ``base`` or, without one, in this environment (``find_spec``, no import).

    None when it is not there.
    """
    if base is not None:
        return base / package if (base / package).is_dir() else None
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def locate(target: Target, root: Optional[str] = None) -> Installed:
    """Find ``target.package`` under ``root`` (or in this environment) and read its version; a script target's
    folder (:func:`script_folder`)."""
    if target.script is not None:
        return script_folder(target.script, root)
    root = root if root is not None else default_root()
    if root:
        base = root_dir(root)
        package_dir = find_package(target.package, base)
        if package_dir is None:
            raise TargetError(f"no package {target.package} under {base}", Location(str(base)),
                              f"pass the folder that contains {target.package}/ (site-packages or a checkout)")
        return _read_version(base, package_dir, target, environment=False)
    package_dir = find_package(target.package)
    if package_dir is None:
        raise TargetError(f"{target.package} is not installed in this environment ({_python()})",
                          hint=f"install {target.distribution}, run patchkit with the Python of that environment, "
                               "or pass --root DIR")
    return _read_version(package_dir.parent, package_dir, target, environment=True)


def script_folder(script: Script, root: Optional[str] = None) -> Installed:
    """The folder holding a script target, as the root its one file is under (no version).

    The script is ``script.path`` from the recipe's folder (or as written when absolute); with ``root`` (``--root``,
    never ``$PATCHKIT_ROOT``, which names a site-packages), the file of that name in ``root``.  Refused: no such
    file, not a plain file, or a link (of the file or of a folder on the way) that leads out of the folder it was
    taken from.
    """
    where = script.where or Location(script.path)
    if root:
        base = root_dir(root)
        link, said = base / script.name, f"--root {base}"
    elif Path(script.path).is_absolute():
        link = Path(script.path)
        base, said = link.parent, "its absolute path"
    else:
        base = Path(script.base)
        link, said = base / script.path, f"the recipe's folder {base}"
    try:
        real, there = Path(os.path.realpath(link)), os.path.lexists(link)
    except (OSError, ValueError):
        real, there = link, False
    if not there:
        raise TargetError(f"no script {script.path}: {link} is not there (taken from {said})", where,
                          f"write target.script as the script's path from the recipe's folder, or pass --root DIR, "
                          f"the folder holding {script.name}")
    if Path(os.path.realpath(base)) not in real.parents:
        raise TargetError(f"{link} is a symbolic link to {real}, outside {base}: patchkit patches only a script "
                          f"inside the folder it was given", where,
                          f"name the script where it is (target.script: {real}, or --root {real.parent})")
    if not real.is_file():
        raise TargetError(f"the script {link} is not a plain file", where, "name the Python file the job runs")
    return Installed(link.parent.absolute(), link.parent.absolute(), None, "a script has no version", kind="script")


def _read_version(base: Path, package_dir: Path, target: Target, environment: bool) -> Installed:
    """The version, in this order: a ``.dist-info`` beside the package (site-packages); in a git checkout
    (an editable install included), what the tree declares or its git tags say (:mod:`patchkit.state.treeversion`),
    before an ``.egg-info`` left there by an earlier build; other metadata (the environment's, for the
    package found on sys.path); what a folder outside git declares; a git branch with no tag; unknown."""
    dist = target.distribution
    version = version_in(base, dist)
    if version is not None:
        return Installed(base, package_dir, version, f"{dist} metadata in {base}")
    from patchkit.state import treeversion
    from patchkit.state.gitrepo import work_tree  # not for a package with its metadata beside it

    tree = treeversion.read(base, target.package)
    if tree is not None and tree.kind != "branch" and work_tree(base) is not None:
        return _from_tree(base, package_dir, tree)
    version, source = version_in(base, dist, dist_info=False), f"{dist} metadata in {base}"
    if version is None and environment:
        import importlib.metadata as metadata

        try:
            version, source = metadata.version(dist), f"installed {dist} metadata"
        except metadata.PackageNotFoundError:
            pass
    if version is None and tree is not None:
        return _from_tree(base, package_dir, tree)
    return Installed(base, package_dir, version, source)


def _from_tree(base: Path, package_dir: Path, tree) -> Installed:
    return Installed(base, package_dir, tree.version, tree.source, tree.ref, tree.at_least, tree.kind)


def _python() -> str:
    import sys

    return sys.executable
