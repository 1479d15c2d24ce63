"""attach.elfinfo: a process's Python (version, flavour) read from /proc/PID/maps and the ELF of its libpython or
interpreter, on every CPython this machine has; every hostile file one AttachError line naming it."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys

import pytest

import attach_helpers as helpers
from patchkit.attach import elfinfo
from patchkit.attach.probe import Interpreter
from patchkit.attach.process import AttachError

SAY = "import sys, sysconfig; print('%d %d %d' % sys.version_info[:3], int(bool(sysconfig.get_config_var('Py_GIL_DISABLED'))))"
LOOP = "import time\nwhile True:\n    time.sleep(0.1)"


def interpreters():
    """This one, the other CPythons found (attach_helpers.other_pythons) and the system's python3 (a static build on
    Debian), each once."""
    found = {"this": sys.executable, **helpers.other_pythons()}
    system = shutil.which("python3", path="/usr/bin:/bin")
    if system:
        found["system"] = system
    return found


@pytest.fixture
def running():
    started = []

    def start(exe, *args):
        proc = subprocess.Popen([exe, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        started.append(proc)
        helpers.wait_for(lambda: "libc" in open(f"/proc/{proc.pid}/maps").read(), 60, proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("which", ["this", "3.10", "3.12", "3.13", "system"])
def test_each_cpython_here_is_read_right_without_running_it(which, running):
    exe = interpreters().get(which)
    if exe is None:
        pytest.skip(f"no {which} CPython on this machine (attach_helpers.other_pythons looks in pyenv and on PATH)")
    major, minor, micro, free = map(int, subprocess.run([exe, "-c", SAY], capture_output=True, text=True,
                                                         check=True).stdout.split())
    proc = running(exe, "-c", LOOP)
    found = elfinfo.python_of(proc.pid, os.readlink(f"/proc/{proc.pid}/exe"))
    assert found.version == (major, minor, micro) and found.free_threaded == bool(free)
    assert found.how != "file name", found  # read from the ELF: the name is only the last resort


def test_a_program_with_no_python_in_its_elf_falls_back_on_its_name(tmp_path, running):
    fake = tmp_path / "python3.12"
    shutil.copy2(shutil.which("sleep"), fake)
    proc = running(str(fake), "60")
    found = elfinfo.python_of(proc.pid, str(fake))
    assert found.version == (3, 12, -1) and found.how == "file name"
    assert Interpreter(found.version, False, str(fake), "").shown == "Python 3.12"
    other = tmp_path / "sleeper"
    shutil.copy2(shutil.which("sleep"), other)
    with pytest.raises(AttachError, match="cannot tell which Python process"):
        elfinfo.python_of(running(str(other), "60").pid, str(other))


def _section_header(data: bytes, index: int) -> int:
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, = struct.unpack_from("<H", data, 0x3A)
    return shoff + index * shentsize


def _index(file: str, name: str) -> int:
    from elftools.elf.elffile import ELFFile

    with open(file, "rb") as handle:
        elf = ELFFile(handle)
        return next(i for i, s in enumerate(elf.iter_sections()) if s.name == name)


def _huge(src: str, dst, name: str):
    """A copy of ``src`` whose section ``name`` claims 2**40 bytes."""
    data = bytearray(open(src, "rb").read())
    struct.pack_into("<Q", data, _section_header(data, _index(src, name)) + 0x20, 1 << 40)
    dst.write_bytes(bytes(data))
    return dst


def _libpython_or_interpreter() -> str:
    """The ELF file this interpreter's version is read from."""
    lib = elfinfo.mapped_libpython(os.getpid())
    return lib[0] if lib else os.path.realpath(sys.executable)


@pytest.mark.parametrize("kind", ["truncated", "huge .dynsym", "huge .shstrtab", "huge .PyRuntime", "not ELF",
                                  "fifo", "link", "folder", "empty", "device"])
