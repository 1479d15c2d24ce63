"""The importable API: resolve -> transform -> verify -> back up -> write.

The command line is a thin layer over these functions; everything here
returns data and raises :class:`~patchkit.errors.PatchkitError` for what the
user can fix.
"""

from __future__ import annotations

import ast
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from . import DISTRIBUTION, marks
from .marks import decode  # noqa: F401  (re-exported)
from .errors import AnchorError, LedgerError, Location, PatchkitError, RecipeError, TargetError

if TYPE_CHECKING:  # the ledger (hashlib, tempfile, json) only for commands that change or read state
    from .ledger import FileRecord, Ledger
from .model import AlreadyApplied, Applied, CannotApply, Example, Point, Settings, TransformResult
from .recipe import all_recipes, builtin_dir, builtin_ids, load, load_recipe, recipe_path  # noqa: F401
from .record import Record
from .state import FileStatus, status  # noqa: F401  (re-exported)
from .targets import Installed, check_version, locate, work_tree


# ---------------------------------------------------------------- planning

class FilePlan(Record):
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
        from .diff import unified

        return unified(self.text, self.result.text, self.diffpath) if self.changes else ""


class Plan(Record):
    settings: Settings
    installed: Installed
    files: List[FilePlan]
    version_skipped: str = ""  # with skip_version_check: the refusal that was skipped ("" when the version fits)

    def diff(self) -> str:
        return "".join(f.diff() for f in self.files)

    def patch_bases(self) -> List[Path]:
        """The folders to run `git apply` or `patch -p1` in: the git checkouts tracking the files, else the root."""
        bases = [f.work_tree if f.tracked and f.work_tree else self.installed.root for f in self.files if f.changes]
        return sorted(set(bases))


def plan(settings: Settings, root: Optional[str] = None, skip_version_check: bool = False) -> Plan:
    """Find the files, pick the first candidate where every point resolves, transform it.

    ``skip_version_check`` lets a version outside the recipe's range through
    (the refusal is kept in ``Plan.version_skipped``); the points must still
    resolve in the files.
    """
    recipe = settings.recipe
    installed = locate(recipe.target, root)
    skipped = ""
    try:
        check_version(installed, recipe.target, recipe.id, recipe.path)
    except TargetError as exc:
        if not skip_version_check:
            raise
        skipped = exc.message
    seen: Dict[tuple, FilePlan] = {}  # each candidate is read and transformed once per plan
    chosen = _chosen(settings, installed, seen)
    result = Plan(settings, installed, [], skipped)
    for relpath, points in chosen.items():
        f = _file_plan(settings, installed, relpath, points, seen)
        if isinstance(f.result, CannotApply):  # two groups of points chose one file and do not fit together
            raise AnchorError(f.result.reason, Location(str(f.path), f.result.line, f.result.col),
                              f.result.hint or "this file does not have the shape the recipe expects")
        if work_tree(f.path) is not None:  # os.path only; gitrepo (and gitpython) only inside a git work tree
            from . import gitrepo

            top, tracked = gitrepo.checkout_of(f.path)
            f = f._replace(work_tree=top, tracked=tracked)
        result.files.append(f)
    return result


def _chosen(settings: Settings, installed: Installed, seen: Dict[tuple, FilePlan]) -> Dict[str, List[Point]]:
    """The file picked among each group of candidates (the first where all its points resolve), with its points."""
    groups: Dict[Tuple[str, ...], List[Point]] = {}
    for point in settings.active_points():
        groups.setdefault(point.files or settings.recipe.target.files, []).append(point)
    chosen: Dict[str, List[Point]] = {}
    for candidates, points in groups.items():
        chosen.setdefault(_choose(settings, installed, candidates, points, seen), []).extend(points)
    return chosen


