"""One error hierarchy: every error the user can fix has a place, a message and a hint.

An error prints as ``PATH:LINE:COL: message`` followed by one line saying
what to do.  The command line turns any :class:`PatchkitError` into exit
status 1 and prints no traceback unless ``--debug`` is given.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional


class Location(NamedTuple):
    """A place in a file (recipe or target). Line and column are 1-based."""

    path: str
    line: Optional[int] = None
    col: Optional[int] = None

    def __str__(self) -> str:
        if self.line is None:
            return self.path
        if self.col is None:
            return f"{self.path}:{self.line}"
        return f"{self.path}:{self.line}:{self.col}"


class PatchkitError(Exception):
    """Base of every error the user can act on."""

    title = "error"
    exit_code = 1

    def __init__(self, message: str, where: Optional[Location] = None, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.where = where
        self.hint = hint
        self.warnings: List[str] = []  # said before the error (what a skipped check let through on the way to it)

    def render(self) -> str:
        """The error as printed; a path or name from someone else's file cannot put a control character on the
        terminal (its line breaks stay)."""
        from patchkit.core.printable import printable

        head = f"{self.where}: {self.message}" if self.where else self.message
        return printable(f"{head}\n  hint: {self.hint}" if self.hint else head, keep="\n")


class RecipeError(PatchkitError):
    """The recipe file (or an override) is malformed."""

    title = "bad recipe"


class OverrideError(RecipeError):
    """A KEY=VALUE override on the command line is not valid."""

    title = "bad override"


class TargetError(PatchkitError):
    """The package or file a recipe targets cannot be found or is the wrong version."""

    title = "target not found"


class AnchorError(PatchkitError):
    """A recipe's injection point does not resolve in the target file."""

    title = "cannot apply"


class LedgerError(PatchkitError):
    """The state under PATCHKIT_HOME is inconsistent, or a file drifted."""

    title = "ledger"


class LockedError(LedgerError):
    """Another patchkit process holds the lock."""

    title = "locked"


class TraceError(PatchkitError):
    """A trace, a torch_npu capture or a manifest cannot be read, or the tool that reads it is missing."""

    title = "bad trace"
