"""Whether a JSON file was written to its end, judged by its structure alone: :func:`cut`.

A writer that stops (a full disk, a quota, a killed process) leaves a prefix
of its JSON: it ends inside a string, or with a bracket still open, or
between the last item of a list and the brace that closes the whole.  None
of that depends on which keys the file holds, so no key is looked for:
torch adds ``"ERROR"`` and ``"WARNING"`` lists when CUPTI reports a problem,
``"distributedInfo"`` under NCCL, and may add others.

- A file of at most :data:`WINDOW` bytes is read whole and walked from its
  first byte: it must open a list or an object, close it at its very end
  (whitespace after, nothing else), and never close it before.
- A bigger one (torch's traces reach hundreds of MB; walking them in Python
  would take seconds at the end of every window) is judged on its last
  :data:`WINDOW` bytes, walked from their first line break (JSON has none
  inside a string): its last bracket must close more than every bracket
  before it in those bytes.  That is where every writer of torch's traces
  puts its close (kineto's, ``torch.profiler``'s own Python export, its
  CUPTI monitor's ``json.dump``): the event list, whatever keys follow it,
  then the brace of the whole.  A prefix that stops between two items of a
  list, inside an event, or right after the event list never closes below
  the level those bytes started at.  Bytes with no line break at all
  (JSON written on one line) are read whole, as a small file is.

``objects``: the top level must be an object (a torch trace); otherwise a
list is whole too.  The answer names what was found ("ends after 4096 bytes
inside a string opened at byte 4071"), never a guess at the cause.

Standard library only: this runs inside the training process.
"""

from __future__ import annotations

import os
import re
from typing import BinaryIO, Dict, List, Optional, Set, Tuple

from patchkit.core.confined import Refused, open_regular

WINDOW = 64 << 10  # bytes walked (some 200 of torch's events, 20 ms on a busy machine); a smaller file: all of it
ONE_LINE = 1 << 30  # bytes of JSON on one line read at most (some 30 s): beyond, not trusted
_TOKEN = re.compile(rb'"(?:[^"\\\n]|\\[^\n])*"|[\[\]{}:,]|"')
_STRING = re.compile(rb'"[^"\\\n]*(?:\\[^\n][^"\\\n]*)*"')
_CLOSES = {b"}": b"{", b"]": b"["}
_NAMES = {b"{": "an object", b"[": "a list"}
_CLOSER = {b"{": b"}", b"[": b"]"}
_KIND = {b"{": "object", b"[": "list"}
_SPACE = b" \t\r\n"


def cut(handle: BinaryIO, size: Optional[int] = None, objects: bool = False) -> str:
    """What shows that the JSON in ``handle`` (a binary file open for reading) was cut short; "" when whole."""
    if size is None:
        size = os.fstat(handle.fileno()).st_size
    if size <= WINDOW:
        handle.seek(0)
        return _judge(handle.read(WINDOW + 1), 0, size, objects)
    handle.seek(size - WINDOW)
    tail = handle.read(WINDOW)
    start = tail.find(b"\n")
    if start < 0:  # one line: the only safe start is its first byte
        return _counted(handle, size, objects)
    return _judge(tail[start:], size - WINDOW + start, size, objects)


def cut_at(path: str, objects: bool = False) -> str:
    """:func:`cut` of the file at ``path``, opened as :func:`patchkit.core.confined.open_regular` opens (a link or a
    FIFO is refused, never read); "is missing" when there is none."""
    try:
        handle = os.fdopen(open_regular(path), "rb")
    except FileNotFoundError:
        return "is missing"
    except Refused as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    with handle:
        return cut(handle, None, objects)