def test_a_hostile_file_is_one_clear_line(kind, tmp_path):
    real = _libpython_or_interpreter()
    bad = tmp_path / "libpython3.11.so.1.0"
    if kind == "truncated":
        bad.write_bytes(open(real, "rb").read(4096))
    elif kind.startswith("huge"):
        name = kind.split()[1]
        if name == ".PyRuntime" and sys.version_info < (3, 13):
            real = helpers.other_pythons().get("3.13")
            lib = real and os.path.join(os.path.dirname(real), "..", "lib", "libpython3.13.so.1.0")
            real = lib if lib and os.path.isfile(lib) else real
            if real is None:
                pytest.skip("no CPython 3.13 here to take a .PyRuntime section from")
        _huge(os.path.realpath(real), bad, name)
    elif kind == "not ELF":
        bad.write_text("#!/bin/sh\necho python3.11\n")
    elif kind == "fifo":
        os.mkfifo(bad)
    elif kind == "link":
        bad.symlink_to(real)
    elif kind == "folder":
        bad.mkdir()
    elif kind == "empty":
        bad.write_bytes(b"")
    else:
        bad = "/dev/zero"
    with pytest.raises(AttachError) as err:
        elfinfo.read_file(str(bad), 4242)
    text = str(err.value)
    assert str(bad) in text and "pid 4242" in str(err.value.where) and "\n" not in text and "Traceback" not in text
    if kind.startswith("huge"):
        assert "end of the file" in text or "section size" in text, text


