"""Apply and revert: every file of a change is written, or none, and each file's outcome is reported.

Both run under the ledger's lock.  Apply checks everything before writing
(the git checkout, write access, that the patched text compiles, that
taking the lines out again gives the original bytes), backs the originals
up, records them, and only then writes all files as one transaction
(:meth:`patchkit.state.ledger.Ledger.commit`).  Revert gives back the exact
original bytes where a file is as patchkit left it, else takes out only
the marked lines patchkit writes: a line that ends in the marker but is
someone's own stays, and its outcome names it.  A file back to its original
bytes gets back the compiled copies apply deleted (:mod:`.compiled`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, Iterable, List, Optional

from patchkit.state import compiled, gitrepo
from patchkit.engine import marks
from patchkit.core.errors import AnchorError, LedgerError, Location, PatchkitError, TargetError
from patchkit.core.model import Settings
from patchkit.core.outcome import FileOutcome, Outcome
from patchkit.state.planning import FilePlan, Plan, plan
from patchkit.state.review import check_git, commit_patch, drop_commits

if TYPE_CHECKING:  # the ledger (hashlib, tempfile, json) is imported when a command runs
    from patchkit.state.ledger import FileRecord, Ledger

Writes = List[tuple]  # (path, old bytes, new bytes) of each file to write
Before = Dict[str, Optional[dict]]  # each changed record as it was (None: the file had none)
TRIES = 3  # plans of one apply when another program keeps writing a target file meanwhile


def apply(settings: Settings, root: Optional[str] = None, ledger: Optional[Ledger] = None, *,
          allow_dirty: bool = False, commit: bool = False, skip_version_check: bool = False,
          strict_versions: Optional[bool] = None, review: Optional[Callable[[List[FilePlan]], bool]] = None,
          planned: Optional[Callable[[Plan], None]] = None) -> List[FileOutcome]:
    """Patch every file of the recipe, or none of them.

    A file tracked by git with uncommitted changes (other than patchkit's own
    lines) is refused unless ``allow_dirty``.  ``commit`` commits the patch on
    a new branch ``patchkit/<recipe-id>`` (see :mod:`patchkit.state.review`).
    ``review`` is shown the files about to change, after every check and
    before anything is written; if it returns False nothing is written and
    those files come back as :attr:`Outcome.NOT_WRITTEN`.  ``skip_version_check``
    and ``strict_versions``: see :func:`patchkit.state.planning.plan`.  ``planned`` is given the plan as soon
    as it is made, before any check or write (the command line says what it skipped).
    """
    from patchkit.state.ledger import Ledger
    from patchkit.state.targetfile import Changed

    ledger = ledger or Ledger()
    args = (settings, root, ledger, allow_dirty, commit, (skip_version_check, strict_versions), review, planned)
    for _ in range(TRIES - 1):
        try:
            return _apply(*args)
        except Changed:  # another program wrote a target file while it was planned: nothing was written, plan again
            continue
    return _apply(*args)


def _apply(settings, root, ledger, allow_dirty, commit, versions, review, planned) -> List[FileOutcome]:
    with ledger.locked() as led:
        p = plan(settings, root, *versions)
        if planned is not None:
            planned(p)
        notes = check_git(settings, p, led, allow_dirty, commit)
        writes: Writes = []
        before: Before = {}
        outcomes = [_stage(settings, p, f, led, writes, before)._replace(git=notes.get(f.path, "")) for f in p.files]
        if not writes:
            return outcomes
        if review is not None and not review([f for f in p.files if f.changes]):
            led.restore_records(before)  # nothing is saved or written
            return [o._replace(state=Outcome.NOT_WRITTEN, detail="declined in review") if o.state.written else o
                    for o in outcomes]
        led.commit(writes, before)
        return commit_patch(settings, led, p, writes, before, outcomes) if commit else outcomes


def _stage(settings: Settings, p: Plan, f: FilePlan, led: Ledger, writes: Writes, before: Before) -> FileOutcome:
    """Check one planned file, back its original up and record the change (in memory); its write is queued."""
    from patchkit.engine.codemod import check_compiles
    from patchkit.state.ledger import AppliedRecipe, FileRecord, sha256

    if not f.changes:
        return FileOutcome(f.path, f.relpath, Outcome.ALREADY_APPLIED, f.via)
    _check_writable(f.path)
    broken = check_compiles(f.result.text, str(f.path))
    if broken is not None:
        raise AnchorError(broken.reason, Location(str(f.path), broken.line, broken.col),
                          "please report this with the target file")
    new = f.new_bytes()
    key = str(f.path)
    rec = led.files.get(key)
    before[key] = rec.to_json() if rec is not None else None
    if rec is not None and sha256(f.data) == rec.patched_sha256 and led.read_backup(rec.original_sha256) is not None:
        original_sha = rec.original_sha256  # the exact bytes from before the first recipe
    else:  # first patch of this file, or it changed since: its text without patchkit lines is the original
        original_sha = led.backup(marks.strip(f.text).encode(f.encoding))
        rec = None
    if marks.strip(f.result.text).encode(f.encoding) != led.read_backup(original_sha):
        raise LedgerError("internal error: taking the patch out again would not give the original bytes; "
                          "nothing was written", Location(key), "please report this with the target file")
    rec = rec or FileRecord(path=key, relpath=f.relpath, root=str(p.installed.root),
                            distribution=settings.recipe.target.distribution, version=p.installed.shown,
                            original_sha256=original_sha, patched_sha256="",
                            compiled=compiled.back_up(f.path, led.backup))  # the copies the write deletes
    again = settings.id in rec.recipes or settings.id in marks.applied_ids(f.text)
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
    return FileOutcome(f.path, f.relpath, Outcome.UPDATED if again else Outcome.PATCHED, detail)


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
    from patchkit.state.ledger import Ledger, sha256

    ledger = ledger or Ledger()
    outcomes, writes, before, copies = [], [], {}, []
    commits: Dict[tuple, dict] = {}  # (work tree, branch) -> what apply --commit made, to take out after the files
    with ledger.locked() as led:
        for key, rec in sorted(led.files.items()):
            if not rec.under(root):
                continue
            gone = set(rec.recipes) if everything else ids & set(rec.recipes)
            if not gone:
                continue
            before[key] = rec.to_json()
            for rid in sorted(gone):
                info = rec.recipes[rid].git
                if info:
                    commits.setdefault((info["work_tree"], info["branch"]), info)
            outcome, change = _revert_file(led, rec, gone, force, everything)
            outcomes.append(outcome)
            if change is not None and rec.compiled and sha256(change[2]) == rec.original_sha256:
                copies.append((rec.path, rec.original_sha256, rec.compiled, {  # read before the backups may go
                    c["sha256"]: led.read_backup(c["sha256"]) for c in rec.compiled["files"]}))
            if change is not None:
                writes.append(change)
                rec.patched_sha256 = sha256(change[2])
            for rid in gone:
                rec.recipes.pop(rid, None)
            if not rec.recipes:
                led.files.pop(key)
        outcomes += _revert_unrecorded(led, ids, everything, root, force, writes, before)
        if ids and all(o.state is Outcome.NOT_PATCHKITS for o in outcomes):
            raise _not_applied(ids, root, outcomes)
        if before or writes:
            led.commit(writes, before)
        compiled.put_back_where_original(copies)
        if commits:
            outcomes = drop_commits(list(commits.values()), outcomes)
    return outcomes


def _not_applied(ids: set, root: Optional[str], outcomes: List[FileOutcome]) -> LedgerError:
    """Nothing of ``ids`` to revert; where only someone's own lines end in their marker, the first of them."""
    message = f"nothing to revert: {', '.join(sorted(ids))} is not applied" + (f" under {root}" if root else "")
    if not outcomes:
        return LedgerError(message, hint="see `patchkit status`")
    o = outcomes[0]
    line, rid = o.foreign[0]
    return LedgerError(f"{message}: this line ends in `# patchkit:{rid}`, but patchkit did not write it, so revert "
                       "leaves it", Location(str(o.path), line),
                       f"if it is yours, change the comment (e.g. to `# patchkit {rid}`) so patchkit stops reading "
                       "it as its own line, else delete it")