def files_to_patch(settings: Settings, root: Optional[str] = None) -> Tuple[Installed, List[Path]]:
    """Where the recipe's package is and which of its files :func:`plan` would pick; reads, writes nothing, no git."""
    installed = locate(settings.recipe.target, root)
    check_version(installed, settings.recipe.target, settings.recipe.id, settings.recipe.path)
    return installed, [(installed.root / relpath).resolve() for relpath in _chosen(settings, installed, {})]


# patchkit's own import and the imports of its dependencies, with their distributions: a recipe that
# patches one of them makes every later patchkit command run, and profile, patchkit itself
OWN_DEPENDENCIES = {"patchkit": DISTRIBUTION, "click": "click", "yaml": "pyyaml", "libcst": "libcst", "git": "gitpython"}


def own_dependency(settings: Settings) -> Optional[str]:
    """The distribution, when the recipe's package is patchkit's own or one of its dependencies."""
    return OWN_DEPENDENCIES.get(settings.recipe.target.package)


def _file_plan(settings: Settings, installed: Installed, relpath: str, points: Sequence[Point],
               seen: Dict[tuple, FilePlan]) -> FilePlan:
    key = (relpath, tuple(map(id, points)))
    if key in seen:
        return seen[key]
    link = installed.root / relpath
    path = link.resolve()
    via = f"through symlink {link}" if path != link.absolute() else ""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TargetError(f"cannot read: {exc.strerror}", Location(str(path)), "check the file's permissions") from None
    text, encoding = decode(data, path)
    from . import engine  # the engine (and libcst) only for commands that transform

    outcome = engine.transform(text, settings, points, str(path))
    seen[key] = FilePlan(path, relpath, data, encoding, text, outcome, tuple(points), via)
    return seen[key]


def _choose(settings: Settings, installed: Installed, candidates: Sequence[str], points: List[Point],
            seen: Dict[tuple, FilePlan]) -> str:
    failures: List[Tuple[Path, CannotApply]] = []
    for relpath in candidates:
        if not (installed.root / relpath).is_file():
            continue
        f = _file_plan(settings, installed, relpath, points, seen)
        if not isinstance(f.result, CannotApply):
            return relpath
        failures.append((f.path, f.result))
    recipe = settings.recipe
    version = f"{recipe.target.distribution} {installed.shown or '(version unknown)'}"
    if not failures:
        raise TargetError(f"none of the recipe's files is in {installed.root}: {', '.join(candidates)}",
                          Location(recipe.path), f"is {version} the package this recipe is for?")
    path, why = failures[0]
    others = "".join(f"; {p.name}: {'the same' if w.reason == why.reason else w.reason}" for p, w in failures[1:])
    raise AnchorError(f"{why.reason}{others} ({version}; {recipe.id} supports {recipe.target.versions or 'any version'})",
                      Location(str(path), why.line, why.col),
                      why.hint or "this version's file has another shape; check `patchkit list` for a recipe that fits, "
                      "or adapt the recipe's points")


# ---------------------------------------------------------------- apply / revert / status

class FileOutcome(Record):
    path: Path
    relpath: str
    state: str  # patched, updated, already applied, reverted, edited, replaced, missing, not written, ...
    detail: str = ""
    git: str = ""  # what patchkit found or did in the git checkout holding the file


def diff(settings: Settings, root: Optional[str] = None, skip_version_check: bool = False) -> str:
    return plan(settings, root, skip_version_check).diff()