def test_pyelftools_is_imported_only_when_a_file_is_read():
    """Importing attach (and every other command's start) never loads pyelftools; reading an ELF file does."""
    code = ("import sys; import patchkit.attach.access, patchkit.attach.session, patchkit.cli.commands\n"
            "print(sorted(m for m in sys.modules if m.startswith('elftools')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(helpers.REPO))
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


def _crafted(dst, *, dynsym=24 * 3, entsize=24, shentsize=64, shnum=5, dynstr=None, shstrtab=None, version=None):
    """A small ELF64 file (little-endian) as a stranger may write one: a header, ``.shstrtab``, ``.dynstr``,
    ``.dynsym`` (``entsize``-byte entries, ``dynsym`` bytes of them), ``.data``; a section that claims many bytes
    lies in the hole at the end of a sparse file (zeros), so no byte of it is written.  ``version``: a ``Py_Version``
    symbol with that value in ``.data``."""
    names = b"\0.shstrtab\0.dynstr\0.dynsym\0.data\0"
    strings = b"\0Py_Version\0"
    at = {"shstrtab": 64, "dynstr": 160, "headers": 256, "data": 1024, "dynsym": 2048, "hole": 4096}
    symbols = b"\0" * 24
    if version is not None:  # st_name, st_info (global object), st_other, st_shndx, st_value, st_size
        symbols += struct.pack("<IBBHQQ", 1, 0x11, 0, 4, 0x1000, 4)
    sections = [(0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
                (1, 3, 0, 0, *((at["hole"], shstrtab) if shstrtab else (at["shstrtab"], len(names))), 0, 0, 1, 0),
                (11, 3, 2, 0, *((at["hole"], dynstr) if dynstr else (at["dynstr"], len(strings))), 0, 0, 1, 0),
                (19, 11, 2, 0, at["dynsym"] if dynsym <= 1024 else at["hole"], dynsym, 2, 1, 8, entsize),
                (27, 1, 3, 0x1000, at["data"], 8, 0, 0, 8, 0)]
    header = (b"\x7fELF\x02\x01\x01" + b"\0" * 9
              + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, at["headers"], 0, 64, 56, 0, shentsize, shnum, 1))
    data = bytearray(at["hole"])
    data[:64] = header
    data[at["shstrtab"]:at["shstrtab"] + len(names)] = names
    data[at["dynstr"]:at["dynstr"] + len(strings)] = strings
    for index, row in enumerate(sections):
        struct.pack_into("<IIQQQQIIQQ", data, at["headers"] + 64 * index, *row)
    data[at["dynsym"]:at["dynsym"] + len(symbols)] = symbols
    struct.pack_into("<I", data, at["data"], version or 0)
    with open(dst, "wb") as handle:
        handle.write(data)
        handle.truncate(at["hole"] + max(dynsym, dynstr or 0, shstrtab or 0, 64 * shnum))
    return str(dst)


def test_a_crafted_elf_file_is_read_by_its_symbols(tmp_path):
    """The hand-made file the hostile tests bend, unbent: its Py_Version is read (the tests below refuse it for
    what they change, not for being hand-made)."""
    found = elfinfo.read_file(_crafted(tmp_path / "libpython3.11.so", version=0x030B04F0), 4242)
    assert found is not None and found.version == (3, 11, 4) and found.how == "Py_Version", found


BOUNDLESS = {  # what a stranger's file claims (its large parts a hole of a sparse file): the line that refuses it
    "1-byte symbols": (dict(dynsym=300 << 20, entsize=1), f"{300 << 20} symbols of 1 byte"),
    "10 million symbols": (dict(dynsym=24 * 10_000_000), "10000000 symbols (at most 200000 read)"),
    "wrong e_shentsize": (dict(shentsize=32), "section headers of 32 bytes (ELF64's are 64)"),
    "huge e_shnum": (dict(shnum=60_000), "60000 sections (at most 4096 read)"),
    "extended numbering": (dict(shnum=0), "extended section numbering"),
    "huge .dynstr": (dict(dynstr=300 << 20), f".dynstr of {300 << 20} bytes (at most 16777216 read)"),
    "huge .shstrtab": (dict(shstrtab=300 << 20), f".shstrtab of {300 << 20} bytes (at most 16777216 read)"),
}


@pytest.mark.parametrize("kind", sorted(BOUNDLESS))
def test_an_elf_file_that_claims_too_much_is_refused_before_it_is_walked(kind, tmp_path):
    """Every count the file gives is bounded before anything loops over it: a planted libpython cannot keep root's
    reader busy for hours (the test simply has to finish; before, the symbol cases took hours)."""
    claims, why = BOUNDLESS[kind]
    bad = _crafted(tmp_path / "libpython3.11.so", **claims)
    with pytest.raises(AttachError) as err:
        elfinfo.read_file(bad, 4242)
    text = str(err.value)
    assert text.startswith(f"{bad} of process 4242 is not an ELF file patchkit reads: ") and why in text, text
    assert "\n" not in text and "pid 4242" in str(err.value.where)


def test_a_strangers_job_mapping_a_planted_libpython_is_refused_in_one_line(stranger):
    """The review's case: another user maps her own ``libpython3.11.so`` (300 MB of 1-byte symbols, a hole) into a
    sleeping Python; root learning that job's Python gets one line naming her file, at once."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 for the stranger to run (her job needs an interpreter she may execute)")
    planted = _crafted(stranger.sticky / "libpython3.11.so", dynsym=300 << 20, entsize=1)
    os.chown(planted, stranger.uid, stranger.gid)
    code = (f"import mmap, sys, time\nf = open({planted!r}, 'rb')\n"
            "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\nprint('mapped', flush=True)\ntime.sleep(600)")
    job = subprocess.Popen([python, "-c", code], user=stranger.uid, group=stranger.gid, extra_groups=[], cwd="/",
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    try:
        helpers.wait_for(lambda: planted in open(f"/proc/{job.pid}/maps").read(), 60, job)
        with pytest.raises(AttachError) as err:
            elfinfo.python_of(job.pid, python)
    finally:
        job.kill()
        job.wait()
    text = str(err.value)
    assert text.startswith(f"{planted} of process {job.pid} is not an ELF file patchkit reads: ") and "\n" not in text
    assert f"{300 << 20} symbols of 1 byte" in text, text
