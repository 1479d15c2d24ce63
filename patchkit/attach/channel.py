"""The job's answers, read on the attaching side: the channel is a stranger's folder.

A request folder (:func:`patchkit.attach.payload.folder`) is this user's; its ``out/`` is the job's user's when
root attaches to another user's job, who therefore controls everything in it.  So every read goes through here:

- :func:`read`: ``out/status.json`` opened through a descriptor of the request folder (this user's, writable by
  nobody else) and of ``out/``, each ``O_NOFOLLOW``, the file ``O_NONBLOCK`` and checked with ``fstat`` to be a
  regular file (:func:`patchkit.core.confined.open_regular`): a link, a FIFO or a folder in its place is said, never
  followed or waited on.  At most :data:`LIMIT` bytes, nested at most :data:`NESTING` deep (counted on the raw text
  before ``json.loads`` sees it), then made a typed status (:func:`typed`): each known field of its type and bounded,
  every text escaped onto one line (:func:`patchkit.core.printable.printable`), anything else dropped; a status
  that is not one is ``{"state": "unreadable", "error": "the job wrote an unreadable status (why)"}``.  Never raises.
- :func:`ask_detach`: ``out/detach`` made ``O_CREAT|O_EXCL|O_NOFOLLOW|O_NONBLOCK``; what the job put there instead
  is looked at without following it, and said.
- :func:`save_folder`: the folder this user named for a process's capture (the recipe's save path, resolved against
  the process's working folder when relative), at injection; only traces inside it reach this home's index
  (:func:`patchkit.attach.flow.note_folders`).

Taking the channel back and removing it is :mod:`patchkit.attach.sweep`.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from typing import Any, Callable, Dict, List, Optional

from patchkit.core.confined import Refused, kind, open_regular, size_text
from patchkit.core.printable import printable
from patchkit.runtime.attach.protocol import WRITTEN, Reason

STATES = tuple(s.value for s in WRITTEN)  # what an agent writes
REASONS = {r.value for r in Reason}
UNREADABLE = "unreadable"
OUT, STATUS, DETACH = "out", "status.json", "detach"
LIMIT = 1 << 20  # an agent's status is a few KiB
NESTING = 8  # a status nests 4 deep: {captures: [{recorded: [[first, last]]}]}
NAME, TEXT, MANY = 300, 2000, 200  # a name, a message or a path, a list
COUNT = 10 ** 12  # a count of calls: more than a job makes
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class Unusable(Exception):
    """The request folder or its channel is not what this user made: said, never used."""


def open_base(base: str) -> int:
    """A descriptor of the request folder ``base``: this user's folder, writable by nobody else, not a link.
    FileNotFoundError when it has gone; :class:`Unusable` otherwise."""
    try:
        fd = os.open(base, DIRECTORY)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Unusable(f"{base}: cannot open the request folder ({exc.strerror})") from None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        os.close(fd)
        raise Unusable(f"{base} is not this user's request folder (uid {st.st_uid}, mode {st.st_mode & 0o7777:04o})")
    return fd


def open_out(base_fd: int) -> int:
    try:
        return os.open(OUT, DIRECTORY, dir_fd=base_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        try:
            what = f"is {kind(os.stat(OUT, dir_fd=base_fd, follow_symlinks=False).st_mode)}"
        except OSError:
            what = f"cannot be opened ({exc.strerror})"
        raise Unusable(f"its channel {what}, not a folder") from None


def unreadable(why: str) -> Dict[str, Any]:
    return {"state": UNREADABLE, "error": f"the job wrote an unreadable status ({printable(why)[:NAME]})"}


def read(base: str) -> Optional[Dict[str, Any]]:
    """The agent's last status in the channel of ``base``, typed (:func:`typed`); None while it has written none,
    or once the folder has gone; an unreadable one said as such.  Never raises."""
    try:
        raw = _raw(base)
    except FileNotFoundError:
        return None
    except (Unusable, Refused) as exc:
        return unreadable(str(exc))
    except OSError as exc:
        return unreadable(f"{STATUS}: {exc.strerror}")
    if raw is None:
        return None
    return parse(raw)


def _raw(base: str, name: str = STATUS, limit: int = LIMIT) -> Optional[bytes]:
    """The bytes of ``name`` in the channel of ``base``, at most ``limit`` (:class:`Refused` past it); None while
    there is none."""
    base_fd = open_base(base)
    try:
        out_fd = open_out(base_fd)
        try:
            try:
                fd = open_regular(name, out_fd)
            except FileNotFoundError:
                return None
            except Refused as exc:
                raise Refused(exc.errno, f"{name} {exc}") from None
            try:
                chunks, size, chunk = [], 0, b"-"
                while chunk and size <= limit:
                    chunk = os.read(fd, min(limit + 1 - size, 1 << 20))
                    chunks.append(chunk)
                    size += len(chunk)
            finally:
                os.close(fd)
        finally:
            os.close(out_fd)
    finally:
        os.close(base_fd)
    if size > limit:
        raise Refused(errno.EFBIG, f"{name} is larger than {size_text(limit)}")
    return b"".join(chunks)


_TOKENS = re.compile(rb'[][{}"\\]')


def deeper_than(raw: bytes, bound: int) -> bool:
    """Whether the JSON text ``raw`` nests more than ``bound`` arrays and objects deep (strings skipped), counted
    in one pass without recursion, so that no parser ever recurses on it."""
    depth, in_string, skip = 0, False, -1
    for match in _TOKENS.finditer(raw):
        at = match.start()
        if at == skip:
            continue
        char = raw[at]
        if char == 0x5C:  # a backslash: the next character is escaped
            skip = at + 1 if in_string else skip
        elif char == 0x22:
            in_string = not in_string
        elif not in_string:
            depth += 1 if char in (0x5B, 0x7B) else -1
            if depth > bound:
                return True
    return False


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def parse(raw: bytes) -> Dict[str, Any]:
    """The status in ``raw``: UTF-8 only (the agent writes nothing else; ``json.loads`` of bytes would also take
    UTF-16 and UTF-32, whose bytes :func:`deeper_than` does not count), then nested at most :data:`NESTING` deep."""
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return unreadable(f"not UTF-8: {exc.reason} at byte {exc.start}")
    if deeper_than(raw, NESTING):
        return unreadable(f"nested more than {NESTING} deep")
    try:
        data = json.loads(decoded, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        return unreadable(f"not JSON: {str(exc)[:80]}")
    return typed(data)


# ---------------------------------------------------------------- the typed status


def text(value: Any, bound: int = NAME) -> Optional[str]:
    """A string on one line (control characters escaped), at most ``bound`` characters; None if not a string."""
    if not isinstance(value, str):
        return None
    shown = printable(value[: bound + 1])
    return shown if len(shown) <= bound else shown[: bound - 3] + "..."


def number(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1 << 62 else None


def count(value: Any) -> Optional[int]:
    """A count (the calls of the instrumented code while a window waits): a whole number from 0, at most
    :data:`COUNT` (more is said as that many)."""
    return min(value, COUNT) if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def moment(value: Any) -> Optional[float]:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e11
    return float(value) if ok else None


def flag(value: Any) -> Optional[bool]:
    return value if isinstance(value, bool) else None


def texts(bound: int = NAME, many: int = MANY) -> Callable[[Any], Optional[List[str]]]:
    def convert(value: Any) -> Optional[List[str]]:
        if not isinstance(value, list):
            return None
        return [t for t in (text(v, bound) for v in value[:many]) if t is not None]
    return convert


def pairs(item: Callable[[Any], Any], many: int = 1000) -> Callable[[Any], Optional[List[list]]]:
    def convert(value: Any) -> Optional[List[list]]:
        if not isinstance(value, list):
            return None
        out = []
        for v in value[:many]:
            if isinstance(v, list) and len(v) == 2 and item(v[0]) is not None and item(v[1]) is not None:
                out.append([item(v[0]), item(v[1])])
        return out
    return convert


CAPTURE: Dict[str, Callable[[Any], Any]] = {
    "key": text, "state": text, "backend": text, "rank": number, "step": number, "recorded": pairs(number),
    "traces": texts(TEXT, 1000), "failed": pairs(lambda v: text(v, TEXT), 100), "error": lambda v: text(v, TEXT)}


def captures(value: Any) -> Optional[List[Dict[str, Any]]]:
    """Each capture a dict of :data:`CAPTURE`'s fields, of their types (one not: left out)."""
    if not isinstance(value, list):
        return None
    return [_fields(c, CAPTURE) for c in value[:64] if isinstance(c, dict)]


