"""Plan: find the recipe's files, pick the candidate where every point resolves, transform it in memory.

Nothing here writes; :func:`plan` reads the target files, runs the engine on
them and says which git checkout (if any) holds each one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from patchkit import DISTRIBUTION
from patchkit.core.errors import AnchorError, Location, PatchkitError, TargetError
from patchkit.core.model import Applied, CannotApply, Point, Settings, TransformResult
from patchkit.state.targets import Installed, locate
from patchkit.state.versioncheck import SKIP_VERSION_CHECK as SKIP_FLAG, check_version


class FilePlan(NamedTuple):
    """One file the recipe patches: its bytes as read, and what the engine made of them."""

    path: Path
    relpath: str
    data: bytes
    encoding: str
    text: str
    result: TransformResult
    points: Tuple[Point, ...]
    via: str = ""  # "through symlink X" when the recipe's path is a link
    work_tree: Optional[Path] = None  # the top of the git work tree holding the file, if any
    tracked: bool = False  # git tracks the file there (an ignored virtualenv inside a checkout is not)

    @property
    def changes(self) -> bool:
        return isinstance(self.result, Applied)

    @property
    def diffpath(self) -> str:
        """The path in the patch: from the top of the git checkout that tracks the file, else from the root."""
        if self.tracked and self.work_tree is not None:
            return Path(os.path.relpath(self.path, self.work_tree)).as_posix()
        return self.relpath

    def new_bytes(self) -> bytes:
        assert isinstance(self.result, Applied)
        return self.result.text.encode(self.encoding)

    def diff(self) -> str:
        from patchkit.engine.diff import unified

        return unified(self.text, self.result.text, self.diffpath) if self.changes else ""


class Plan(NamedTuple):
    """Where the package is, and a FilePlan per file the recipe patches there."""

    settings: Settings
    installed: Installed
    files: List[FilePlan]
    version_skipped: str = ""  # with skip_version_check: the refusal that was skipped ("" when the version fits)
    version_note: str = ""  # a version past the proven range, or none: what to say once ("" when proven)

    def diff(self) -> str:
        return "".join(f.diff() for f in self.files)

    def patch_bases(self) -> List[Path]:
        """The folders to run `git apply` or `patch -p1` in: the git checkouts tracking the files, else the root."""
        bases = [f.work_tree if f.tracked and f.work_tree else self.installed.root for f in self.files if f.changes]
        return sorted(set(bases))


def plan(settings: Settings, root: Optional[str] = None, skip_version_check: bool = False,
         strict_versions: Optional[bool] = None, scopes_only: bool = False) -> Plan:
    """Find the files, pick the first candidate where every point resolves, transform it.

    A version past the recipe's proven range is planned like one inside it (the points must fit), with
    ``Plan.version_note`` saying so; ``strict_versions`` (None: ``$PATCHKIT_STRICT_VERSIONS``) refuses it.
    ``skip_version_check`` lets any refused version through (the refusal is kept in ``Plan.version_skipped``);
    the points must still resolve in the files.  ``scopes_only`` (attach): each file is transformed with only the
    functions its points are in (:func:`_scoped`), lines kept in place; a file's ``result.text`` is then the
    instrumented text of those functions, not of the file.
    """
    recipe = settings.recipe
    installed = locate(recipe.target, root)
    skipped = note = ""
    try:
        note = check_version(installed, recipe.target, recipe.id, recipe.path, strict_versions)
    except TargetError as exc:
        if not skip_version_check:
            _with_the_structure(exc, settings, installed)
            raise
        skipped = exc.message
    try:
        return _planned(settings, installed, skipped, scopes_only)._replace(version_note=note)
    except PatchkitError as exc:
        if skipped:  # the plan failed further on: the error still says what the skipped check let through
            exc.warnings.append(skipped_note(skipped))
        raise  # past the range, the error names the version and the range itself


def _with_the_structure(refusal: TargetError, settings: Settings, installed: Installed) -> None:
    """A release older than the proven range: the refusal also says what the structure gives there (the point that
    does not resolve, or that every point fits), so it is not the version alone."""
    from patchkit.recipe import versions

    target, version = settings.recipe.target, installed.version
    if version is None or installed.at_least or not target.versions or target.script is not None:
        return
    try:
        if versions.covers(target.versions, version) or versions.beyond(target.versions, version) or (
                target.excluded and versions.covers(target.excluded, version)):
            return
    except (ValueError, versions.InvalidVersion):
        return
    try:
        _planned(settings, installed, "")
    except PatchkitError as structural:
        at = structural.where
        where = f"{at}: " if at is not None and at.path and at.path != settings.recipe.path else ""  # in the target
        why = structural.message
        for said in (f" ({_what(target, installed)}; {settings.recipe.id} is proven on {target.versions})",
                     f" ({_what(target, installed)})"):  # the version and the range: said already
            why = why[:-len(said)] if why.endswith(said) else why
        refusal.message += f"; nor does its structure fit: {where}{why}"
        return
    refusal.hint += (f"\n  hint: every point of {settings.recipe.id} resolves in this release's files, but they are "
                     f"not proven to be the same places: review `patchkit diff {settings.recipe.id} {SKIP_FLAG}`")


def skipped_note(refusal: str) -> str:
    """What ``--skip-version-check`` let through, said plainly."""
    return f"version check skipped (--skip-version-check): {refusal}"


def _planned(settings: Settings, installed: Installed, skipped: str, scopes_only: bool = False) -> Plan:
    from patchkit.state import gitrepo  # here and below, not at the top: show names the files and reads none

    seen: Dict[tuple, FilePlan] = {}  # each candidate is read and transformed once per plan
    chosen = _chosen(settings, installed, seen, scopes_only)
    result = Plan(settings, installed, [], skipped)
    for relpath, points in chosen.items():
        f = _file_plan(settings, installed, relpath, points, seen, scopes_only)
        if isinstance(f.result, CannotApply):  # two groups of points chose one file and do not fit together
            raise AnchorError(f.result.reason, Location(str(f.path), f.result.line, f.result.col),
                              f.result.hint or "this file does not have the shape the recipe expects")
        if gitrepo.work_tree(f.path) is not None:  # os.path only; gitpython only inside a git work tree
            top, tracked = gitrepo.checkout_of(f.path)
            f = f._replace(work_tree=top, tracked=tracked)
        result.files.append(f)
    return result


def _chosen(settings: Settings, installed: Installed, seen: Dict[tuple, FilePlan],
            scopes_only: bool = False) -> Dict[str, List[Point]]:
    """The file picked among each group of candidates (the first where all its points resolve), with its points."""
    chosen: Dict[str, List[Point]] = {}
    for candidates, points in _groups(settings).items():
        chosen.setdefault(_choose(settings, installed, candidates, points, seen, scopes_only), []).extend(points)
    return chosen


def _groups(settings: Settings) -> Dict[Tuple[str, ...], List[Point]]:
    """The active points by the candidate files they name (their own ``files:``, else the target's)."""
    groups: Dict[Tuple[str, ...], List[Point]] = {}
    for point in settings.active_points():
        groups.setdefault(point.files or settings.recipe.target.files, []).append(point)
    return groups


def files_to_patch(settings: Settings, root: Optional[str] = None,
                   strict_versions: Optional[bool] = None) -> Tuple[Installed, List[Path]]:
    """Where the recipe's package is and which of its files :func:`plan` would pick; reads, writes nothing, no git."""
    installed = locate(settings.recipe.target, root)
    check_version(installed, settings.recipe.target, settings.recipe.id, settings.recipe.path, strict_versions)
    return installed, [(installed.root / relpath).resolve() for relpath in _chosen(settings, installed, {})]


def candidate_files(settings: Settings, root: Optional[str] = None,
                    strict_versions: Optional[bool] = None) -> Tuple[Installed, List[List[Path]], str]:
    """Where the recipe's package is, for each group of points the candidate files that are there, and the version's
    note (:attr:`Plan.version_note`).

    Reads no target file (no codemod): :func:`plan` picks the first candidate of a group where every point
    resolves.  A group with no candidate there is the error :func:`plan` would give.
    """
    recipe = settings.recipe
    installed = locate(recipe.target, root)
    note = check_version(installed, recipe.target, recipe.id, recipe.path, strict_versions)
    groups: List[List[Path]] = []
    for candidates in _groups(settings):
        there = [(installed.root / c).resolve() for c in candidates if (installed.root / c).is_file()]
        if not there:
            raise _none_there(settings, installed, candidates)
        groups.append(there)
    return installed, groups, note


def _what(target, installed: Installed) -> str:
    """The target for messages: ``vllm-ascend 0.9.1``, or ``the script train.py``."""
    if target.script is not None:
        return target.shown
    return f"{target.distribution} {installed.shown or '(version unknown)'}"


def _none_there(settings: Settings, installed: Installed, candidates: Sequence[str]) -> TargetError:
    from patchkit.state.versioncheck import elsewhere, fits

    recipe = settings.recipe
    version = _what(recipe.target, installed)
    hint = ""
    if recipe.target.instead and not fits(recipe.target, installed):  # past the proven range, the layout changed
        hint = elsewhere(installed, recipe.target, recipe.id) or (
            f"{recipe.id} names {recipe.target.instead} for the releases it does not fit: try it")
    return TargetError(f"none of the recipe's files is in {installed.root}: {', '.join(candidates)} ({version})",
                       Location(recipe.path), hint or f"is {version} the package this recipe is for?")


# patchkit's own import and the imports of its dependencies, with their distributions: a recipe that
# patches one of them makes every later patchkit command run, and profile, patchkit itself
# import name -> distribution, for patchkit and every dependency in pyproject.toml (a test keeps them in step)
OWN_DEPENDENCIES = {"patchkit": DISTRIBUTION, "click": "click", "yaml": "pyyaml", "libcst": "libcst", "git": "gitpython",
                    "packaging": "packaging", "tomli": "tomli", "ijson": "ijson", "elftools": "pyelftools"}


def own_dependency(settings: Settings) -> Optional[str]:
    """The distribution, when the recipe's package is patchkit's own or one of its dependencies."""
    return OWN_DEPENDENCIES.get(settings.recipe.target.package)


def _file_plan(settings: Settings, installed: Installed, relpath: str, points: Sequence[Point],
               seen: Dict[tuple, FilePlan], scopes_only: bool = False) -> FilePlan:
    key = (relpath, tuple(map(id, points)))
    if key in seen:
        return seen[key]
    link = installed.root / relpath
    path = link.resolve()
    via = f"through symlink {link}" if path != link.absolute() else ""
    top = installed.root.resolve()
    if via and top not in path.parents:
        raise TargetError(f"{link} is reached through a symbolic link to {path}, outside {top}: patchkit patches "
                          "only files inside the folder it was given", Location(str(link)),
                          f"if that file is the one to patch, pass the folder that holds its package as the root "
                          f"(--root {_root_of(path, relpath)}); otherwise remove the link")
    from patchkit.engine.marks import decode
    from patchkit.state.targetfile import read_target

    try:
        data = read_target(path)
    except OSError as exc:
        raise TargetError(f"cannot read: {exc.strerror}", Location(str(path)), "check the file's permissions") from None
    text, encoding = decode(data, path)
    _check_no_foreign_marks(text, path)
    from patchkit.engine import codemod as engine  # the engine (and libcst) only for commands that transform

    outcome = engine.transform(_scoped(text, points) if scopes_only else text, settings, points, str(path))
    if scopes_only and isinstance(outcome, CannotApply):  # said as the whole file says it
        outcome = engine.transform(text, settings, points, str(path))
    seen[key] = FilePlan(path, relpath, data, encoding, text, outcome, tuple(points), via)
    return seen[key]


def _scoped(text: str, points: Sequence[Point]) -> str:
    """Only the functions the points are in (:func:`patchkit.state.scopes.only`): what ``scopes_only`` plans on,
    for ``patchkit attach``, which swaps those functions' code alone; its ``result.text`` is then not a file."""
    from patchkit.state.scopes import only

    return only(text, points)


def _root_of(path: Path, relpath: str) -> Path:
    """The folder that would hold ``relpath`` at ``path``: where the link leads, as a root."""
    depth = len(Path(relpath).parts)
    return path.parents[depth - 1] if depth <= len(path.parents) else path.parent


def _check_no_foreign_marks(text: str, path: Path) -> None:
    """Refuse a file with a line that ends in patchkit's marker but is not one patchkit writes.

    Patchkit finds its own lines by that marker: applying takes the recipe's
    marked lines out before putting them in again, and the backup is the file
    with every marked line taken out.  A line of the user's own with the marker
    would be lost from the file and from the original revert gives back.
    """
    from patchkit.engine.marks import foreign_line

    found = foreign_line(text)
    if found is not None:
        line, col, rid = found
        raise AnchorError(f"this line ends in `# patchkit:{rid}`, patchkit's marker for its own lines, but patchkit "
                          "did not write it: patchkit takes such lines out to find the original, so revert could "
                          "not give it back", Location(str(path), line, col),
                          f"remove that comment or change it (e.g. to `# patchkit {rid}`), then run the command again")


def _choose(settings: Settings, installed: Installed, candidates: Sequence[str], points: List[Point],
            seen: Dict[tuple, FilePlan], scopes_only: bool = False) -> str:
    failures: List[Tuple[Path, CannotApply]] = []
    for relpath in candidates:
        if not (installed.root / relpath).is_file():
            continue
        f = _file_plan(settings, installed, relpath, points, seen, scopes_only)
        if not isinstance(f.result, CannotApply):
            return relpath
        failures.append((f.path, f.result))
    recipe = settings.recipe
    version = _what(recipe.target, installed)
    if not failures:
        raise _none_there(settings, installed, candidates)
    path, why = failures[0]
    others = "".join(f"; {p.name}: {'the same' if w.reason == why.reason else w.reason}" for p, w in failures[1:])
    proven = "" if recipe.target.script else f"; {recipe.id} is proven on {recipe.target.versions or 'any version'}"
    raise AnchorError(f"{why.reason}{others} ({version}{proven})",
                      Location(str(path), why.line, why.col),
                      why.hint or "this version's file has another shape; check `patchkit list` for a recipe that fits, "
                      "or adapt the recipe's points")