def _judge(data: bytes, offset: int, size: int, objects: bool) -> str:
    """``data``: the file's bytes from ``offset`` (0: its first byte; else just before a line break) to its end."""
    whole = offset == 0
    if not data.strip(_SPACE):
        return f"holds no JSON data ({size} bytes)" if size else "is empty"
    ends = f"ends after {size} bytes"
    stack: List[Tuple[bytes, int]] = []  # the brackets opened in data and still open: (bracket, byte)
    seen: Dict[int, Set[bytes]] = {}  # level -> the ":" and "," met at it (what holds the items there)
    level, low, first, last, back = 0, None, None, None, None  # low: the lowest level between two brackets
    for m in _TOKEN.finditer(data):
        t, at = m.group(), offset + m.start()
        if t == b'"':
            if data.find(b"\n", m.start()) >= 0:
                return f"holds a line break inside the string at byte {at}: not JSON"
            return f"{ends} inside a string opened at byte {at}"
        if t in (b":", b","):
            seen.setdefault(level, set()).add(t)
            continue
        if t[:1] == b'"':
            continue
        if first is None:
            first = (t, at)
        else:
            low = level if low is None else min(low, level)
        if t in _NAMES:
            stack.append((t, at))
            level += 1
            continue
        if stack and stack[-1][0] != _CLOSES[t]:
            return f"closes {_NAMES[stack[-1][0]]} opened at byte {stack[-1][1]} with {t.decode()} at byte {at}: " \
                   "not JSON"
        if stack:
            stack.pop()
        seen.pop(level, None)
        level -= 1
        last = (t, at, offset + m.end())
        if whole and level == 0 and back is None:
            back = at
    if first is None:
        where = "" if whole else f" in its last {len(data)} bytes"
        return f"{ends} with no bracket{where}: not a list or an object"
    if last is None:
        return f"{ends} {_inside(stack, seen, level, whole)}"
    if whole:
        if first[0] not in _NAMES or data[: first[1]].strip(_SPACE):
            return f"does not begin with a list or an object (byte {first[1]} is the first bracket): not JSON"
        if level < 0 or back != last[1] and level == 0:
            return f"closes its top-level {_KIND[first[0]]} at byte {back}, then goes on: not one JSON value" \
                if back is not None else f"closes more brackets than it opens (byte {last[1]}): not JSON"
        if level > 0:
            return f"{ends} {_inside(stack, seen, level, whole)}"
        if objects and first[0] != b"{":
            return "is a list, not the object a torch trace is"
    elif level >= min(0, low if low is not None else 0):
        return f"{ends} {_inside(stack, seen, level, whole)}"
    after = data[last[2] - offset:].strip(_SPACE)
    if after[:1] in (b",", b":", b'"'):  # the bracket closed an item: what held it goes on
        return f"{ends} {_inside(stack, seen, level, whole)}"
    if after:
        return f"{ends}: {len(after)} bytes that are not JSON follow its close at byte {last[1]}"
    if objects and last[0] != b"}":
        return f"{ends} where a list closes (byte {last[1]}), before the brace that closes its top-level object"
    return ""


def _inside(stack: List[Tuple[bytes, int]], seen: Dict[int, Set[bytes]], level: int, whole: bool) -> str:
    """Where the data stopped: in the innermost bracket still open."""
    if whole and level == 1:
        what = "brace" if stack[0][0] == b"{" else "bracket"
        return f"before the {what} that closes its top-level {_KIND[stack[0][0]]} (opened at byte {stack[0][1]})"
    if stack:
        return f"inside {_NAMES[stack[-1][0]]} opened at byte {stack[-1][1]}"
    held = seen.get(level, set())
    what = "an object" if b":" in held else "a list or an object"  # (a "," is in both)
    return f"inside {what} opened before the last {WINDOW >> 10} KiB"


def _counted(handle: BinaryIO, size: int, objects: bool) -> str:
    """A big file on one line, read whole and judged at the regular expression engine's speed (some 30 MB/s):
    its strings taken out, its brackets counted.  A prefix of JSON has more opened than closed, or a quote left."""
    if size > ONE_LINE:
        return f"is {size} bytes on one line, more than the {ONE_LINE >> 20} MiB this check reads: not trusted"
    handle.seek(0)
    data = handle.read(size)
    rest = _STRING.sub(b"", data)
    if b'"' in rest:
        return f"ends after {size} bytes inside a string"
    opened = rest.count(b"{") + rest.count(b"[")
    closed = rest.count(b"}") + rest.count(b"]")
    body = rest.strip(_SPACE)
    if opened > closed:
        return f"ends after {size} bytes with {opened - closed} of its brackets still open"
    if opened != closed or body[:1] not in _NAMES or body[-1:] != _CLOSER[body[:1]]:
        return f"is not one JSON list or object on its one line of {size} bytes"
    if objects and body[:1] != b"{":
        return "is a list, not the object a torch trace is"
    return ""