def _revert_file(led: Ledger, rec: FileRecord, gone: set, force: bool, asked_all: bool = False):
    """What to do with one file: an outcome, and ``(path, old, new)`` when it is to be written.  The outcome names
    the marked lines kept because patchkit did not write them: of ``gone``, or of any recipe when ``asked_all``."""
    from patchkit.state.ledger import sha256

    from patchkit.state.targetfile import read_target

    path = Path(rec.path)
    label = ",".join(sorted(gone))
    try:
        data = read_target(path)
    except FileNotFoundError:
        return FileOutcome(path, rec.relpath, Outcome.MISSING, label), None
    digest = sha256(data)
    if digest == rec.original_sha256:
        return FileOutcome(path, rec.relpath, Outcome.ALREADY_ORIGINAL, label), None
    text, encoding = marks.decode(data, path)
    edited = digest != rec.patched_sha256
    # The ledger vouches for every marked line of the bytes patchkit wrote; in other bytes a line is patchkit's
    # only where patchkit writes such lines: someone's own line ending in the marker stays, and is reported.
    if not any(rid in (marks.written_ids(text) if edited else marks.applied_ids(text)) for rid in gone):
        foreign = tuple((n, rid) for n, _col, rid in marks.foreign_lines(text) if asked_all or rid in gone)
        return FileOutcome(path, rec.relpath, Outcome.REPLACED, label, foreign=foreign), None  # reinstalled
    everything = not set(rec.recipes) - gone
    backup = led.read_backup(rec.original_sha256)
    if everything and backup is not None and (not edited or force):
        state = Outcome.REVERTED_EDITS_DISCARDED if edited else Outcome.REVERTED
        return FileOutcome(path, rec.relpath, state, label), (path, data, backup)
    if edited:
        new, kept = marks.take_out(text, gone)
    else:
        new, kept = text, []
        for rid in gone:
            new = marks.strip(new, rid)
    kept = tuple((n, rid) for n, rid in kept if asked_all or rid in gone)
    leftover = marks.leftover(text, gone, everything)
    if leftover and not force:
        raise LedgerError(f"line {leftover[0]} still refers to patchkit after its marked lines are taken out "
                          f"(edited by hand?): {leftover[1].strip()[:80]}", Location(str(path), leftover[0]),
                          "remove that line yourself, or run `patchkit revert --force` to "
                          + ("restore the original file" if everything and backup is not None else "take out only the marked lines"))
    broken = _breaks(text, new, path)
    if broken is not None:
        raise LedgerError(f"taking patchkit's lines out would leave a file that does not compile ({broken[1]}); "
                          "nothing was written", Location(str(path), broken[0]),
                          "the lines around it were edited by hand (a formatter?): put patchkit's lines back as "
                          "apply wrote them, or fix the file by hand"
                          + ("; `patchkit revert --force` restores the original file" if everything and backup is not None
                             else ""))
    if backup is None and everything:
        state = Outcome.REVERTED_EDITS_KEPT_BACKUP_MISSING if edited else Outcome.REVERTED_BACKUP_MISSING
    else:
        state = Outcome.REVERTED_EDITS_KEPT if edited else Outcome.REVERTED
    return FileOutcome(path, rec.relpath, state, label, foreign=kept), (path, data, new.encode(encoding))


