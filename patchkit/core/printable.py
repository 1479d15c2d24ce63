"""Text from a trace, a manifest or a file name, made safe to print on a terminal.

Operator names, roles, node names and paths come from files other users or
other nodes wrote.  An ESC, BEL or CR byte in one must not reach the
terminal raw: it could forge a line (``\\r rank 0: ...``), set the window
title or move the cursor.  :func:`printable` writes each control character
(C0, DEL, C1), each lone surrogate, each bidirectional mark and override
(U+061C included) and each line or paragraph separator (U+2028, U+2029:
``str.splitlines`` and some terminals and editors end a line there) as a
visible escape (``\\x1b``, ``\\u202e``); everything else, non-ASCII letters
included, is kept.  ``--json`` output needs nothing: ``json.dumps`` escapes
the same characters.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2028\u2029\u2066-\u2069]")


def _escape(match: "re.Match[str]") -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, keep: str = "") -> str:
    """``text`` (made a string) with its control characters escaped: ``"a\\x1b[2Jb"`` prints as ``a\\x1b[2Jb``.

    ``keep``: characters left as they are (``"\\n"`` for a message of several lines of patchkit's own).
    """
    text = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(lambda m: m.group(0) if m.group(0) in keep else _escape(m), text)