def apply(settings: Settings, root: Optional[str] = None, ledger: Optional[Ledger] = None, *,
          allow_dirty: bool = False, commit: bool = False, skip_version_check: bool = False,
          review: Optional[Callable[[List[FilePlan]], bool]] = None) -> List[FileOutcome]:
    """Patch every file of the recipe, or none of them.

    A file tracked by git with uncommitted changes (other than patchkit's own
    lines) is refused unless ``allow_dirty``.  ``commit`` commits the patch on
    a new branch ``patchkit/<recipe-id>`` (see :mod:`patchkit.gitrepo`).
    ``review`` is shown the files about to change, after every check and
    before anything is written; if it returns False nothing is written and
    those files come back as ``not written``.  ``skip_version_check``: see
    :func:`plan`.
    """
    from .engine import check_compiles
    from .ledger import AppliedRecipe, FileRecord, Ledger, sha256

    ledger = ledger or Ledger()
    with ledger.locked() as led:
        p = plan(settings, root, skip_version_check)
        notes = _check_git(settings, p, led, allow_dirty, commit)
        outcomes, writes, before = [], [], {}
        for f in p.files:
            if not f.changes:
                outcomes.append(FileOutcome(f.path, f.relpath, "already applied", f.via, notes.get(f.path, "")))
                continue
            _check_writable(f.path)
            broken = check_compiles(f.result.text, str(f.path))
            if broken is not None:
                raise AnchorError(broken.reason, Location(str(f.path), broken.line, broken.col),
                                  "please report this with the target file")
            new = f.new_bytes()
            key = str(f.path)
            rec = led.files.get(key)
            before[key] = rec.to_json() if rec is not None else None
            original = marks.strip(f.text).encode(f.encoding)
            if rec is not None and sha256(f.data) == rec.patched_sha256 and led.read_backup(rec.original_sha256) is not None:
                original_sha = rec.original_sha256  # the exact bytes from before the first recipe
            else:  # first patch of this file, or it changed since: its text without patchkit lines is the original
                original_sha = led.backup(original)
                rec = None
            if marks.strip(f.result.text).encode(f.encoding) != led.read_backup(original_sha):
                raise LedgerError("internal error: taking the patch out again would not give the original bytes; "
                                  "nothing was written", Location(key), "please report this with the target file")
            rec = rec or FileRecord(path=key, relpath=f.relpath, root=str(p.installed.root),
                                    distribution=settings.recipe.target.distribution, version=p.installed.shown,
                                    original_sha256=original_sha, patched_sha256="")
            state = "updated" if settings.id in rec.recipes or settings.id in marks.applied_ids(f.text) else "patched"
            rec.patched_sha256 = sha256(new)
            rec.version = p.installed.shown
            earlier = rec.recipes.get(settings.id)
            rec.recipes[settings.id] = AppliedRecipe(
                choices=dict(settings.choices), overrides=list(settings.overrides), backend=settings.recipe.backend,
                recipe_path=settings.recipe.path, applied_at=time.time(),
                git=earlier.git if earlier is not None else None)  # a --commit branch still to take out on revert
            led.files[key] = rec
            writes.append((f.path, f.data, new))
            detail = f"{len(f.result.insertions)} lines" + (f"; {f.via}" if f.via else "")
            outcomes.append(FileOutcome(f.path, f.relpath, state, detail, notes.get(f.path, "")))
        if writes and review is not None and not review([f for f in p.files if f.changes]):
            for key, record in before.items():  # nothing is saved; put the records back as they were
                if record is None:
                    led.files.pop(key, None)
                else:
                    led.files[key] = FileRecord.from_json(dict(record))
            return [o._replace(state="not written", detail="declined in review") if o.state in ("patched", "updated")
                    else o for o in outcomes]
        if writes:
            led.commit(writes, before)
            if commit:
                outcomes = _commit_patch(settings, led, p, writes, before, outcomes)
        return outcomes


