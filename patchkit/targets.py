"""Where a recipe's files are, and which version is installed, without importing the package."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import Optional

from .errors import Location, TargetError
from .model import Target
from .record import Record


class Installed(Record):
    root: Path  # the folder that holds the package: site-packages, or a source checkout
    package_dir: Path
    version: Optional[str]
    version_from: str  # where the version was read, for messages
    ref: Optional[str] = None  # the git tag or branch the version came from (source checkouts)


def _normalise(name: str) -> str:
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


def version_in(folder: Path, distribution: str) -> Optional[str]:
    """The version in ``folder``'s ``<name>-<version>.dist-info/METADATA`` (or any metadata importlib finds)."""
    wanted = _normalise(distribution)
    try:
        entries = os.listdir(folder)
    except OSError:
        return None
    for entry in entries:
        if entry.endswith(".dist-info") and _normalise(entry[: -len(".dist-info")].rsplit("-", 1)[0]) == wanted:
            try:
                head = _headers(os.path.join(folder, entry, "METADATA"))
            except OSError:
                continue
            if _normalise(head.get("Name", "")) == wanted and head.get("Version"):
                return head["Version"].strip()
    import importlib.metadata as metadata  # egg-info and other layouts

    for dist in metadata.distributions(path=[str(folder)]):
        name = dist.metadata["Name"] if dist.metadata else None
        if name and _normalise(name) == wanted:
            return dist.version
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
    """Find ``target.package`` under ``root`` (or in this environment) and read its version."""
    root = root if root is not None else default_root()
    if root:
        base = root_dir(root)
        package_dir = find_package(target.package, base)
        if package_dir is None:
            raise TargetError(f"no package {target.package} under {base}", Location(str(base)),
                              f"pass the folder that contains {target.package}/ (site-packages or a checkout)")
        version = version_in(base, target.distribution)
        if version is None:  # a source checkout: the nearest git tag, or the branch
            from . import gitrepo

            described = gitrepo.describe(base)
            if described is not None:
                version, source = described
                return Installed(base, package_dir, version, source, source.split()[2])
        return Installed(base, package_dir, version, f"{target.distribution} metadata in {base}")
    package_dir = find_package(target.package)
    if package_dir is None:
        raise TargetError(f"{target.package} is not installed in this environment ({_python()})",
                          hint=f"install {target.distribution}, run patchkit with the Python of that environment, "
                               "or pass --root DIR")
    base = package_dir.parent
    version = version_in(base, target.distribution)
    source = f"{target.distribution} metadata in {base}"
    if version is None:
        import importlib.metadata as metadata

        try:
            version = metadata.version(target.distribution)
            source = f"installed {target.distribution} metadata"
        except metadata.PackageNotFoundError:
            version = None
    return Installed(base, package_dir, version, source)


def _python() -> str:
    import sys

    return sys.executable


def check_version(installed: Installed, target: Target, recipe_id: str) -> None:
    if not target.versions and not target.tags:
        return
    from . import versions

    if installed.version is None:
        raise TargetError(f"cannot tell which version of {target.distribution} is in {installed.root} "
                          f"(no {target.distribution} metadata, no git tag or branch); "
                          f"{recipe_id} supports {target.versions}",
                          hint="point --root at a site-packages folder with the package's .dist-info, "
                               "or at a git checkout of a release")
    if installed.ref is not None and installed.ref in target.tags:
        return  # a release the recipe names by its tag or branch
    try:
        ok = versions.contains(target.versions, installed.version)
    except ValueError:
        raise TargetError(f"{recipe_id}: not a PEP 440 version specifier: {target.versions!r}",
                          hint="fix target.versions in the recipe, e.g. \">=0.4,<0.8\"") from None
    if not ok:
        tags = f" (releases {', '.join(target.tags)})" if target.tags else ""
        raise TargetError(f"{target.distribution} {installed.version} is installed ({installed.version_from}); "
                          f"{recipe_id} supports {target.distribution} {target.versions}{tags}",
                          hint=f"use {target.instead} for this version" if target.instead
                          else f"check out a supported release (a branch based on one of its tags counts as that "
                               f"release); {installed.ref} has no release tag" if installed.ref is not None
                          else "use a recipe made for this version (see `patchkit list`)")


def work_tree(path) -> Optional[Path]:
    """The top of the git work tree that holds ``path`` (a ``.git`` found walking up), else None.  No git import."""
    here = os.path.abspath(os.fspath(path))
    if not os.path.isdir(here):
        here = os.path.dirname(here)
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return Path(here)
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
