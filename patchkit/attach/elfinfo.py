"""Which Python a process runs, read from its files as data: nothing of the job's is ever run to learn it.

``/proc/PID/maps`` names the ``libpython3.X[t].so`` the process mapped (a shared-library build); that file, or
else the interpreter itself (``/proc/PID/exe``: the very file the process runs), is read as an ELF file with
pyelftools (the ELF header only), each file bounded in size, each read bounded, every failure one
:class:`AttachError` line naming the process and the file.  Every count the file gives (section headers and
their size, ``.dynsym``'s symbols and their size, string tables) is checked against a bound before anything is
read or walked, and the sections, names and symbols are read here as whole blocks, never a string at a time to its
NUL: a file another user wrote costs a bounded time and memory whatever it holds.  The version:

- 3.13 and later: the ``.PyRuntime`` section starts with ``_Py_DebugOffsets``: the cookie ``xdebugpy``, then
  ``PY_VERSION_HEX`` and whether the build is free-threaded (two uint64 of the file's byte order);
- 3.11 and 3.12: the data symbol ``Py_Version`` (``PY_VERSION_HEX``) in ``.dynsym``;
- 3.10: ``Py_Is`` (new in 3.10) without ``Py_Version`` (new in 3.11) in ``.dynsym``; its micro version is the
  one ``3.10.N`` string of ``.rodata`` (``PY_VERSION``, which the linker may share with the tail of a longer
  string such as the install prefix), unknown (-1) when there is not exactly one;
- else, last, the file name (``python3.X``, ``libpython3.X``).

A file someone else controls may lie, and the name can lie most easily: that is safe, because the version only
chooses the way in (gdb or ``sys.remote_exec``) and the interpreter to send from; the code that goes in checks
everything again inside the job, and nothing here runs anything.  Which is also why the libpython named in
``maps`` is read by its path (opened without following a link), not matched to the mapped inode.
"""

from __future__ import annotations

import os
import re
import stat
import struct
from typing import NamedTuple, Optional, Tuple

from patchkit.attach.process import AttachError, path, python_name, where

MAX_FILE = 1 << 30  # an interpreter or libpython with its debug information: tens of MiB
MAX_READ = 64 << 20  # the most one read may ask for (.rodata of a libpython: a few MiB)
MAX_MAPS = 64 << 20  # /proc/PID/maps of a large job: a few MiB
MAX_SECTIONS = 4096  # an interpreter or libpython: about 40
MAX_SYMBOLS = 200_000  # .dynsym of a libpython or python executable: about 1,000 to 20,000
MAX_STRINGS = 16 << 20  # .dynstr of a libpython: a few hundred KiB; .shstrtab: a few hundred bytes
SHT_DYNSYM, SHT_NOBITS = 11, 8
COOKIE = b"xdebugpy"
LIBPYTHON = re.compile(r"/libpython(\d+)\.(\d+)(t?)d?m?\.so(?:\.[\d.]+)?$")
MICRO_310 = re.compile(rb"(?<![0-9.])3\.10\.(\d{1,3})(?:(?:a|b|rc)\d{1,2})?\+?\x00")


class Found(NamedTuple):
    version: Tuple[int, int, int]  # micro -1: not known
    free_threaded: bool
    file: str  # the file it was read from
    how: str  # "debug offsets", "Py_Version", "3.10 symbols", "file name"


class Bounded:
    """A file pyelftools reads: no read past the end, none larger than :data:`MAX_READ` (a section header may
    claim any size)."""

    def __init__(self, handle, size: int):
        self.handle, self.size = handle, size

    def seek(self, offset, whence=0):
        return self.handle.seek(offset, whence)

    def tell(self):
        return self.handle.tell()

    def read(self, n=-1):
        rest = max(0, self.size - self.handle.tell())
        n = rest if n is None or n < 0 else min(n, rest)
        if n > MAX_READ:
            raise ValueError(f"a read of {n} bytes (more than {MAX_READ})")
        return self.handle.read(n)


