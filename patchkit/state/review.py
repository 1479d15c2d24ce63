"""The git side of apply and revert: refuse uncommitted changes, and ``apply --commit``'s branch.

A target file tracked in a git checkout is refused when it has changes of
the user's own (unless ``--allow-dirty``): revert gives back the bytes from
before apply, and those would undo them.  ``--commit`` commits the patch on
a new branch ``patchkit/<recipe-id>`` once the files are written, and revert
takes that commit and branch out again (see :mod:`patchkit.state.gitrepo`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

from patchkit.state import gitrepo
from patchkit.engine import marks
from patchkit.core.errors import Location, PatchkitError, TargetError
from patchkit.core.model import Settings
from patchkit.core.outcome import FileOutcome
from patchkit.state.planning import FilePlan, Plan

if TYPE_CHECKING:
    from patchkit.state.ledger import Ledger


def check_git(settings: Settings, p: Plan, led: Ledger, allow_dirty: bool, commit: bool) -> Dict[Path, str]:
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
    return (code[0] == " " and bool(marks.applied_ids(f.text))
            and gitrepo.committed(f.path, f.work_tree) == marks.strip(f.text).encode(f.encoding))


def _check_commit(settings: Settings, led: Ledger, changing: List[FilePlan]) -> None:
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


def commit_patch(settings: Settings, led: Ledger, p: Plan, writes, before: Dict[str, Optional[dict]],
                 outcomes: List[FileOutcome]) -> List[FileOutcome]:
    """apply --commit, after the files are written: one commit per git work tree; on failure put everything back.

    ``writes`` and ``before`` are what apply gave :meth:`Ledger.commit`: the
    files' ``(path, old, new)`` bytes and their records from before.
    """
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
        led.restore_records(before)
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


def drop_commits(infos: List[dict], outcomes: List[FileOutcome]) -> List[FileOutcome]:
    """Take out apply --commit's commits, the one checked out first (so stacked branches unwind in order)."""
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
