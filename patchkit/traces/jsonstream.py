"""A JSON trace read as a stream: its events one at a time, errors located, nesting bounded.

ijson parses (its yajl2_c backend where installed: C speed, memory bounded
by one event).  In front of it sits a reader that hands ijson the file's
bytes (a ``.gz`` file decompressed on the way), read through
:func:`patchkit.core.confined.open_bounded` (a link, a FIFO or a device
refused; at most ``TRACE_LIMIT`` bytes, decompressed ones counted, and a
gzip bomb refused by its ratio) and, as they pass,

* counts lines, so that an error names the line and column it is on;
* follows the nesting of ``[`` and ``{`` outside strings and refuses a
  file nested deeper than :data:`MAX_DEPTH` before ijson sees it (ijson
  keeps a path string per level, so 200,000 levels would need hundreds of
  gigabytes; torch nests a handful);
* turns a cut-off or damaged compressed stream into a TraceError.

Nothing here writes.
"""

from __future__ import annotations

import errno
import itertools
import re
from typing import Callable, Iterator, Optional, Tuple

from patchkit.core.confined import Refused, open_bounded
from patchkit.core.errors import Location, TraceError
from patchkit.core.manifest import TRACE_LIMIT
from patchkit.core.printable import printable

MAX_DEPTH = 100  # a torch event sits at depth 3 (file, traceEvents, event); its args a few levels below
CHUNK = 1 << 16  # what ijson asks for at a time; a located error is searched for in the last two
RETAKE = "take the capture again, or copy it again from the node that wrote it (`patchkit collect` verifies sizes)"
FOREIGN = "torch writes a few levels; this file did not come from a profiler: check where it came from"
MOVE = "a trace is a regular file a profiler wrote: move this one aside (someone else may have put it there)"
LINKED = "patchkit follows no link to a trace: name the file it points to, if you trust it, or move the link aside"
_DROP = bytes(b for b in range(256) if b not in b'"[]{}')  # the bytes the nesting scan looks at
_BRACES = bytes.maketrans(b"[]", b"{}")
_SIGNS = bytes.maketrans(b"{}", b"\x01\xff")  # +1 / -1 as signed bytes
_QUOTED = re.compile(rb'"[^"]*"')  # a string, once escapes are gone and only quotes and brackets are left
_MESSAGE = re.compile(r"(?:lexical|parse) error: [^\n\\]*")