FIELDS: Dict[str, Callable[[Any], Any]] = {
    "pid": number, "recipe": text, "id": text, "time": moment, "attached_at": moment, "targets": texts(),
    "steps": number, "functions": number, "calls": count, "running": texts(NAME, 20), "why": lambda v: text(v, TEXT),
    "error": lambda v: text(v, TEXT), "original_code": flag, "clean": flag, "captures": captures,
    "reason": lambda v: v if isinstance(v, str) and v in REASONS else None, "samples": count, "seconds": moment,
    "stopped": text}


def _fields(data: Dict[str, Any], fields: Dict[str, Callable[[Any], Any]]) -> Dict[str, Any]:
    out = {}
    for key, convert in fields.items():
        value = convert(data[key]) if key in data else None
        if value is not None:
            out[key] = value
    return out


def typed(data: Any) -> Dict[str, Any]:
    """A status as an agent writes it (``agent.Attachment.report``): its state one of :data:`STATES`, each field of
    :data:`FIELDS` of its type and bounded, the rest left out; anything else :func:`unreadable`."""
    if not isinstance(data, dict):
        return unreadable(f"a JSON {type(data).__name__}, not an object")
    state = data.get("state")
    if state not in STATES:
        shown = repr(state[:40]) if isinstance(state, str) else f"a JSON {type(state).__name__}"
        return unreadable(f"its state is {shown}")
    return dict(_fields(data, FIELDS), state=state)