def _open(file: str, pid: int, follow: bool):
    """The file, open for reading: a regular file (no FIFO, device or folder; a link only where ``follow``),
    at most :data:`MAX_FILE` bytes."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(file, flags)
    except OSError as exc:
        why = "it is a symbolic link" if exc.errno == 40 else (exc.strerror or type(exc).__name__)
        raise AttachError(f"cannot read {file} to learn the Python of process {pid}: {why}", where(pid),
                          "attach reads the interpreter's file, never runs it") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE:
        os.close(fd)
        what = "not a regular file" if not stat.S_ISREG(st.st_mode) else f"{st.st_size} bytes (more than {MAX_FILE})"
        raise AttachError(f"{file} of process {pid} is {what}: not read", where(pid),
                          "attach gets only into a CPython interpreter")
    return os.fdopen(fd, "rb"), st.st_size


def _read_at(stream: Bounded, offset: int, size: int) -> bytes:
    stream.seek(offset)
    data = stream.read(size)
    if len(data) != size:
        raise ValueError(f"{size} bytes at offset {offset} are past the end of the file")
    return data


def _hex(value: int) -> Tuple[int, int, int]:
    major, minor, micro = (value >> 24) & 0xFF, (value >> 16) & 0xFF, (value >> 8) & 0xFF
    if major != 3:
        raise ValueError(f"version number {value:#x} is not a Python 3's")
    return major, minor, micro


class Refused(ValueError):
    """A file that claims more than patchkit walks (sections, symbols, strings): refused before any loop."""


class Section(NamedTuple):
    name: bytes
    type: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int


# ELF class: (section header struct and size, symbol struct and size); Elf64_Sym and Elf32_Sym order fields apart.
LAYOUT = {64: ("IIQQQQIIQQ", 64, "IBBHQQ", 24), 32: ("IIIIIIIIII", 40, "IIIBBH", 16)}


def _sections(stream: Bounded, elf, order: str) -> Tuple[Section, ...]:
    """The section headers, read as one block after every count in the ELF header is checked against a bound."""
    layout, entry = LAYOUT[elf.elfclass][:2]
    head = elf.header
    if head["e_shoff"] == 0:
        return ()
    if head["e_shentsize"] != entry:
        raise Refused(f"section headers of {head['e_shentsize']} bytes (ELF{elf.elfclass}'s are {entry})")
    if head["e_shnum"] == 0 or head["e_shstrndx"] == 0xFFFF:
        raise Refused("extended section numbering (more than 65279 sections)")
    if head["e_shnum"] > MAX_SECTIONS:
        raise Refused(f"{head['e_shnum']} sections (at most {MAX_SECTIONS} read)")
    table = _read_at(stream, head["e_shoff"], head["e_shnum"] * entry)
    rows = list(struct.iter_unpack(order + layout, table))
    for index, row in enumerate(rows):
        if row[1] != SHT_NOBITS and row[4] + row[5] > stream.size:
            raise ValueError(f"section {index} claims {row[5]} bytes, past the end of the file")
    if not 0 < head["e_shstrndx"] < len(rows):
        raise ValueError(f"e_shstrndx {head['e_shstrndx']} names no section")
    sections = [Section(b"", r[1], r[3], r[4], r[5], r[6], r[9]) for r in rows]
    names = _strings(stream, sections[head["e_shstrndx"]], ".shstrtab")
    return tuple(s._replace(name=_name(names, r[0])) for s, r in zip(sections, rows))


def _strings(stream: Bounded, section: Section, what: str) -> bytes:
    """A string table, read whole once its size is checked (no string is then read past its end)."""
    if section.size > MAX_STRINGS:
        raise Refused(f"a {what} of {section.size} bytes (at most {MAX_STRINGS} read)")
    return b"" if section.type == SHT_NOBITS else _read_at(stream, section.offset, section.size)


def _name(strings: bytes, offset: int, longest: int = 256) -> bytes:
    """The NUL-ended name at ``offset`` (only its first ``longest`` bytes looked at: a longer one is none of ours)."""
    end = strings.find(b"\0", offset, offset + longest)
    return strings[offset:end] if end >= 0 else b""


def _symbols(stream: Bounded, elf, order: str, sections, wanted) -> dict:
    """The first symbol of each name in ``wanted`` in ``.dynsym`` ((st_value, st_size, st_shndx)), its size and
    count checked before it is read and walked."""
    layout, entry = LAYOUT[elf.elfclass][2:]
    dynsym = next((s for s in sections if s.name == b".dynsym" and s.type == SHT_DYNSYM), None)
    if dynsym is None:
        return {}
    count = dynsym.size // max(dynsym.entsize, 1)
    if dynsym.entsize != entry:
        raise Refused(f"{count} symbols of {dynsym.entsize} byte{'s' if dynsym.entsize != 1 else ''} in .dynsym "
                      f"(ELF{elf.elfclass} symbols have {entry})")
    if count > MAX_SYMBOLS:
        raise Refused(f"{count} symbols (at most {MAX_SYMBOLS} read) in .dynsym")
    if not 0 < dynsym.link < len(sections):
        raise ValueError(f".dynsym links to section {dynsym.link}, which is not in the file")
    strings = _strings(stream, sections[dynsym.link], ".dynstr")
    found = {}
    for symbol in struct.iter_unpack(order + layout, _read_at(stream, dynsym.offset, count * entry)):
        name, value, size, shndx = (symbol[0], symbol[4], symbol[5], symbol[3]) if entry == 24 else \
            (symbol[0], symbol[1], symbol[2], symbol[5])
        if name and strings[name:name + 1] == b"P":
            text = _name(strings, name, 16)
            if text in wanted and text not in found:
                found[text] = (value, size, shndx)
    return found


def _from_elf(stream: Bounded) -> Optional[Tuple[Tuple[int, int, int], bool, str]]:
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(stream)  # the ELF header alone: class, byte order, where the section headers are and how many
    order = "<" if elf.little_endian else ">"
    sections = _sections(stream, elf, order)
    named = {}
    for section in sections:
        named.setdefault(section.name, section)
    runtime = named.get(b".PyRuntime")
    if runtime is not None and runtime.type != SHT_NOBITS and runtime.size >= 24:
        head = _read_at(stream, runtime.offset, 24)
        if head[:8] == COOKIE:
            version, free = struct.unpack(order + "QQ", head[8:24])
            if free not in (0, 1):
                raise ValueError(f"_Py_DebugOffsets.free_threaded is {free}, neither 0 nor 1")
            return _hex(version), bool(free), "debug offsets"
    symbols = _symbols(stream, elf, order, sections, (b"Py_Version", b"Py_Is"))
    value, size, shndx = symbols.get(b"Py_Version", (0, 0, 0))
    if size in (4, 8) and 0 < shndx < 0xFF00:
        if shndx >= len(sections):
            raise ValueError(f"Py_Version's section {shndx} is not in the file")
        section = sections[shndx]
        offset = value - section.addr
        if not 0 <= offset <= section.size - size:
            raise ValueError("Py_Version lies outside its section")
        data = _read_at(stream, section.offset + offset, size)
        return _hex(struct.unpack(order + ("Q" if size == 8 else "I"), data)[0]), False, "Py_Version"
    if b"Py_Is" in symbols:
        rodata = named.get(b".rodata")
        micros = set()
        if rodata is not None and rodata.type != SHT_NOBITS:  # one read (at most MAX_READ), one linear scan
            micros = {int(m.group(1)) for m in MICRO_310.finditer(_read_at(stream, rodata.offset, rodata.size))}
        return (3, 10, micros.pop() if len(micros) == 1 else -1), False, "3.10 symbols"
    return None


def read_file(file: str, pid: int, follow: bool = False) -> Optional[Found]:
    """What the ELF ``file`` says of its Python (None when it says nothing); :class:`AttachError` when it is not
    a file that can be read as an ELF file."""
    handle, size = _open(file, pid, follow)
    try:
        with handle:
            found = _from_elf(Bounded(handle, size))
    except AttachError:
        raise
    except Refused as exc:
        raise AttachError(f"{file} of process {pid} is not an ELF file patchkit reads: {exc}", where(pid),
                          "attach gets only into a CPython interpreter") from None
    except Exception as exc:  # noqa: BLE001 - a malformed file: pyelftools, struct and our bounds raise many kinds
        text = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise AttachError(f"{file} of process {pid} cannot be read as an ELF file: {text}", where(pid),
                          "attach gets only into a CPython interpreter") from None
    return Found(*found[:2], file, found[2]) if found else None


def mapped_libpython(pid: int) -> Optional[Tuple[str, Tuple[int, int], bool]]:
    """(path, (major, minor), free-threaded by its name) of the libpython the process mapped, or None."""
    try:
        with open(path(pid, "maps"), "rb") as handle:
            seen = 0
            for line in handle:
                seen += len(line)
                if seen > MAX_MAPS:
                    break
                name = line.rstrip(b"\n").split(None, 5)[5:]
                text = name[0].decode("utf-8", "surrogateescape") if name else ""
                found = LIBPYTHON.search(text)
                if found:
                    return text, (int(found.group(1)), int(found.group(2))), bool(found.group(3))
    except OSError as exc:
        raise AttachError(f"cannot read /proc/{pid}/maps: {exc.strerror}", where(pid),
                          "attach as the process's owner or as root") from None
    return None


def python_of(pid: int, exe: str) -> Found:
    """The Python of process ``pid`` (``exe``: its interpreter's path, for the name only), from its files."""
    lib = mapped_libpython(pid)
    if lib is not None:
        found = read_file(lib[0], pid)
        if found is not None:
            return found._replace(free_threaded=found.free_threaded or lib[2])
    found = read_file(path(pid, "exe"), pid, follow=True)  # the kernel's link to the very file the process runs
    if found is not None:
        return found._replace(file=exe or found.file)
    # Last: the name.  Safe, since a lie only chooses the way in; the agent checks everything inside the job.
    if lib is not None:
        return Found((lib[1][0], lib[1][1], -1), lib[2], lib[0], "file name")
    named = python_name(exe)
    if named and named[0]:
        major, minor = named[0].split(".")
        return Found((int(major), int(minor), -1), named[1], exe, "file name")
    raise AttachError(f"cannot tell which Python process {pid} runs: {exe} has no CPython version in its ELF "
                      "file nor in its name", where(pid), "attach works with CPython 3.10 and later")
