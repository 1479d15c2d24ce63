"""Whether ``patchkit run``'s COMMAND lets its Python processes see the hook, read from its words before it starts.

The hook reaches a Python process through its environment, inherited by every child: ``PYTHONPATH`` brings
``_run/sitecustomize.py``, which ``site`` imports at start-up, and ``PATCHKIT_RUN`` says what to patch.  Some
command lines take that away, and the job then records nothing, without a word:

- ``python -I`` and ``python -E`` ignore ``PYTHONPATH``, and ``python -S`` imports no ``site``: that process
  runs unpatched (the Python processes it starts without those flags inherit the environment and are patched);
  a script whose ``#!`` line runs Python so is the same;
- ``env -i``, ``env -u PYTHONPATH`` (or ``PATCHKIT_RUN``) and ``env PYTHONPATH=...`` take the variables from
  every process of the command;
- ``sudo`` resets the environment, and drops ``PYTHONPATH`` even with ``-E``, unless it is told to keep both
  names (``--preserve-env=PYTHONPATH,PATCHKIT_RUN``).

``PYTHONNOUSERSITE`` and ``python -s`` only leave out the user's own site-packages: the hook comes through
``PYTHONPATH``, so they change nothing and are not named.  A shell (``bash -c``) or another launcher is not
read into.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from typing import Callable, List, NamedTuple, Optional, Sequence

from patchkit.core.errors import Location, PatchkitError

PYTHON = re.compile(r"^(python|pypy)(\d+(\.\d+)*t?)?(\.exe)?$")  # python, python3, python3.13t, pypy3
FLAGS = {"I": "-I (isolated mode) ignores PYTHONPATH", "E": "-E ignores PYTHONPATH and every PYTHON* variable",
         "S": "-S imports no `site`, so no sitecustomize"}
NEEDED = ("PYTHONPATH", "PATCHKIT_RUN")
HINT = "or profile with the files patched instead: `patchkit apply RECIPE`, run the job, `patchkit revert RECIPE`"
SUDO_ARGUMENT = "ugChpDrtTUcR"  # sudo's short options that take a value, and its long ones
SUDO_LONG = ("--user", "--group", "--close-from", "--chdir", "--host", "--prompt", "--role", "--type",
             "--command-timeout", "--other-user", "--login-class", "--chroot")


class Unreached(NamedTuple):
    """One way the command keeps the hook from its Python: what, what to do, and whether any process is reached."""

    message: str
    hint: str
    nothing_reached: bool  # True: no process of the command sees the hook; False: this process, its children may


class UnreachedError(PatchkitError):
    title = "not reached"


def unreached(command: Sequence[str], hook_dir: str = "", which: Callable[[str], Optional[str]] = shutil.which,
              ) -> List[Unreached]:
    """Every way ``command`` keeps the hook (from ``hook_dir``) from its Python processes, in the order met."""
    found: List[Unreached] = []
    _read(list(command), hook_dir, which, found, depth=0)
    return found


def check(command: Sequence[str], hook_dir: str = "") -> List[str]:
    """The warnings to say before COMMAND starts; an :class:`UnreachedError` when no process of it can be reached."""
    found = unreached(command, hook_dir)
    for u in found:
        if u.nothing_reached:
            raise UnreachedError(u.message + ": nothing would be patched or recorded", Location("<command line>"),
                                 u.hint)
    return [f"{u.message}\n  hint: {u.hint}" for u in found]


def _read(args: List[str], hook_dir: str, which, found: List[Unreached], depth: int) -> None:
    if not args or depth > 4:
        return
    name = os.path.basename(args[0])
    if name == "env":
        _env(args[1:], hook_dir, which, found, depth)
    elif name == "sudo":
        _sudo(args[1:], hook_dir, which, found, depth)
    elif PYTHON.match(name):
        _python(args[0], args[1:], found)
    else:
        words = _shebang(args[0], which)
        if words:
            _read(words + args, hook_dir, which, found, depth + 1)


def _python(program: str, args: List[str], found: List[Unreached]) -> None:
    """The interpreter options before the script, ``-c`` or ``-m`` (``-IS`` is ``-I -S``)."""
    given: List[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--" or not arg.startswith("-") or arg == "-":
            break
        if arg.startswith("--"):
            i += 2 if arg == "--check-hash-based-pycs" else 1
            continue
        letters = arg[1:]
        for j, letter in enumerate(letters):
            if letter in "cm":
                i = len(args)  # the rest is the code or the module's arguments
                break
            if letter in "WX":
                i += 0 if j < len(letters) - 1 else 1  # its value: the rest of this word, or the next word
                break
            if letter in FLAGS and letter not in given:
                given.append(letter)
        i += 1
    for letter in given:
        found.append(Unreached(f"`{os.path.basename(program)} -{letter}`: {FLAGS[letter]}: that Python process "
                               "runs unpatched and records nothing (Python processes it starts without -I, -E or "
                               "-S are patched)", f"drop -{letter} from the command, {HINT}", False))


def _options(args: List[str], takes_value: str, long_values: Sequence[str]):
    """``(option, value)`` for each option before the command (``-abc`` is three; a value is the rest of the word
    or the next one), then the index of the first word after them."""
    out, i = [], 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        arg = args[i]
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if not eq and name in long_values and i + 1 < len(args):
                i, value = i + 1, args[i + 1]
            out.append((name, value))
        elif arg == "-":
            out.append(("-", ""))
        else:
            for j, letter in enumerate(arg[1:]):
                if letter in takes_value:
                    value = arg[j + 2:]
                    if not value and i + 1 < len(args):
                        i, value = i + 1, args[i + 1]
                    out.append(("-" + letter, value))
                    break
                out.append(("-" + letter, ""))
        i += 1
    return out, i + (1 if i < len(args) and args[i] == "--" else 0)


def _env(args: List[str], hook_dir: str, which, found: List[Unreached], depth: int) -> None:
    options, i = _options(args, "uSCP", ("--unset", "--split-string", "--chdir"))
    words = []
    for name, value in options:
        if name in ("-i", "-", "--ignore-environment"):
            found.append(Unreached(f"`env {name}` starts the command with an empty environment, without "
                                   f"{' and '.join(NEEDED)}", f"leave out {name}, {HINT}", True))
            return
        if name in ("-u", "--unset") and value in NEEDED:
            found.append(Unreached(f"`env -u {value}` takes {value} from the command", f"keep {value}, {HINT}", True))
            return
        if name in ("-S", "--split-string"):
            words += value.split()
    args = words + args[i:]
    i = 0
    while i < len(args) and "=" in args[i] and not args[i].startswith("="):
        name, _, value = args[i].partition("=")
        if name == "PYTHONPATH" and (not hook_dir or hook_dir not in value.split(os.pathsep)):
            found.append(Unreached("`env PYTHONPATH=...` replaces the PYTHONPATH that brings the hook",
                                   "set your PYTHONPATH before `patchkit run` instead (it keeps your folders after "
                                   f"its own), {HINT}", True))
            return
        if name == "PATCHKIT_RUN":
            found.append(Unreached("`env PATCHKIT_RUN=...` replaces what patchkit run hands the command",
                                   f"leave PATCHKIT_RUN to patchkit run, {HINT}", True))
            return
        i += 1
    _read(args[i:], hook_dir, which, found, depth + 1)


def _sudo(args: List[str], hook_dir: str, which, found: List[Unreached], depth: int) -> None:
    options, i = _options(args, SUDO_ARGUMENT, SUDO_LONG)
    kept = [n for name, value in options if name == "--preserve-env" for n in value.split(",")]
    while i < len(args) and "=" in args[i] and not args[i].startswith("="):
        kept.append(args[i].split("=", 1)[0])  # VAR=value given to sudo: set in the command's environment
        i += 1
    if not all(name in kept for name in NEEDED):
        found.append(Unreached("`sudo` resets the environment, and drops PYTHONPATH even with -E, so the command "
                               "most likely runs unpatched (unless sudoers keeps PYTHONPATH and PATCHKIT_RUN)",
                               "run patchkit itself under sudo (`sudo patchkit run ...`), or pass `sudo "
                               f"--preserve-env={','.join(NEEDED)}`", False))
    _read(args[i:], hook_dir, which, found, depth + 1)


def _shebang(program: str, which) -> List[str]:
    """``program``'s ``#!`` line as the kernel runs it (the interpreter, and the rest of the line as one word), or
    [] when it is not a script."""
    path = program if os.sep in program else which(program)
    if not path:
        return []
    try:  # a FIFO or a device named as the command is neither waited on nor read
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a link is followed, as exec does
    except OSError:
        return []
    try:
        head = os.read(fd, 256) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        head = b""
    finally:
        os.close(fd)
    if not head.startswith(b"#!"):
        return []
    interpreter, _, rest = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip().partition(" ")
    return [interpreter] + ([rest.strip()] if rest.strip() else [])  # as the kernel passes it: one word of options