class _Reader:
    """The bytes of a JSON file, for ijson's ``read``; where they came from, line by line.

    ``on_bytes(n)``: told the bytes of the file read so far, as they are read (of a ``.gz`` file, its compressed
    bytes: what its size on disk counts).
    """

    def __init__(self, path: str, on_bytes: Optional[Callable[[int], None]] = None):
        self.path = path
        try:  # a link, a FIFO or a device is refused; past TRACE_LIMIT bytes, or a gzip bomb, too (Refused)
            self._file = open_bounded(path, TRACE_LIMIT, gz=path.endswith(".gz"))
        except Refused as exc:
            raise TraceError(f"the trace {exc}", Location(path), hint=LINKED if exc.errno == errno.ELOOP else MOVE) \
                from None
        except OSError as exc:
            raise TraceError(f"cannot read the trace: {exc.strerror or exc}", Location(path), hint=RETAKE) from None
        self._on_bytes, self._told = on_bytes, 0
        self.chunk = self.previous = b""
        self.line = self.previous_line = 1  # the line the chunk starts on
        self.col0 = self.previous_col0 = 0  # bytes of that line before the chunk
        self.eof = self.seen_text = False
        self._pending = b""
        self._depth, self._in_string, self._carry = 0, False, b""

    def close(self) -> None:
        self._file.close()

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # ijson asks whether the file gives bytes or text
            return b""
        if self._pending:
            data, self._pending = self._pending, b""
            return data
        return self._pull(size if size and size > 0 else CHUNK)

    def first_byte(self) -> bytes:
        """The first byte that is not white space (b"" for none); leading white space is dropped."""
        while True:
            data = self._pull(CHUNK)
            head = data.lstrip()
            if head or not data:
                self._pending = data
                return head[:1]

    def _pull(self, size: int) -> bytes:
        import zlib

        try:
            data = self._file.read(size)
        except EOFError:
            raise TraceError("the compressed trace is cut off", Location(self.path), hint=RETAKE) from None
        except Refused as exc:
            raise TraceError(f"the trace {exc}", Location(self.path), hint=MOVE) from None
        except (OSError, zlib.error) as exc:
            raise TraceError(f"cannot read the trace: {exc}", Location(self.path), hint=RETAKE) from None
        consumed = self._file.raw.consumed
        if self._on_bytes is not None and consumed > self._told:
            self._on_bytes(consumed - self._told)
            self._told = consumed
        newlines = self.chunk.count(b"\n")
        self.previous, self.previous_line, self.previous_col0 = self.chunk, self.line, self.col0
        self.line += newlines
        self.col0 = len(self.chunk) - self.chunk.rfind(b"\n") - 1 if newlines else self.col0 + len(self.chunk)
        self.chunk = data
        if not data:
            self.eof = True
            return data
        self.seen_text = self.seen_text or bool(data.strip())
        self._nesting(data)
        return data

    def _nesting(self, data: bytes) -> None:
        """Follow the depth through ``data``, strings skipped; a TraceError past MAX_DEPTH.

        Only quotes and brackets matter (escapes gone first): a bracket is inside a string when an odd number
        of quotes comes before it, which removing two quotes in a row never changes.  So after ``""`` pairs
        go, a trace torch wrote is left with its brackets alone, and what remains is counted.
        """
        before = (self._depth, self._in_string, self._carry)
        text = self._carry + data
        if b"\\" in text:
            kept = text.rstrip(b"\\")  # a backslash at the end escapes the next chunk's first byte
            self._carry, text = text[len(kept):], kept.replace(b"\\\\", b"").replace(b'\\"', b"")
        signs = (b'"' if self._in_string else b"") + text.translate(None, _DROP)
        signs = signs.replace(b'""', b"")
        if b'"' in signs:
            signs = _QUOTED.sub(b"", signs)
            quote = signs.find(b'"')
            self._in_string = quote >= 0
            signs = signs[:quote] if quote >= 0 else signs
        else:
            self._in_string = False
        brackets = signs.translate(_BRACES)
        opened = brackets.count(b"{")
        if self._depth + opened > MAX_DEPTH and self._deeper(brackets):
            line, col = self.position(_too_deep(data, *before), current=True)
            raise TraceError(f"the JSON nests deeper than {MAX_DEPTH} levels", Location(self.path, line, col),
                             hint=FOREIGN)
        self._depth = max(self._depth + 2 * opened - len(brackets), 0)

    def _deeper(self, brackets: bytes) -> bool:
        """Whether ``brackets`` (``{`` and ``}`` only) go past MAX_DEPTH from the current depth."""
        inner, passes = brackets, 0
        while passes <= MAX_DEPTH:  # each pass takes away the innermost pairs
            shorter = inner.replace(b"{}", b"")
            if len(shorter) == len(inner):
                break
            inner, passes = shorter, passes + 1
        if self._depth + inner.count(b"{") + passes <= MAX_DEPTH:  # a bound on the deepest point
            return False
        steps = memoryview(brackets.translate(_SIGNS)).cast("b")
        return max(itertools.accumulate(steps, initial=self._depth)) > MAX_DEPTH

    def position(self, offset: int, current: bool) -> Tuple[int, int]:
        """(line, column) of ``offset`` in the current chunk, or in previous + current chunk."""
        data, line, col0 = (self.chunk, self.line, self.col0) if current else \
            (self.previous + self.chunk, self.previous_line, self.previous_col0)
        newline = data.rfind(b"\n", 0, offset)
        return line + data.count(b"\n", 0, offset), offset - newline if newline >= 0 else col0 + offset + 1

    def end(self) -> Tuple[int, int]:
        return self.position(0, current=True)

    def find(self, needle: bytes) -> Optional[Tuple[int, int]]:
        """Where ``needle`` is in the last two chunks (where ijson's latest event ends), if it is."""
        at = (self.previous + self.chunk).find(needle) if needle else -1
        return self.position(at, current=False) if at >= 0 else None

    def error(self, exc: Exception) -> TraceError:
        """ijson's error, located and worded for a trace."""
        text = str(exc)
        found = _MESSAGE.search(text)
        what = found.group(0).strip().rstrip(".") if found else printable(text.splitlines()[0] if text else "")
        if not self.seen_text:
            return TraceError("the trace is empty (0 events)", Location(self.path), hint=RETAKE)
        if self.eof and "premature EOF" in text:
            return TraceError("the trace ends in the middle of its JSON data: it was cut off while written or copied",
                              Location(self.path, *self.end()), hint=RETAKE)
        offset = _bad_utf8(self.chunk) if "UTF8" in what else _caret(text, self.chunk)
        if offset and "UTF8" not in what and "inside" not in what and "overflow" not in what:
            offset -= 1  # yajl points just past the token it could not take (at the character, inside a string)
        line, col = self.position(offset, current=True) if offset is not None else (self.line, None)
        return TraceError(f"the trace is not valid JSON ({what})", Location(self.path, line, col), hint=RETAKE)