def _check_git(settings: Settings, p: Plan, led: Ledger, allow_dirty: bool, commit: bool) -> Dict[Path, str]:
    """Refuse files with uncommitted changes (and a --commit that cannot be made); a note per file in a git work tree."""
    notes: Dict[Path, str] = {}
    dirty: List[str] = []
    changing = [f for f in p.files if f.changes]
    for f in p.files:
        if f.work_tree is None:
            continue
        if not f.tracked:
            notes[f.path] = f"in the git work tree {f.work_tree} but not tracked there: handled as a plain folder"
            continue
        from . import gitrepo

        branch, _ = gitrepo.head(f.work_tree)
        notes[f.path] = f"tracked in the git work tree {f.work_tree} (on {branch or 'a detached HEAD'})"
        code = gitrepo.uncommitted(f.path, f.work_tree) if f.changes else ""
        if not code:
            continue
        own = _only_patchkit_lines(f, code)
        if commit:
            dirty.append(f"{f.diffpath} (" + ("patchkit's lines from an apply without --commit: revert them first"
                                              if own else f"git status {code.strip()!r}") + ")")
        elif not (allow_dirty or own):
            dirty.append(f"{f.diffpath} (git status {code.strip()!r})")
    if dirty:
        raise TargetError(
            f"uncommitted changes in {', '.join(dirty)}; nothing was written", Location(str(changing[0].path)),
            "--commit commits only patchkit's lines: commit or stash your changes first" if commit else
            "commit or stash them first, or pass --allow-dirty (revert then gives back the file as it is now, "
            "uncommitted changes included)")
    if commit:
        _check_commit(settings, led, changing)
    return notes


def _only_patchkit_lines(f: FilePlan, code: str) -> bool:
    """The file's only uncommitted change is patchkit's own lines (applying again with new settings)."""
    from . import gitrepo

    return (code[0] == " " and bool(marks.applied_ids(f.text))
            and gitrepo.committed(f.path, f.work_tree) == marks.strip(f.text).encode(f.encoding))


def _check_commit(settings: Settings, led: Ledger, changing: List[FilePlan]) -> None:
    from . import gitrepo

    branch = gitrepo.BRANCH_PREFIX + settings.id
    for f in changing:
        if not f.tracked:
            raise TargetError(f"--commit: {f.path} is not tracked in a git work tree; nothing was written",
                              Location(str(f.path)), "apply without --commit")
        current, base = gitrepo.head(f.work_tree)
        if base is None:
            raise TargetError(f"--commit: {f.work_tree} has no commit yet to branch from; nothing was written",
                              Location(str(f.work_tree)), "commit the checkout first, or apply without --commit")
        tip = gitrepo.branch_tip(f.work_tree, branch)
        if tip is not None and not (current == branch and (_git_info(led, settings.id, [f]) or {}).get("commit") == tip):
            raise TargetError(f"--commit: the branch {branch} already exists in {f.work_tree}; nothing was written",
                              Location(str(f.work_tree)),
                              f"`patchkit revert {settings.id}` if patchkit made it, or delete it (git branch -D {branch})")


def _git_info(led: Ledger, recipe_id: str, files: Sequence[FilePlan]) -> Optional[dict]:
    for f in files:
        rec = led.files.get(str(f.path))
        applied = rec.recipes.get(recipe_id) if rec is not None else None
        if applied is not None and applied.git:
            return applied.git
    return None


