"""Which Python a process runs, read from its files as data: nothing of the job's is ever run to learn it.

``/proc/PID/maps`` names the ``libpython3.X[t].so`` the process mapped (a shared-library build); that file, or
else the interpreter itself (``/proc/PID/exe``: the very file the process runs), is read as an ELF file with
pyelftools, each file bounded in size, each read bounded, every failure one :class:`AttachError` line naming
the process and the file:

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


def _from_elf(stream: Bounded) -> Optional[Tuple[Tuple[int, int, int], bool, str]]:
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(stream)
    order = "<" if elf.little_endian else ">"
    for index, section in enumerate(elf.iter_sections()):
        if section["sh_type"] != "SHT_NOBITS" and section["sh_offset"] + section["sh_size"] > stream.size:
            raise ValueError(f"section {index} ({section.name[:40]!r}) claims {section['sh_size']} bytes, past the "
                             "end of the file")
    runtime = elf.get_section_by_name(".PyRuntime")
    if runtime is not None and runtime["sh_type"] != "SHT_NOBITS" and runtime["sh_size"] >= 24:
        head = _read_at(stream, runtime["sh_offset"], 24)
        if head[:8] == COOKIE:
            version, free = struct.unpack(order + "QQ", head[8:24])
            if free not in (0, 1):
                raise ValueError(f"_Py_DebugOffsets.free_threaded is {free}, neither 0 nor 1")
            return _hex(version), bool(free), "debug offsets"
    dynsym = elf.get_section_by_name(".dynsym")
    if dynsym is None or not hasattr(dynsym, "get_symbol_by_name"):
        return None
    symbols = dynsym.get_symbol_by_name("Py_Version") or []
    symbol = symbols[0] if symbols else None
    if symbol is not None and symbol["st_size"] in (4, 8) and isinstance(symbol["st_shndx"], int):
        section = elf.get_section(symbol["st_shndx"])
        offset = symbol["st_value"] - section["sh_addr"]
        if not 0 <= offset <= section["sh_size"] - symbol["st_size"]:
            raise ValueError("Py_Version lies outside its section")
        data = _read_at(stream, section["sh_offset"] + offset, symbol["st_size"])
        return _hex(struct.unpack(order + ("Q" if len(data) == 8 else "I"), data)[0]), False, "Py_Version"
    if dynsym.get_symbol_by_name("Py_Is"):
        rodata = elf.get_section_by_name(".rodata")
        micros = set()
        if rodata is not None and rodata["sh_type"] != "SHT_NOBITS":
            micros = {int(m.group(1)) for m in MICRO_310.finditer(_read_at(stream, rodata["sh_offset"],
                                                                            rodata["sh_size"]))}
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
