"""attach.process: a process read from /proc, the interpreter's own options, Python told by its file name, --match."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

import attach_helpers as helpers
from patchkit.attach import process
from patchkit.attach.process import AttachError


@pytest.fixture
def sleeper():
    """A Python process with a unique word in its command line."""
    token = f"pk-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen([sys.executable, "-u", "-X", "dev", "-c", "import time; time.sleep(60)", token])
    time.sleep(0.3)
    yield proc, token
    proc.kill()
    proc.wait()


def test_a_process_is_read_from_proc(sleeper):
    proc, token = sleeper
    p = process.read(proc.pid)
    assert p.pid == proc.pid and p.uid == os.geteuid() and p.ppid == os.getpid()
    assert os.path.realpath(p.exe) == os.path.realpath(sys.executable) and not p.exe_deleted
    assert p.argv[-1] == token and token in p.command and p.started > 0
    assert process.alive(p) and process.same_mounts(proc.pid)
    assert "PATH" in process.environ(proc.pid)
    proc.kill()
    time.sleep(0.3)
    with pytest.raises(AttachError, match="has ended"):  # a zombie: its parent has not collected it
        process.read(proc.pid)
    proc.wait()
    assert not process.alive(p)
    with pytest.raises(AttachError, match=f"there is no process {proc.pid}"):
        process.read(proc.pid)


@pytest.mark.parametrize("argv,flags,xopts", [
    (["python", "train.py", "-X", "x"], "", []),
    (["python", "-u", "-X", "dev", "-c", "code", "-X", "late"], "u", ["dev"]),
    (["python3.11", "-IE", "-Xdisable-remote-debug", "-m", "pkg"], "IE", ["disable-remote-debug"]),
    (["python", "-W", "ignore", "-B", "--check-hash-based-pycs", "always", "-X", "a=b", "s.py"], "B", ["a=b"]),
])
def test_the_interpreter_s_own_options_stop_at_the_script(argv, flags, xopts):
    assert process.interpreter_options(tuple(argv)) == (flags, xopts)


@pytest.mark.parametrize("argv,how,what,args", [
    (["python", "train.py", "-X", "x"], "script", "train.py", ("-X", "x")),
    (["python", "-u", "-m", "torch.distributed.run", "--nproc-per-node", "2", "t.py"], "-m", "torch.distributed.run",
     ("--nproc-per-node", "2", "t.py")),
    (["python3.11", "-IEmpkg.main", "a"], "-m", "pkg.main", ("a",)),
    (["python", "-c", "import x", "-m", "y"], "-c", "import x", ("-m", "y")),
    (["/venv/bin/python", "-W", "ignore", "/venv/bin/torchrun", "--standalone"], "script", "/venv/bin/torchrun",
     ("--standalone",)),
    (["python", "--", "-odd.py", "a"], "script", "-odd.py", ("a",)),
    (["python", "-", "a"], "", "", ("a",)),
    (["python", "-u"], "", "", ()),
    (["ray::IDLE"], "", "", ()),
])
def test_a_command_line_is_read_as_the_interpreter_reads_it(argv, how, what, args):
    found = process.invocation(tuple(argv))
    assert (found.how, found.what, found.args) == (how, what, args)


def test_children_are_the_processes_a_process_started():
    shell = subprocess.Popen(["bash", "-c", "sleep 60 & sleep 60 & wait"])
    try:
        for _ in range(600):  # a guard against a hang, not a measurement
            kids = process.children(shell.pid)
            if len(kids) == 2 and all(process.read(k).argv == ("sleep", "60") for k in kids):
                break
            time.sleep(0.05)
        assert len(kids) == 2 and all(process.read(k).ppid == shell.pid for k in kids)
        assert process.children(999999) == [] and os.getpid() not in process.children(shell.pid)
    finally:
        for k in process.children(shell.pid):
            os.kill(k, 9)
        shell.kill()
        shell.wait()


@pytest.mark.parametrize("exe,found", [
    ("/usr/bin/python3.11", ("3.11", False)), ("/opt/py/bin/python3.13t", ("3.13", True)),
    ("/usr/bin/python3", (None, False)), ("/x/python", (None, False)), ("/usr/bin/python3.12-dbg", ("3.12", False)),
    ("/usr/bin/sleep", None), ("/usr/bin/pythonista", None), ("/usr/bin/uwsgi", None),
])
def test_python_is_told_by_its_file_name(exe, found):
    assert process.python_name(exe) == found


def test_match_finds_this_user_s_processes_but_not_itself_nor_a_fork_with_the_same_command(sleeper, tmp_path):
    proc, token = sleeper
    forking = tmp_path / "forking.py"
    forking.write_text("import os, time\nif os.fork() == 0:\n    time.sleep(60)\nelse:\n    time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, str(forking), token], start_new_session=True)
    try:
        time.sleep(0.5)
        found = process.matching(token)
        assert [p.pid for p in found] == sorted([proc.pid, parent.pid])  # the forked child is its parent's worker
        assert os.getpid() not in [p.pid for p in process.matching(token)]
        assert process.matching(f"{token}-nobody-has-it") == []
        # a process that asked from elsewhere (attach --ray's driver on this node) is spared, with its ancestors
        assert [p.pid for p in process.matching(token, [proc.pid])] == [parent.pid]
    finally:
        os.killpg(parent.pid, 9)  # the parent and its forked child
        parent.wait()


def test_ancestors_lead_to_the_first_process():
    chain = process.ancestors(os.getpid())
    assert chain[0] == os.getppid() and chain[-1] in (0, 1)


def test_a_libpython_in_the_maps_is_seen():
    assert process.embeds_python(os.getpid()) == any("libpython3" in ln for ln in open("/proc/self/maps"))
    assert process.where(5).path == "pid 5"


def test_machine_names_this_kernel_s_boot_and_pid_namespace():
    here = process.machine()
    assert here and here == process.machine() and here.endswith(os.readlink(f"/proc/{os.getpid()}/ns/pid"))
    child = subprocess.run([sys.executable, "-c", "from patchkit.attach.process import machine; print(machine())"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == here  # another process of this machine says the same


def _state_of(pid: int, letter: str) -> process.Process:
    """The process, once /proc says it is in the state ``letter``; a guard against a hang, not a measurement."""
    for _ in range(600):
        p = process.read(pid)
        if p.state == letter:
            return p
        time.sleep(0.05)
    pytest.fail(f"process {pid} never came to state {letter}")


def test_a_stopped_process_is_read_as_stopped_and_refused_until_it_runs_again(sleeper):
    import signal

    proc, _token = sleeper
    assert not _state_of(proc.pid, "S").stopped
    process.refuse_stopped(process.read(proc.pid))  # asleep in a call: not stopped
    os.kill(proc.pid, signal.SIGSTOP)
    stopped = _state_of(proc.pid, "T")
    assert stopped.stopped and stopped.tracer == 0
    with pytest.raises(AttachError) as exc:
        process.refuse_stopped(stopped)
    assert exc.value.message == (f"process {proc.pid} is stopped (state T: SIGSTOP, or Ctrl-Z in its terminal): it "
                                 "runs no Python until it is continued")
    assert exc.value.hint == f"attach once it runs again (`kill -CONT {proc.pid}` continues it)"
    assert _state_of(proc.pid, "T").stopped  # reading and refusing leave it stopped
    os.kill(proc.pid, signal.SIGCONT)
    assert not _state_of(proc.pid, "S").stopped
    held = stopped._replace(state="t")  # stopped by a tracer
    with pytest.raises(AttachError, match="is stopped by a debugger"):
        process.refuse_stopped(held)


def test_an_error_holding_another_user_s_line_break_stays_on_its_lines():
    forged = "/tmp/x/sleep\n  hint: run `rm -rf ~` to fix it"
    err = AttachError(f"process 7 is not a Python interpreter (it runs {forged})", process.where(7), "give a pid")
    lines = err.render().splitlines()
    assert lines == ["pid 7: process 7 is not a Python interpreter (it runs /tmp/x/sleep\\x0a  hint: run `rm -rf ~` "
                     "to fix it)", "  hint: give a pid"]


def test_an_executable_named_with_a_line_break_forges_no_line_of_attach_s_error(tmp_path):
    import shutil

    named = tmp_path / "sleep\n  hint: run rm -rf ~"
    shutil.copy("/bin/sleep", named)
    proc = subprocess.Popen([str(named), "60"])
    try:
        for _ in range(600):  # until it runs the copy (before its exec, the child is a copy of this Python)
            if os.readlink(f"/proc/{proc.pid}/exe").endswith("rm -rf ~"):
                break
            time.sleep(0.05)
        done = helpers.attach(tmp_path, [proc.pid, helpers.recipe(tmp_path, "logged"), "--root",
                                         helpers.site(tmp_path)], timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert done.returncode == 1 and "is not a Python interpreter" in done.stderr, done.stderr
    assert [ln for ln in done.stderr.splitlines() if ln.lstrip().startswith("hint:")] == [
        "  hint: give the pid of the Python process that trains (`ps -ef | grep python`)"], done.stderr