def _commit_patch(settings: Settings, led: Ledger, p: Plan, writes, before, outcomes: List[FileOutcome]) -> List[FileOutcome]:
    """apply --commit, after the files are written: one commit per git work tree; on failure put everything back."""
    from . import gitrepo
    from .ledger import FileRecord

    branch = gitrepo.BRANCH_PREFIX + settings.id
    groups: Dict[Path, List[FilePlan]] = {}
    for f in p.files:
        if f.changes:
            groups.setdefault(f.work_tree, []).append(f)
    made: List[dict] = []
    said: Dict[Path, str] = {}
    try:
        for top, files in sorted(groups.items()):
            earlier = _git_info(led, settings.id, files)  # applying again on patchkit's branch: one more commit on it
            if not earlier:  # recorded before git runs, so a revert after a killed apply still finds the branch
                current, base = gitrepo.head(top)
                intent = {"work_tree": str(top), "branch": branch, "commit": None, "previous": current,
                          "previous_commit": base, "files": sorted(f.diffpath for f in files)}
                for f in files:
                    led.files[str(f.path)].recipes[settings.id].git = intent
                led.save()
            info = gitrepo.commit_on_branch(top, branch, [f.diffpath for f in files], _commit_message(settings, branch, files))
            made.append(info)
            kept = {k: v for k, v in info.items() if k != "made"}
            if earlier:
                kept.update(previous=earlier["previous"], previous_commit=earlier["previous_commit"],
                            files=sorted(set(earlier["files"]) | set(info["files"])))
            for f in files:
                led.files[str(f.path)].recipes[settings.id].git = kept
                said[f.path] = f"committed {info['commit'][:10]} on the new branch {branch} (was on " \
                               f"{info['previous'] or 'a detached HEAD'})" if info["made"] else \
                               f"committed {info['commit'][:10]} on {branch}"
    except PatchkitError:
        after = {str(path): led.files[str(path)].to_json() for path, _old, _new in writes}
        for key, record in before.items():
            if record is None:
                led.files.pop(key, None)
            else:
                led.files[key] = FileRecord.from_json(dict(record))
        led.commit([(path, new, old) for path, old, new in writes], after)
        for info in reversed(made):
            try:
                gitrepo.undo_commit(info)
            except PatchkitError:  # the files are back; the error below is the one to fix first
                pass
        raise
    led.save()
    return [o._replace(git=said.get(o.path, o.git)) for o in outcomes]


def _commit_message(settings: Settings, branch: str, files: Sequence[FilePlan]) -> str:
    def show(value) -> str:
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(map(show, value)) + "]"
        return str(value).lower() if isinstance(value, bool) else str(value)

    lines = [f"patchkit: apply {settings.id}", "", f"recipe: {settings.id}", f"backend: {settings.recipe.backend}"]
    if settings.choices:
        lines.append("options: " + " ".join(f"{k}={v}" for k, v in settings.choices))
    if settings.overrides:
        lines.append("command line: " + " ".join(settings.overrides))
    lines.append("settings:")
    lines += [f"  {k}: {show(v)}" for k, v in settings.runtime_settings().items() if k != "backend"]
    lines.append("files:")
    lines += [f"  {f.diffpath}" for f in files]
    lines += ["", f"Made by `patchkit apply --commit`; `patchkit revert {settings.id}` removes this commit and {branch}."]
    return "\n".join(lines) + "\n"


def _check_writable(path: Path) -> None:
    if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        raise TargetError("the file (or its folder) is not writable", Location(str(path)),
                          "run patchkit as the user who owns the installation, or use a writable copy with --root")


def revert(recipe_ids: Iterable[str] = (), everything: bool = False, root: Optional[str] = None,
           ledger: Optional[Ledger] = None, force: bool = False) -> List[FileOutcome]:
    """Take recipes out again: exact original bytes where the file is as patchkit left it.

    Patchkit lines no record explains (applied under another ``PATCHKIT_HOME``)
    in the built-in recipes' files, under ``root`` (default ``$PATCHKIT_ROOT``)
    or in this environment, are taken out too: there is no backup, so their
    marked lines are removed from the file.
    """
    ids = set(recipe_ids)
    if not ids and not everything:
        raise PatchkitError("say which recipes to revert, or --all", hint="patchkit revert RECIPE... or patchkit revert --all")
    from .ledger import Ledger, sha256

    ledger = ledger or Ledger()
    outcomes, writes, before = [], [], {}
    commits: Dict[tuple, dict] = {}  # (work tree, branch) -> what apply --commit made, to take out after the files
    with ledger.locked() as led:
        base = str(Path(root).expanduser().resolve()) if root else None
        for key, rec in sorted(led.files.items()):
            if base and not key.startswith(base.rstrip(os.sep) + os.sep):
                continue
            gone = set(rec.recipes) if everything else ids & set(rec.recipes)
            if not gone:
                continue
            before[key] = rec.to_json()
            for rid in sorted(gone):
                info = rec.recipes[rid].git
                if info:
                    commits.setdefault((info["work_tree"], info["branch"]), info)
            outcome, change = _revert_file(led, rec, gone, force)
            outcomes.append(outcome)
            if change is not None:
                writes.append(change)
                rec.patched_sha256 = sha256(change[2])
            for rid in gone:
                rec.recipes.pop(rid, None)
            if not rec.recipes:
                led.files.pop(key)
        outcomes += _revert_unrecorded(led, ids, everything, root, force, writes, before)
        if ids and not outcomes:
            raise LedgerError(f"nothing to revert: {', '.join(sorted(ids))} is not applied"
                              + (f" under {root}" if root else ""), hint="see `patchkit status`")
        if before or writes:
            led.commit(writes, before)
        if commits:
            outcomes = _drop_commits(list(commits.values()), outcomes)
    return outcomes


