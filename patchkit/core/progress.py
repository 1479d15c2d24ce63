"""How long work says how far it got, without printing: a count of units done out of a total, stage by stage.

The layers below the command line never print.  A function whose work can
take long (copying traces, reading a large one, waiting for the nodes of a
cluster or for a running job's answers) takes an optional ``progress`` and
tells it, as the work goes, how much there is (:meth:`Progress.start`) and
how much more is done (:meth:`Progress.advance`).  The command line hands in
a bar on a terminal (:mod:`patchkit.cli.progress`), or nothing:
:func:`given` turns nothing into :data:`SILENT`.

Standard library only: the runtime uses it too (``patchkit capture`` waits there).
"""

from __future__ import annotations

from typing import Optional, Protocol

BYTES = "bytes"  # the unit of a stage counted in bytes; any other unit is a count of things


class Progress(Protocol):
    """What a long function tells whoever watches it."""

    def start(self, total: int, label: str, unit: str = "") -> None:
        """A new stage: ``total`` units to do (``unit`` :data:`BYTES`, or a plural noun: "nodes", "files")."""

    def advance(self, n: int = 1, item: str = "") -> None:
        """``n`` more units done; ``item`` says in a few words what is being worked on now ("" keeps the last)."""


class Silent:
    """A :class:`Progress` that tells nobody: the default of every function that takes one."""

    def start(self, total: int, label: str, unit: str = "") -> None:
        pass

    def advance(self, n: int = 1, item: str = "") -> None:
        pass


SILENT = Silent()


def given(progress: Optional[Progress]) -> Progress:
    """``progress``, or :data:`SILENT` for None."""
    return SILENT if progress is None else progress
