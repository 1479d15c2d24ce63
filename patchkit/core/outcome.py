"""What apply and revert did to each file, and what status found: named states, not prose.

Each state is a ``str``-valued Enum member whose value is the text patchkit
prints (and ``status --json`` writes), so what users' scripts read stays the
same while code compares members::

    if outcome.state is Outcome.NOT_WRITTEN: ...
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import List, NamedTuple, Optional, Tuple


class Shown(str, enum.Enum):
    """A state whose value is the text shown for it: ``str()``, f-strings and JSON give that text."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Outcome(Shown):
    """What apply or revert did to one file."""

    PATCHED = "patched"
    UPDATED = "updated"  # patched again, with other settings or another recipe's lines kept
    ALREADY_APPLIED = "already applied"
    NOT_WRITTEN = "not written"  # apply --interactive: declined in review, so no file was written
    REVERTED = "reverted"
    REVERTED_EDITS_KEPT = "reverted, edits kept"  # edited since apply: only patchkit's lines taken out
    REVERTED_EDITS_DISCARDED = "reverted, edits discarded (--force)"
    REVERTED_BACKUP_MISSING = "reverted (backup missing: marked lines taken out)"
    REVERTED_EDITS_KEPT_BACKUP_MISSING = "reverted, edits kept (backup missing: marked lines taken out)"
    REVERTED_NO_RECORD = "reverted without a backup (no record; marked lines taken out)"
    NOT_PATCHKITS = "left alone (its marked lines are not patchkit's)"  # no line of the recipes is one patchkit wrote
    ALREADY_ORIGINAL = "already original"
    REPLACED = "replaced"  # reinstalled or upgraded since apply: left alone
    MISSING = "missing"

    @property
    def written(self) -> bool:
        """apply wrote the file."""
        return self in (Outcome.PATCHED, Outcome.UPDATED)


class Status(Shown):
    """What status finds in one file."""

    APPLIED = "applied"
    EDITED = "edited since apply"
    REPLACED = "replaced (reinstalled?)"
    REVERTED_OUTSIDE = "reverted outside patchkit"
    MISSING = "missing"
    UNREADABLE = "not read (a link on the way, not a plain file, or too large)"
    NO_RECORD = "applied (no record)"  # patchkit lines no record of this PATCHKIT_HOME explains
    INTERRUPTED = "interrupted"  # a change a stopped patchkit left half-written; the next apply or revert ends it


class FileOutcome(NamedTuple):
    path: Path
    relpath: str
    state: Outcome
    detail: str = ""  # apply: how many lines, and a symlink followed; revert: the recipes taken out
    git: str = ""  # what patchkit found or did in the git checkout holding the file
    kept_line: Optional[int] = None  # revert --force without a record: the hand-edited line left in the file
    foreign: Tuple[Tuple[int, str], ...] = ()  # revert: (line, recipe id) of marked lines kept: patchkit did not write them

    @property
    def label(self) -> str:
        """The state as patchkit reports it, with the lines revert kept."""
        return self.state.value + (f"; line {self.kept_line} kept (--force)" if self.kept_line else "") + "".join(
            f"; line {line} kept: it ends in `# patchkit:{rid}`, but patchkit did not write it"
            for line, rid in self.foreign)

    def kept_notes(self) -> List[str]:
        """For each marked line revert kept: where it is, why, and what to do."""
        return [f"{self.path}:{line}: kept: it ends in `# patchkit:{rid}`, but patchkit did not write it (someone's "
                f"own line, or an edit), so revert leaves it; if it is yours, change the comment (e.g. to "
                f"`# patchkit {rid}`) so patchkit stops reading it as its own line, else delete it"
                for line, rid in self.foreign]
