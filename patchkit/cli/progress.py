"""A progress bar on stderr when stderr is a terminal, else nothing: the one place commands get theirs.

A command that waits long hands ``bar(...)``'s answer to the layer below as
its ``progress`` (:class:`patchkit.core.progress.Progress`)::

    with bar(enabled=not as_json) as progress:
        result = summarise(path, progress)

Piped, redirected, or with ``--json`` it is None: nothing is drawn and the
output is what it was without it.  On a terminal each stage the work starts
is one click progress bar, drawn on stderr and finished (its last count
shown) before the next stage or the command's own output; stdout is never
written to.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Iterator, Optional

import click

from patchkit.core.printable import printable
from patchkit.core.progress import BYTES, Progress

EVERY = 0.1  # seconds between two drawings of a bar (a large trace advances thousands of times a second)


def stream():
    """Where bars are drawn: this command's stderr (the one click's ``echo(err=True)`` writes to)."""
    return sys.stderr


def size_text(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


class Bar:
    """A :class:`~patchkit.core.progress.Progress` drawn with ``click.progressbar``: one bar per stage."""

    def __init__(self, file) -> None:
        self.file = file
        self._bar = None
        self._unit, self._item, self._pending, self._drawn = "", "", 0, 0.0

    def start(self, total: int, label: str, unit: str = "") -> None:
        self.close()
        self._unit, self._item, self._pending = unit, "", 0
        self._bar = click.progressbar(length=max(int(total), 0), label=label, file=self.file, show_eta=True,
                                      show_pos=unit != BYTES, show_percent=True, item_show_func=self._info)
        self._bar.__enter__()
        self._drawn = time.monotonic()

    def advance(self, n: int = 1, item: str = "") -> None:
        if self._bar is None:
            return
        self._pending += n
        self._item = item or self._item
        if time.monotonic() - self._drawn >= EVERY or self._bar.pos + self._pending >= (self._bar.length or 0):
            self._draw()

    def close(self) -> None:
        """The stage's bar finished with its last count; the line ended."""
        if self._bar is None:
            return
        self._draw()
        self._bar.__exit__(None, None, None)
        self._bar = None

    def _draw(self) -> None:
        self._bar.update(self._pending, self._item or None)
        self._pending, self._drawn = 0, time.monotonic()

    def _info(self, _item) -> Optional[str]:
        """What follows the bar: the bytes done and to do (counts show as click's 3/10), then the current item."""
        done = f"{size_text(self._bar.pos)}/{size_text(self._bar.length or 0)}" if self._unit == BYTES else ""
        return "  ".join(t for t in (done, printable(self._item)) if t) or None  # items name others' files


def is_terminal(file) -> bool:
    """Whether ``file`` is a terminal someone watches (not a pipe, a file, or a test's buffer)."""
    try:
        return bool(file.isatty())
    except (AttributeError, ValueError):  # closed, or no isatty
        return False


@contextlib.contextmanager
def bar(enabled: bool = True) -> Iterator[Optional[Progress]]:
    """A :class:`Bar` on stderr when ``enabled`` and stderr is a terminal, else None; its last bar closed at the end."""
    file = stream()
    if not enabled or not is_terminal(file):
        yield None
        return
    shown = Bar(file)
    try:
        yield shown
    finally:
        shown.close()
