"""Unified diffs that `git apply` and `patch -p1` take (made by :mod:`difflib`), coloured only on a terminal."""

from __future__ import annotations

from typing import Iterable, List, Tuple

from patchkit.engine.marks import is_own_line, split_lines

Opcode = Tuple[str, int, int, int, int]

NO_EOL = "\\ No newline at end of file\n"


def unified(before: str, after: str, relpath: str, context: int = 3) -> str:
    """``before`` -> ``after`` as a unified diff with ``a/`` and ``b/`` paths; "" when nothing changed.

    Lines are split as Python splits source (only \\r\\n, \\r and \\n end a line) and keep their
    endings, so CRLF files give CRLF lines in the patch; a last line without a newline is marked
    the way `git apply` and `patch` expect.  Hunks are grouped by :mod:`difflib` from the
    alignment :func:`_opcodes` gives.
    """
    import difflib

    a, b = split_lines(before), split_lines(after)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    matcher.get_opcodes = lambda: _opcodes(a, b, difflib)  # get_grouped_opcodes starts from these
    out: List[str] = []
    for group in matcher.get_grouped_opcodes(context):
        (_, i1, _, j1, _), (_, _, i2, _, j2) = group[0], group[-1]
        out.append(f"@@ -{_span(i1, i2)} +{_span(j1, j2)} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += (" " + line for line in a[i1:i2])
                continue
            out += ("-" + line for line in a[i1:i2])
            out += ("+" + line for line in b[j1:j2])
    if not out:
        return ""
    marked = [line if line.endswith(("\n", "\r")) else line + "\n" + NO_EOL for line in out]
    return "".join([f"--- a/{relpath}".rstrip("\r\n") + "\n", f"+++ b/{relpath}".rstrip("\r\n") + "\n", *marked])


def _opcodes(a: List[str], b: List[str], difflib) -> List[Opcode]:
    """How ``a`` becomes ``b``, aligned on the lines that are not patchkit's own.

    patchkit only adds and takes out its own marked lines, so the other lines are the same, in the
    same order, on both sides: they are matched one to one, and only the runs of marked lines
    between them are compared (by difflib).  A longest-match alignment of the whole file could
    pair a copied stretch or a blank line with the wrong one and show lines removed and added
    again.  Any other pair of texts is left to difflib as a whole.
    """
    keep_a = [i for i, line in enumerate(a) if not _own(line)]
    keep_b = [j for j, line in enumerate(b) if not _own(line)]
    if len(keep_a) != len(keep_b) or any(a[i] != b[j] for i, j in zip(keep_a, keep_b)):
        return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    codes: List[Opcode] = []
    at_a = at_b = 0
    for i, j in zip(keep_a + [len(a)], keep_b + [len(b)]):
        if (i, j) == (at_a, at_b):
            gap = []
        else:  # the marked lines between two of the others: a few at most
            gap = difflib.SequenceMatcher(None, a[at_a:i], b[at_b:j], autojunk=False).get_opcodes()
        for tag, i1, i2, j1, j2 in gap:
            codes.append((tag, at_a + i1, at_a + i2, at_b + j1, at_b + j2))
        if i < len(a):
            codes.append(("equal", i, i + 1, j, j + 1))
        at_a, at_b = i + 1, j + 1
    return _merged(codes) or [("equal", 0, 0, 0, 0)]


def _own(line: str) -> bool:
    return "  # patchkit:" in line and is_own_line(line)


def _merged(codes: List[Opcode]) -> List[Opcode]:
    """Neighbouring codes of the same kind as one, as difflib gives them."""
    out: List[Opcode] = []
    for code in codes:
        if out and out[-1][0] == code[0] == "equal":
            out[-1] = ("equal", out[-1][1], code[2], out[-1][3], code[4])
        else:
            out.append(code)
    return out


def _span(start: int, stop: int) -> str:
    """A hunk's lines as unified diffs number them: ``first,count``, ``first`` alone for one, ``previous,0`` for none."""
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
