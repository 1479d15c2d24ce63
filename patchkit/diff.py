"""Unified diffs that `git apply` and `patch -p1` take, coloured only on a terminal."""

from __future__ import annotations

from collections import Counter
from itertools import chain, islice
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

from .marks import split_lines

NO_EOL = "\\ No newline at end of file\n"

Run = Tuple[int, int, int]  # new lines b[start:end], inserted before a[at]: (at, start, end)


def unified(before: str, after: str, relpath: str, context: int = 3) -> str:
    """``before`` -> ``after`` as a unified diff, byte for byte what :mod:`difflib` makes of it.

    patchkit only inserts lines, so ``after`` is nearly always ``before`` plus a few new lines.  That diff
    is written straight from where they go, in linear time: importing difflib and running its
    SequenceMatcher on a large file would cost more than the rest of a `patchkit diff`.  Anything
    else, and any insertion difflib might align otherwise, goes to difflib.
    """
    a, b = split_lines(before), split_lines(after)
    runs = _insertions(a, b) if context >= 0 else None
    return _text(relpath, _difflib_body(a, b, context) if runs is None else _insertion_body(a, b, runs, context))


def _difflib_unified(before: str, after: str, relpath: str, context: int = 3) -> str:
    """What `unified` returns, always made by difflib: the reference its fast path is tested against."""
    return _text(relpath, _difflib_body(split_lines(before), split_lines(after), context))


def _text(relpath: str, body: Iterable[str]) -> str:
    out: List[str] = []
    for line in body:
        out.append(line)
        if not line.endswith(("\n", "\r")):
            out.append("\n" + NO_EOL)
    if not out:
        return ""
    return "".join([f"--- a/{relpath}".rstrip("\r\n") + "\n", f"+++ b/{relpath}".rstrip("\r\n") + "\n", *out])


def _difflib_body(a: Sequence[str], b: Sequence[str], context: int) -> Iterable[str]:
    import difflib

    return islice(difflib.unified_diff(a, b, n=context, lineterm="\n"), 2, None)  # less its ---/+++ lines


def _insertions(a: Sequence[str], b: Sequence[str]) -> Optional[List[Run]]:
    """The runs of new lines if ``b`` is ``a`` with lines inserted and difflib is sure to see it so, else None.

    difflib matches the longest run of equal lines first (a copy of it elsewhere in ``a`` may win), then
    does the same on either side of it.  Its runs skip "popular" lines (autojunk: once ``b`` has 200 lines,
    those it has over ``1 + len(b) // 100`` times, blank lines say), so a stretch of them alone is shown
    removed and added again.  Neither can happen if no new line is a line of ``a`` and, in each stretch of
    ``a`` between insertion points, every longest run of lines that are not popular holds a line that
    ``a`` has once: a match as long elsewhere would need that line too.
    """
    count = Counter(a)
    new = [j for j, line in enumerate(b) if line not in count]
    if len(b) - len(new) != len(a):
        return None
    runs: List[Run] = []
    for k, j in enumerate(new):
        if runs and runs[-1][2] == j:
            runs[-1] = (runs[-1][0], runs[-1][1], j + 1)
        else:
            runs.append((j - k, j, j + 1))
    limit = len(b) // 100 + 1 if len(b) >= 200 else len(b)  # lines seen more often are popular
    at = end = 0
    for next_at, start, next_end in runs + [(len(a), len(b), len(b))]:
        if b[end:start] != a[at:next_at] or (next_at > at and not _anchored(a[at:next_at], count, limit)):
            return None
        at, end = next_at, next_end
    return runs


def _anchored(stretch: List[str], count: Counter, limit: int) -> bool:
    """Each longest run of lines that ``a`` has at most ``limit`` times holds a line it has once."""
    longest, sure = 0, False
    length, unique = 0, False
    for seen in chain(map(count.__getitem__, stretch), [0]):  # the 0 ends the last run
        if 0 < seen <= limit:
            length, unique = length + 1, unique or seen == 1
            continue
        if length > longest:
            longest, sure = length, unique
        elif length == longest:
            sure = sure and unique
        length, unique = 0, False
    return sure


def _insertion_body(a: Sequence[str], b: Sequence[str], runs: List[Run], n: int) -> Iterator[str]:
    """difflib's hunks for ``runs``: ``n`` lines of context, merged where contexts touch or overlap."""
    hunks: List[List[Run]] = []
    for run in runs:
        if hunks and run[0] - hunks[-1][-1][0] <= 2 * n:
            hunks[-1].append(run)
        else:
            hunks.append([run])
    for hunk in hunks:
        (first, first_new, _), (last, _, last_end) = hunk[0], hunk[-1]
        lo, hi = max(0, first - n), min(len(a), last + n)
        yield f"@@ -{_span(lo, hi)} +{_span(lo + first_new - first, hi + last_end - last)} @@\n"
        for at, start, end in hunk:
            yield from (" " + line for line in a[lo:at])
            yield from ("+" + line for line in b[start:end])
            lo = at
        yield from (" " + line for line in a[lo:hi])


def _span(start: int, stop: int) -> str:
    """A hunk's lines as difflib numbers them: ``first,count``, ``first`` alone for one, ``previous,0`` for none."""
    if stop - start == 1:
        return str(start + 1)
    return f"{start + 1 if stop > start else start},{stop - start}"


def colour(text: str) -> str:
    import click

    lines = []
    for line in text.splitlines(keepends=True):
        if line.startswith(("+++", "---")):
            lines.append(click.style(line, bold=True))
        elif line.startswith("+"):
            lines.append(click.style(line, fg="green"))
        elif line.startswith("-"):
            lines.append(click.style(line, fg="red"))
        elif line.startswith("@@"):
            lines.append(click.style(line, fg="cyan"))
        else:
            lines.append(line)
    return "".join(lines)


def stat(diffs: Iterable[tuple]) -> str:
    """``(relpath, diff_text)`` pairs -> a diffstat-like summary."""
    rows = []
    for relpath, text in diffs:
        added = sum(1 for ln in text.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
        removed = sum(1 for ln in text.splitlines() if ln.startswith("-") and not ln.startswith("---"))
        rows.append((relpath, added, removed))
    width = max((len(r[0]) for r in rows), default=0)
    lines = [f" {p.ljust(width)} | {a + r:3d} {'+' * a}{'-' * r}" for p, a, r in rows]
    lines.append(f" {len(rows)} file{'s' if len(rows) != 1 else ''} changed, {sum(r[1] for r in rows)} insertions(+), "
                 f"{sum(r[2] for r in rows)} deletions(-)")
    return "\n".join(lines) + "\n"
