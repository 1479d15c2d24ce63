"""The job's sys.path rebuilt from /proc as data: script folder, PYTHONPATH, venvs, .pth files, -I/-E/-P/-s/-S."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchkit.attach import jobpath
from patchkit.attach.process import read

SLEEP = "import time\nwhile True: time.sleep(0.2)\n"


def started(args, tmp_path, env=None, cwd=None):
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH", "PYTHONNOUSERSITE")}
    proc = subprocess.Popen(args, cwd=cwd or tmp_path, env=dict(base, **(env or {})),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    return proc


@pytest.fixture
def procs():
    started_here = []
    yield started_here
    for p in started_here:
        p.kill()
        p.wait()


def path_of(proc) -> jobpath.JobPath:
    for _ in range(50):  # until the interpreter has exec'd (its command line is the script's)
        info = read(proc.pid)
        if info.argv and info.argv[0] != "":
            return jobpath.of(info)
        time.sleep(0.05)
    return jobpath.of(read(proc.pid))


@pytest.mark.parametrize("argv,flags,runs,name", [
    (["python", "train.py", "-m", "x"], "", "script", "train.py"),
    (["python", "-u", "-X", "dev", "-m", "pkg.run", "--a"], "u", "module", "pkg.run"),
    (["python", "-Ic", "print(1)"], "I", "command", ""),
    (["python", "-Es", "--check-hash-based-pycs", "always", "t.py"], "Es", "script", "t.py"),
    (["python"], "", "stdin", ""),
    (["python", "-"], "", "stdin", ""),
    (["python", "-W", "ignore", "--", "t.py"], "", "script", "t.py"),
])
def test_the_command_line_says_what_the_interpreter_runs(argv, flags, runs, name):
    assert jobpath.command(argv) == (flags, runs, name)


def test_a_script_s_folder_then_pythonpath_then_the_environment_s_site_folders(tmp_path, procs):
    (tmp_path / "app").mkdir()
    (tmp_path / "lib").mkdir()
    script = tmp_path / "app" / "train.py"
    script.write_text(SLEEP)
    procs.append(started([sys.executable, "app/train.py"], tmp_path, {"PYTHONPATH": f"lib:{tmp_path}/nothing"}))
    found = path_of(procs[-1])
    assert found.script == str(script)
    assert found.cwd == str(tmp_path)
    assert found.entries[:2] == (str(tmp_path / "app"), str(tmp_path / "lib"))  # a relative entry: the job's cwd's
    assert str(tmp_path / "nothing") not in found.entries
    import torch  # this environment's site-packages is on the job's path too

    assert found.find("torch") == str(Path(torch.__file__).parent.parent)


def test_isolated_and_ignore_environment_leave_pythonpath_and_the_script_folder_out(tmp_path, procs):
    (tmp_path / "lib").mkdir()
    (tmp_path / "train.py").write_text(SLEEP)
    procs.append(started([sys.executable, "-I", "train.py"], tmp_path, {"PYTHONPATH": "lib"}))
    isolated = path_of(procs[-1])
    assert str(tmp_path) not in isolated.entries and str(tmp_path / "lib") not in isolated.entries
    procs.append(started([sys.executable, "-E", "train.py"], tmp_path, {"PYTHONPATH": "lib"}))
    ignored = path_of(procs[-1])
    assert ignored.entries[0] == str(tmp_path) and str(tmp_path / "lib") not in ignored.entries
    procs.append(started([sys.executable, "-c", SLEEP], tmp_path, {"PYTHONSAFEPATH": "1"}))
    assert str(tmp_path) not in path_of(procs[-1]).entries
    procs.append(started([sys.executable, "-S", "train.py"], tmp_path))
    assert path_of(procs[-1]).entries == (str(tmp_path),)  # no site: only the script's folder (and the stdlib)


def test_a_venv_started_by_its_own_path_is_found_though_proc_exe_names_the_base_interpreter(tmp_path, procs):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    sites = list(venv.glob("lib/python3*/site-packages"))
    assert sites
    (sites[0] / "tjob").mkdir()
    (tmp_path / "added").mkdir()
    (tmp_path / "train.py").write_text(SLEEP)
    procs.append(started([str(venv / "bin" / "python"), "train.py"], tmp_path))
    (sites[0] / "extra.pth").write_text(f"# a comment\n{tmp_path}/added\nimport os; os.system('touch {tmp_path}/ran')\n")
    info = read(procs[-1].pid)
    assert not info.exe.startswith(str(venv))  # /proc/PID/exe: the base interpreter the venv links to
    found = jobpath.of(info)
    assert found.find("tjob") == str(sites[0])
    assert str(tmp_path / "added") in found.entries  # a .pth's folder line; its import line is never run
    assert not (tmp_path / "ran").exists()
    procs.append(started(["python", "train.py"], tmp_path, {"PATH": f"{venv}/bin:{os.environ['PATH']}"}))
    assert path_of(procs[-1]).find("tjob") == str(sites[0])  # started as `python`, found on its PATH


def test_hostile_pth_and_pyvenv_files_are_read_bounded_and_never_followed(tmp_path, procs):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    os.mkfifo(site / "a-fifo.pth")  # would block a reader
    (site / "b-link.pth").symlink_to("/etc/shadow")
    (tmp_path / "far").mkdir()
    (site / "c-big.pth").write_text("x" * (1 << 20) + f"\n{tmp_path}/far\n")  # past the bound: its tail is not read
    (tmp_path / "train.py").write_text(SLEEP)
    procs.append(started([str(venv / "bin" / "python"), "train.py"], tmp_path))
    found = jobpath.of(read(procs[-1].pid))
    assert str(site) in found.entries
    assert str(tmp_path / "far") not in found.entries


def test_a_regular_package_later_on_the_path_wins_over_a_folder_of_its_name_earlier(tmp_path):
    (tmp_path / "first" / "pkg").mkdir(parents=True)  # a data folder named like the package: a namespace portion
    (tmp_path / "second" / "pkg").mkdir(parents=True)
    (tmp_path / "second" / "pkg" / "__init__.py").write_text("")
    job = jobpath.JobPath((str(tmp_path / "first"), str(tmp_path / "second")), "", str(tmp_path))
    assert job.find("pkg") == str(tmp_path / "second")
    assert jobpath.JobPath((str(tmp_path / "first"),), "", "").find("pkg") == str(tmp_path / "first")
    assert job.find("other") is None
