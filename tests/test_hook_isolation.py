"""hook.isolation: the command lines whose Python never sees `patchkit run`'s hook, read before they start."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from patchkit.hook.isolation import UnreachedError, check, unreached

HOOK = "/opt/patchkit/hook/_run"


def said(command, which=lambda name: None):
    return [(u.message.split(":")[0], u.nothing_reached) for u in unreached(command, HOOK, which)]


@pytest.mark.parametrize("command, found", [
    (["python", "-I", "-m", "pkg"], [("`python -I`", False)]),
    (["/usr/bin/python3.11", "-IS", "train.py"], [("`python3.11 -I`", False), ("`python3.11 -S`", False)]),
    (["python3", "-W", "ignore", "-E", "train.py"], [("`python3 -E`", False)]),
    (["pypy3", "-X", "dev", "-bI", "train.py"], [("`pypy3 -I`", False)]),
    (["env", "-i", "python", "train.py"], [("`env -i` starts the command with an empty environment, without "
                                            "PYTHONPATH and PATCHKIT_RUN", True)]),
    (["env", "-u", "PATCHKIT_RUN", "python", "train.py"], [("`env -u PATCHKIT_RUN` takes PATCHKIT_RUN from the "
                                                            "command", True)]),
    (["env", "--unset=PYTHONPATH", "python"], [("`env -u PYTHONPATH` takes PYTHONPATH from the command", True)]),
    (["env", "A=1", "PYTHONPATH=/src", "python", "t.py"], [("`env PYTHONPATH=...` replaces the PYTHONPATH that "
                                                            "brings the hook", True)]),
    (["env", "-S", "python3 -E", "t.py"], [("`python3 -E`", False)]),
    (["sudo", "-u", "bob", "python", "-I", "t.py"], [("`sudo` resets the environment, and drops PYTHONPATH even "
                                                     "with -E, so the command most likely runs unpatched (unless "
                                                     "sudoers keeps PYTHONPATH and PATCHKIT_RUN)", False),
                                                    ("`python -I`", False)]),
])
def test_each_way_to_hide_the_hook_is_named(command, found):
    assert said(command) == found


@pytest.mark.parametrize("command", [
    ["python", "train.py", "-I"],  # the script's own arguments
    ["python", "-c", "import x", "-E"],
    ["python", "-s", "-u", "-m", "torch.distributed.run", "t.py"],  # -s: only the user's site-packages
    ["python", "-Wignore", "-OO", "t.py"],
    ["env", f"PYTHONPATH={HOOK}{os.pathsep}/src", "python", "t.py"],
    ["sudo", "--preserve-env=PYTHONPATH,PATCHKIT_RUN", "python", "t.py"],
    ["torchrun", "--nproc-per-node", "2", "t.py"],
    ["bash", "-c", "python -I t.py"],  # a shell is not read into
])
def test_commands_that_reach_the_hook_are_let_through(command):
    assert said(command) == []


def test_a_script_s_shebang_is_read_and_a_fifo_is_not_waited_on(tmp_path):
    script = tmp_path / "job"
    script.write_text("#!/usr/bin/python3 -Es\nprint(1)\n")
    assert said([str(script), "--lr", "1"]) == [("`python3 -E`", False)]
    launcher = tmp_path / "launch"
    launcher.write_text("#!/usr/bin/env -S python3 -I\n")
    assert said(["launch"], which=lambda name: str(launcher)) == [("`python3 -I`", False)]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert said([str(fifo)]) == [] and said(["not-a-program"]) == []


def test_check_refuses_what_reaches_nothing_and_warns_about_the_rest():
    with pytest.raises(UnreachedError) as caught:
        check(["env", "-i", "python", "t.py"], HOOK)
    assert caught.value.message.endswith(": nothing would be patched or recorded")
    assert str(caught.value.where) == "<command line>" and "patchkit apply RECIPE" in caught.value.hint
    [warning] = check(["python", "-I", "t.py"], HOOK)
    assert "runs unpatched and records nothing" in warning and "\n  hint: drop -I from the command" in warning
    assert check(["python", "t.py"], HOOK) == []


def test_what_it_says_is_what_python_does(tmp_path):
    """Measured on this Python: PYTHONPATH's sitecustomize runs without flags and with -s or PYTHONNOUSERSITE,
    and not with -I, -E or -S."""
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['SEEN'] = '1'\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path), PYTHONNOUSERSITE="1")
    seen = {}
    for flags in ([], ["-s"], ["-I"], ["-E"], ["-S"]):
        done = subprocess.run([sys.executable, *flags, "-c", "import os; print(os.environ.get('SEEN', '0'))"],
                              env=env, capture_output=True, text=True, timeout=60)
        seen[" ".join(flags)] = done.stdout.strip() == "1"
        assert (not said([sys.executable, *flags, "t.py"])) == seen[" ".join(flags)], flags
    assert seen == {"": True, "-s": True, "-I": False, "-E": False, "-S": False}
