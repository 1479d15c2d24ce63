"""Unified diffs that `git apply` and `patch -p1` take, coloured only on a terminal."""

from __future__ import annotations

import difflib
from typing import Iterable, List

from .marks import split_lines

NO_EOL = "\\ No newline at end of file\n"


def unified(before: str, after: str, relpath: str, context: int = 3) -> str:
    a, b = split_lines(before), split_lines(after)
    out: List[str] = []
    for line in difflib.unified_diff(a, b, f"a/{relpath}", f"b/{relpath}", n=context, lineterm="\n"):
        if line.startswith(("---", "+++")):
            line = line.rstrip("\r\n") + "\n"
        out.append(line)
        if not line.endswith(("\n", "\r")):
            out.append("\n" + NO_EOL)
    return "".join(out)


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