def _too_deep(data: bytes, depth: int, in_string: bool, carry: bytes) -> int:
    """The offset in ``data`` where the nesting passes MAX_DEPTH (the slow, exact walk of one chunk)."""
    escaped = in_string and len(carry) % 2 == 1
    for i, byte in enumerate(data):
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in b"[{":
            depth += 1
            if depth > MAX_DEPTH:
                return i
        elif byte in b"]}":
            depth -= 1
    return 0


def _bad_utf8(chunk: bytes) -> Optional[int]:
    skip = len(chunk[:3]) - len(chunk[:3].lstrip(bytes(range(0x80, 0xC0))))  # the end of a character cut at the start
    try:
        chunk[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        return skip + exc.start
    return None


def _caret(message: str, chunk: bytes) -> Optional[int]:
    """The offset in ``chunk`` that yajl's verbose message points at, found from the text it quotes."""
    lines = message.split("\n")
    marks = [i for i, line in enumerate(lines) if "(right here)" in line and i > 0]
    if not marks:
        return None
    quoted, caret = lines[marks[0] - 1], lines[marks[0]].find("^")
    plain = chunk.replace(b"\n", b" ").replace(b"\r", b" ")
    for pad in range(caret, 10, -1):  # yajl pads to put the error at the caret: 40 - offset for the first 30 bytes
        head = quoted[pad:].encode("utf-8", "replace")
        if quoted[:pad].strip() == "" and plain.startswith(head):
            return caret - pad
    near = quoted[10:].encode("utf-8", "replace")
    at = plain.find(near) if near else -1
    return at + caret - 10 if at >= 0 else None


class TraceStream:
    """The items of a Chrome trace's ``traceEvents`` (or of a bare JSON list), parsed as they are read."""

    def __init__(self, path: str, on_bytes: Optional[Callable[[int], None]] = None):
        self.path, self.on_bytes = path, on_bytes  # on_bytes: see _Reader
        self._reader: Optional[_Reader] = None

    def __iter__(self) -> Iterator[object]:
        import ijson

        reader = self._reader = _Reader(self.path, self.on_bytes)
        try:
            first = reader.first_byte()
            prefix = "traceEvents.item" if first == b"{" else "item"
            count = 0
            try:
                for item in ijson.items(reader, prefix, use_float=True):
                    count += 1
                    yield item
            except ijson.JSONError as exc:
                raise reader.error(exc) from None
        finally:
            reader.close()
        if first not in (b"{", b"[") or (not count and first == b"{" and not _has_event_list(self.path)):
            raise TraceError("not a Chrome trace: no traceEvents list", Location(self.path, 1),
                             hint="give a torch.profiler trace (*.pt.trace.json) or torch_npu's trace_view.json")

    def where(self, needle: str = "") -> Location:
        """Where the latest event is: the line holding ``needle`` (its JSON text) if found, else where reading is."""
        reader = self._reader
        if reader is None:
            return Location(self.path)
        import json

        found = reader.find(json.dumps(needle, ensure_ascii=False)[1:-1].encode("utf-8", "replace")) if needle else None
        return Location(self.path, *(found or (reader.line, None)))


def _has_event_list(path: str) -> bool:
    """Whether the object in ``path`` has a ``traceEvents`` list (read up to that key only)."""
    import ijson

    reader = _Reader(path)
    try:
        for prefix, event, _value in ijson.parse(reader):
            if prefix == "traceEvents":
                return event == "start_array"
    except ijson.JSONError as exc:
        raise reader.error(exc) from None
    finally:
        reader.close()
    return False
