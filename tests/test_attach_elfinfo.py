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