def _revert_unrecorded(led: Ledger, ids: set, everything: bool, root: Optional[str], force: bool,
                       writes: list, before: dict) -> List[FileOutcome]:
    """Take out the patchkit lines no record explains, from the bytes the records' part of the revert leaves.

    Adds to (or changes) ``writes``; a record that stays on the file gets its new patched hash.
    """
    from . import unrecorded
    from .ledger import sha256

    planned = {str(path): i for i, (path, _old, _new) in enumerate(writes)}
    explained = {key: tuple(rec.recipes) for key, rec in led.files.items()}

    def current(path: Path) -> Optional[bytes]:  # what the records' part is about to write there, if anything
        return writes[planned[str(path)]][2] if str(path) in planned else None

    outcomes = []
    for f in unrecorded.find(explained, root, current):
        gone = f.recipes if everything else tuple(rid for rid in f.recipes if rid in ids)
        if not gone:
            continue
        key = str(f.path)
        rec = led.files.get(key)
        state, new = unrecorded.take_out(f, gone, rec is None and set(gone) == set(f.recipes), force)
        _check_writable(f.path)
        if key in planned:
            writes[planned[key]] = (writes[planned[key]][0], writes[planned[key]][1], new)
        else:
            planned[key] = len(writes)
            writes.append((f.path, f.data, new))
        if rec is not None:  # a recipe this ledger records stays in the file
            before.setdefault(key, rec.to_json())
            rec.patched_sha256 = sha256(new)
        top = work_tree(f.path)  # without a record there is no apply --commit branch to take out: say so
        branches = " or ".join(f"patchkit/{rid}" for rid in gone)
        note = (f"in the git work tree {top}: only the file's content is put back; a branch {branches} that "
                "`apply --commit` made under another PATCHKIT_HOME stays (git branch -D it)") if top is not None else ""
        outcomes.append(FileOutcome(f.path, f.relpath, state, ",".join(gone), note))
    return outcomes


def _drop_commits(infos: List[dict], outcomes: List[FileOutcome]) -> List[FileOutcome]:
    """Take out apply --commit's commits, the one checked out first (so stacked branches unwind in order)."""
    from . import gitrepo

    def checked_out(info: dict) -> bool:
        try:
            return gitrepo.head(Path(info["work_tree"]))[0] == info["branch"]
        except PatchkitError:
            return False

    said: Dict[Path, List[str]] = {}
    while infos:
        info = ([i for i in infos if checked_out(i)] or infos)[0]
        infos.remove(info)
        try:
            note = gitrepo.drop_commit(info)
        except PatchkitError as exc:  # the files are already back; say what is left to do in git
            note = f"could not take out {info['branch']}: {exc.message}"
        for relpath in info.get("files", []):
            said.setdefault(Path(info["work_tree"], relpath), []).append(note)
    return [o._replace(git="; ".join(said.get(Path(o.path), []))) for o in outcomes]