# ---------------------------------------------------------------- asking out, and the traces said


def ask_detach(base: str) -> str:
    """``detach`` made in the channel of ``base`` (the agent polls for it); "" when made, or there already as a
    file, or the folder has gone (the agent then restores on its own).  Otherwise why not, in a few words: what
    the job put there is not followed, opened or waited on."""
    try:
        base_fd = open_base(base)
    except FileNotFoundError:
        return ""
    except Unusable as exc:
        return str(exc)
    try:
        out_fd = open_out(base_fd)
    except FileNotFoundError:
        return ""
    except Unusable as exc:
        return str(exc)
    finally:
        os.close(base_fd)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        os.close(os.open(DETACH, flags | getattr(os, "O_CLOEXEC", 0), 0o600, dir_fd=out_fd))
        return ""
    except FileExistsError:
        try:
            mode = os.stat(DETACH, dir_fd=out_fd, follow_symlinks=False).st_mode
        except OSError as exc:
            return f"{DETACH} cannot be made ({exc.strerror})"
        return "" if stat.S_ISREG(mode) else f"the job put {kind(mode)} where the detach file goes"
    except OSError as exc:
        return f"{DETACH} cannot be made ({exc.strerror})"
    finally:
        os.close(out_fd)


def save_folder(save_path: str, pid: int) -> str:
    """The folder ``save_path`` names for process ``pid``, at injection: itself when absolute, else under the
    process's working folder (``/proc/PID/cwd``); "" when that cannot be read, or when a symbolic link lies on the
    way (the job's user may have put it there to name any folder she likes)."""
    if not save_path:
        return ""
    if not os.path.isabs(save_path):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            return ""
        if not os.path.isabs(cwd):
            return ""
        save_path = os.path.join(cwd, save_path)
    named = os.path.normpath(save_path)
    return named if os.path.realpath(named) == named else ""  # a link on the way (hers?): no folder root named
