"""attach.access: each reason not to get into a process, found before anything is injected, with its fix; and the
way in (gdb, or sys.remote_exec from an interpreter of the job's version)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from patchkit.attach import access
from patchkit.attach.probe import Interpreter
from patchkit.attach.process import AttachError, Process, read

LINES = 2


def fake(uids=(1000,) * 4, permitted=0):
    return Process(42, tuple(uids), (1000,) * 4, (), 1, "/usr/bin/python3.11", False, ("python3.11", "t.py"), 9, 0,
                   permitted, "python3.11")


@pytest.mark.parametrize("uid,caps,scope,child,says", [
    (1000, 0, None, False, None),
    (1000, 0, 0, False, None),
    (1001, 0, 0, False, "only its owner or root may attach"),
    (1000, 0, 1, False, "ptrace_scope is 1"),
    (1000, 0, 1, True, None),  # its parent may
    (0, access.CAP_SYS_PTRACE, 1, False, None),
    (1000, 0, 2, False, "ptrace_scope is 2"),
    (0, access.CAP_SYS_PTRACE, 2, False, None),
    (0, access.CAP_SYS_PTRACE, 3, False, "ptrace_scope is 3"),
    (0, 0, 0, False, "root, but without CAP_SYS_PTRACE"),
    (0, access.CAP_SYS_PTRACE, 0, False, None),
])
def test_the_kernel_s_tracing_rules(uid, caps, scope, child, says):
    problem = access.ptrace_problem(fake(), uid, caps, scope, child)
    if says is None:
        assert problem is None
    else:
        assert says in problem[0] and problem[1]


def test_capabilities_the_job_holds_and_the_caller_lacks_need_cap_sys_ptrace():
    assert "holds capabilities you do not" in access.ptrace_problem(fake(permitted=1 << 21), 1000, 0, 0, False)[0]
    assert access.ptrace_problem(fake(permitted=1 << 21), 1000, access.CAP_SYS_PTRACE, 0, False) is None


@pytest.mark.parametrize("argv,env,says", [
    (("python", "t.py"), {}, ""),
    (("python", "t.py"), {"PYTHON_DISABLE_REMOTE_DEBUG": "1"}, "PYTHON_DISABLE_REMOTE_DEBUG"),
    (("python", "-E", "t.py"), {"PYTHON_DISABLE_REMOTE_DEBUG": "1"}, ""),  # -E: the interpreter ignores it
    (("python", "t.py"), {"PYTHON_DISABLE_REMOTE_DEBUG": ""}, ""),
    (("python", "-X", "disable-remote-debug", "t.py"), {}, "-X disable-remote-debug"),
    (("python", "t.py", "-X", "disable-remote-debug"), {}, ""),  # the script's own argument
])
def test_a_job_that_turned_remote_debugging_off_is_left_alone(argv, env, says):
    p = fake()._replace(argv=argv)
    assert access.remote_debug_problem(p, env) == says or (says and says in access.remote_debug_problem(p, env))


def _spawn(args, **kw):
    proc = subprocess.Popen(args, **kw)
    time.sleep(0.5)
    return proc


@pytest.fixture
def procs():
    started = []
    yield lambda *a, **kw: started.append(_spawn(*a, **kw)) or started[-1]
    for p in started:
        p.kill()
        p.wait()


def test_a_python_job_passes_and_the_way_in_is_gdb_below_3_14(procs):
    if not shutil.which("gdb"):
        pytest.skip("gdb is not installed (apt-get install gdb)")
    job = procs([sys.executable, "-c", "import time; time.sleep(60)"])
    t = access.check(job.pid, LINES)
    assert t.way == "gdb" and t.tool == shutil.which("gdb") and t.python.version[:2] == sys.version_info[:2]


def test_each_refusal_names_its_cause(procs, monkeypatch, tmp_path):
    gone = procs(["true"])
    gone.wait()
    with pytest.raises(AttachError, match=f"there is no process {gone.pid}"):
        access.check(gone.pid, LINES)
    with pytest.raises(AttachError, match="this command or one of its parents"):
        access.check(os.getpid(), LINES)
    with pytest.raises(AttachError, match="is not a Python interpreter"):
        access.check(procs(["sleep", "60"]).pid, LINES)
    env = dict(os.environ, PYTHON_DISABLE_REMOTE_DEBUG="1")
    with pytest.raises(AttachError, match="asked that no debugger get in"):
        access.check(procs([sys.executable, "-c", "import time; time.sleep(60)"], env=env).pid, LINES)
    with pytest.raises(AttachError, match="-X disable-remote-debug"):
        access.check(procs([sys.executable, "-X", "disable-remote-debug", "-c", "import time; time.sleep(60)"]).pid,
                     LINES)
    job = procs([sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(access.shutil, "which", lambda name: None)
    with pytest.raises(AttachError, match="gdb is not installed") as err:
        access.check(job.pid, LINES)
    assert "apt-get install gdb" in err.value.hint


def test_a_process_a_debugger_traces_already_is_refused(procs):
    traced = procs([sys.executable, "-c", "import ctypes, time; ctypes.CDLL(None).ptrace(0, 0, 0, 0); time.sleep(60)"])
    if read(traced.pid).tracer != os.getpid():
        pytest.skip("PTRACE_TRACEME is not allowed here")
    with pytest.raises(AttachError, match=f"traced already, by process {os.getpid()}"):
        access.check(traced.pid, LINES)


def test_an_interpreter_replaced_on_disk_is_refused(procs, tmp_path):
    real = os.path.realpath(sys.executable)
    copy = tmp_path / "bin" / os.path.basename(real)
    copy.parent.mkdir()
    shutil.copy2(real, copy)
    env = dict(os.environ, PYTHONHOME=sys.base_prefix, LD_LIBRARY_PATH=os.path.join(sys.base_prefix, "lib"))
    job = procs([str(copy), "-c", "import time; time.sleep(60)"], env=env)
    copy.unlink()
    with pytest.raises(AttachError, match="removed or replaced on disk"):
        access.check(job.pid, LINES)


def test_another_mount_namespace_is_refused(procs):
    if not shutil.which("unshare") or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.skip("unshare -m is not allowed here")
    job = procs(["unshare", "-m", sys.executable, "-c", "import time; time.sleep(60)"])  # unshare becomes python
    assert read(job.pid).name.startswith("python")
    with pytest.raises(AttachError, match="another mount namespace") as err:
        access.check(job.pid, LINES)
    assert "inside the job's container" in err.value.hint


def test_python_older_than_3_10_is_refused(procs, monkeypatch):
    """A real job, whose interpreter the probe reads as 3.9.18 (what it reads from a 3.9 /proc/PID/exe)."""
    job = procs([sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(access, "ask", lambda proc, lines, install=None: Interpreter((3, 9, 18), False, sys.executable, ""))
    with pytest.raises(AttachError, match="runs Python 3.9.18: attach needs Python 3.10 or later") as err:
        access.check(job.pid, LINES)
    assert "patchkit run" in err.value.hint


def test_sys_remote_exec_is_sent_from_an_interpreter_of_the_job_s_version(tmp_path, monkeypatch):
    p = fake()
    mine = Interpreter(tuple(sys.version_info[:3]), False, "/nowhere/python", "")
    monkeypatch.setattr(access.sysconfig, "get_config_var", lambda name: 0)
    assert access.sender(p, mine) == sys.executable
    other = Interpreter((3, 99, 0), False, sys.executable, "")
    assert access.sender(p, other) == sys.executable  # the job's own: root's, or this user's, writable by no other
    exe = tmp_path / "python3.99"
    exe.write_text("")
    exe.chmod(0o777)
    with pytest.raises(AttachError, match="sys.remote_exec from the same version") as err:
        access.sender(p, other._replace(executable=str(exe)))
    assert "python3.99 -m patchkit attach" in err.value.hint
    assert access.yama_scope() in (None, 0, 1, 2, 3) and isinstance(access.my_caps(), int)


def test_an_interpreter_is_trusted_only_when_no_other_user_can_change_it_or_any_folder_above(tmp_path):
    assert access.trusted_interpreter(sys.executable)
    below_tmp = tmp_path / "bin" / "python3.99"  # root's file in root's folder, but /tmp above is everyone's
    below_tmp.parent.mkdir()
    shutil.copy2(sys.executable, below_tmp)
    below_tmp.parent.chmod(0o755)
    assert os.stat("/tmp").st_mode & 0o002 and not access.trusted_interpreter(str(below_tmp))


def test_a_file_the_job_s_user_cannot_read_refuses_that_process(monkeypatch):
    asked = []

    def unreadable(proc, files):
        asked.append((proc.uid, tuple(files)))
        return [(files[-1], "Permission denied")]

    monkeypatch.setattr(access, "unreadable", unreadable)
    t = access.Target(fake(), Interpreter((3, 11, 2), False, "/usr/bin/python3.11", ""), "gdb", "gdb")
    spec = {"modules": [{"file": "/site/a.py"}, {"file": "/site/b.py"}]}
    refused = access.owners_read([t, t._replace(proc=fake()._replace(pid=43))], spec)
    assert sorted(refused) == [t.proc.pid, 43]  # each process of that user is refused, by pid
    err = refused[43]
    assert "the job's user uid 1000 cannot read /site/b.py" in str(err)
    assert "only what its owner may read" in str(err) and "--root" in err.hint
    assert asked == [(1000, ("/site/a.py", "/site/b.py"))]  # one question per user


def test_a_helper_that_fails_as_the_job_s_user_refuses_only_that_user_s_processes(monkeypatch):
    """She may kill or stop the helper that asks as her what she may read: her processes are refused (``--match``
    passes them over), never the command."""
    def unreadable(proc, files):
        if proc.uid == 1001:
            raise AttachError("patchkit's helper, run as uid 1001 for process 43, failed: it gave no answer (exit -9)",
                              access.where(proc.pid), "nothing was sent")
        return []

    monkeypatch.setattr(access, "unreadable", unreadable)
    mine = access.Target(fake(), Interpreter((3, 11, 2), False, "/usr/bin/python3.11", ""), "gdb", "gdb")
    hers = mine._replace(proc=fake(uids=(1001,) * 4)._replace(pid=43))
    refused = access.owners_read([mine, hers], {"modules": [{"file": "/site/a.py"}]})
    assert list(refused) == [43]
    assert "gave no answer (exit -9); so it is not known whether uid 1001 may read" in refused[43].message