def _revert_file(led: Ledger, rec: FileRecord, gone: set, force: bool):
    """What to do with one file: an outcome, and ``(path, old, new)`` when it is to be written."""
    from .ledger import sha256

    path = Path(rec.path)
    label = ",".join(sorted(gone))
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return FileOutcome(path, rec.relpath, "missing", label), None
    digest = sha256(data)
    if digest == rec.original_sha256:
        return FileOutcome(path, rec.relpath, "already original", label), None
    text, encoding = decode(data, path)
    if not any(rid in marks.applied_ids(text) for rid in gone):
        return FileOutcome(path, rec.relpath, "replaced", label), None  # reinstalled or upgraded: leave it alone
    edited = digest != rec.patched_sha256
    everything = not set(rec.recipes) - gone
    backup = led.read_backup(rec.original_sha256)
    if everything and backup is not None and (not edited or force):
        state = "reverted" if not edited else "reverted, edits discarded (--force)"
        return FileOutcome(path, rec.relpath, state, label), (path, data, backup)
    new = text
    for rid in gone:
        new = marks.strip(new, rid)
    leftover = marks.leftover(text, gone, everything)
    if leftover and not force:
        raise LedgerError(f"line {leftover[0]} still refers to patchkit after its marked lines are taken out "
                          f"(edited by hand?): {leftover[1].strip()[:80]}", Location(str(path), leftover[0]),
                          "remove that line yourself, or run `patchkit revert --force` to "
                          + ("restore the original file" if everything and backup is not None else "take out only the marked lines"))
    state = "reverted, edits kept" if edited else "reverted"
    if backup is None and everything:
        state += " (backup missing: marked lines taken out)"
    return FileOutcome(path, rec.relpath, state, label), (path, data, new.encode(encoding))


# ---------------------------------------------------------------- recipe examples

class ExampleOutcome(Record):
    recipe: str
    example: Example
    ok: bool
    message: str = ""


def run_examples(settings: Settings) -> List[ExampleOutcome]:
    recipe = settings.recipe
    out = []
    for ex in recipe.examples:
        chosen = load_recipe(Path(recipe.path), [f"{k}={v}" for k, v in ex.options], check_id=False) if ex.options else settings
        out.append(ExampleOutcome(recipe.id, ex, *_check_example(chosen, ex)))
    return out


def example_points(settings: Settings, source: str) -> Optional[List[Point]]:
    """An example is one file: of a recipe's points in several files, those whose class (or function) it defines."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    classes = {n.name for n in body if isinstance(n, ast.ClassDef)}
    functions = {n.name for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return [p for p in settings.active_points()
            if (p.cls in classes if p.cls is not None else p.method in functions)] or None


def _check_example(settings: Settings, ex: Example) -> Tuple[bool, str]:
    from .codegen import header_lines
    from .engine import transform

    points = example_points(settings, ex.before)
    result = transform(ex.before, settings, points)
    if ex.after is None:
        if not isinstance(result, CannotApply):
            return False, "expected the input to stay unchanged, but the recipe applied"
        if ex.reason and ex.reason not in result.reason:
            return False, f"expected the reason to mention {ex.reason!r}, got {result.reason!r}"
        return True, result.reason
    if not isinstance(result, Applied):
        return False, f"expected a change, got: {getattr(result, 'reason', 'already applied')}"
    header = set(header_lines(settings))
    got = "".join(ln for ln in marks.split_lines(result.text) if ln.rstrip("\r\n") not in header)
    if got != ex.after:
        import difflib

        d = "".join(difflib.unified_diff(marks.split_lines(ex.after), marks.split_lines(got), "expected", "got"))
        return False, "the output differs from `after`:\n" + d
    again = transform(result.text, settings, points)
    if not isinstance(again, AlreadyApplied):
        return False, "applying twice changed the file again"
    if marks.strip(result.text) != ex.before:
        return False, "taking patchkit's lines out does not give the input back"
    return True, ""