def _breaks(before: str, after: str, path: Path):
    """``(line, message)`` when ``after`` does not compile but ``before`` (the file on disk) does, else None."""
    try:
        compile(after, str(path), "exec", dont_inherit=True)
        return None
    except (SyntaxError, ValueError) as exc:
        failure = (getattr(exc, "lineno", None), getattr(exc, "msg", str(exc)))
    try:
        compile(before, str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None  # it did not compile before patchkit's lines come out either: not patchkit's to judge
    return failure


def _revert_unrecorded(led: Ledger, ids: set, everything: bool, root: Optional[str], force: bool,
                       writes: Writes, before: Before) -> List[FileOutcome]:
    """Take out the patchkit lines no record explains, from the bytes the records' part of the revert leaves.

    Adds to (or changes) ``writes``; a record that stays on the file gets its new patched hash.
    """
    from patchkit.state import unrecorded
    from patchkit.state.ledger import sha256

    planned = {str(path): i for i, (path, _old, _new) in enumerate(writes)}
    explained = {key: tuple(rec.recipes) for key, rec in led.files.items()}
    handled = set(before)  # the records' part named their kept marked lines already

    def current(path: Path) -> Optional[bytes]:  # what the records' part is about to write there, if anything
        return writes[planned[str(path)]][2] if str(path) in planned else None

    outcomes = []
    for f in unrecorded.find(explained, root, current):
        key = str(f.path)
        gone = f.recipes if everything else tuple(rid for rid in f.recipes if rid in ids)
        if not gone:
            mine = tuple((n, rid) for n, rid in f.foreign if everything or rid in ids) if key not in handled else ()
            if mine:  # marked lines, none of them patchkit's: left alone, and said
                label = ",".join(sorted({rid for _, rid in mine}))
                outcomes.append(FileOutcome(f.path, f.relpath, Outcome.NOT_PATCHKITS, label, foreign=mine))
            continue
        rec = led.files.get(key)
        new, kept_line, kept = unrecorded.take_out(f, gone, rec is None and set(gone) == set(f.recipes), force)
        kept = [(n, rid) for n, rid in kept if (everything or rid in gone) and key not in handled]
        _check_writable(f.path)
        if key in planned:
            writes[planned[key]] = (writes[planned[key]][0], writes[planned[key]][1], new)
        else:
            planned[key] = len(writes)
            writes.append((f.path, f.data, new))
        if rec is not None:  # a recipe this ledger records stays in the file
            before.setdefault(key, rec.to_json())
            rec.patched_sha256 = sha256(new)
        top = gitrepo.work_tree(f.path)  # without a record there is no apply --commit branch to take out: say so
        branches = " or ".join(f"patchkit/{rid}" for rid in gone)
        note = (f"in the git work tree {top}: only the file's content is put back; a branch {branches} that "
                "`apply --commit` made under another PATCHKIT_HOME stays (git branch -D it)") if top is not None else ""
        outcomes.append(FileOutcome(f.path, f.relpath, Outcome.REVERTED_NO_RECORD, ",".join(gone), note, kept_line,
                                    tuple(kept)))
    return outcomes
