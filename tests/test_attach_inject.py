"""attach.inject: the lines the job runs (ASCII, nothing left in __main__, never an exception out of them, the request
run only when its hash is the one written in them), gdb's commands and errors, and a real gdb injection into a
running loop of each CPython found here, whose main thread runs the code between two bytecodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import attach_helpers as helpers
from patchkit.attach import access, inject, payload
from patchkit.attach.process import Process, read

REPO = Path(__file__).resolve().parent.parent
PYTHONS = {f"{sys.version_info[0]}.{sys.version_info[1]}": sys.executable,
           **helpers.other_pythons()}


def me():
    return read(os.getpid())


@pytest.fixture
def folder():
    f = payload.folder(me(), {"recipe": "r", "modules": []}, "")
    yield f
    payload.remove(f)


RUN = """\
import json, sys
main = {"__name__": "__main__"}
before = set(main)
exec(compile(open(sys.argv[1]).read(), "<string>", "exec"), main)
print(json.dumps(sorted(set(main) - before - {"__builtins__"})))
"""


def run_snippet(python, tmp_path, snippet, env=None):
    (tmp_path / "snippet.py").write_text(snippet)
    return subprocess.run([python, "-c", RUN, str(tmp_path / "snippet.py")], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, timeout=120)


@pytest.mark.parametrize("version", sorted(PYTHONS))
def test_the_lines_leave_nothing_behind_and_never_raise(tmp_path, folder, version):
    code = inject.bootstrap(folder, str(REPO))
    code.encode("ascii")
    payload.withdraw(folder)  # queued, then withdrawn: it finds nothing and says so
    done = run_snippet(PYTHONS[version], tmp_path, code)
    assert done.returncode == 0 and json.loads(done.stdout) == [], done.stderr
    assert "the request was withdrawn" in done.stderr
    status = json.loads(Path(folder.out, "status.json").read_text())  # the attaching command stops waiting at once
    assert status["state"] == "refused" and "withdrawn before this process ran it" in status["error"]


def test_a_request_whose_hash_differs_is_not_run(tmp_path, folder):
    Path(folder.request).write_text(json.dumps({"recipe": "planted"}))
    done = run_snippet(sys.executable, tmp_path, inject.bootstrap(folder, str(REPO)))
    assert done.returncode == 0 and "sha256 differs" in done.stderr
    status = json.loads(Path(folder.out, "status.json").read_text())
    assert status["state"] == "failed" and "not run" in status["error"]


def fake_agent(tmp_path, body: str):
    """A folder holding a patchkit whose in-job agent (patchkit.runtime.attach.agent) does ``body``."""
    root = tmp_path / "fakeroot"
    fake = root / "patchkit" / "runtime" / "attach"
    fake.mkdir(parents=True)
    for d in (fake.parent.parent, fake.parent, fake):
        (d / "__init__.py").write_text("")
    (fake / "agent.py").write_text(f"def attach(spec):\n    {body}\n")
    return root


def test_even_system_exit_inside_stays_inside(tmp_path, folder, monkeypatch):
    fake = fake_agent(tmp_path, "raise SystemExit(3)")
    done = run_snippet(sys.executable, tmp_path, inject.bootstrap(folder, str(fake)),
                       env={"PYTHONPATH": ""})
    assert done.returncode == 0 and json.loads(done.stdout) == [] and "SystemExit: 3" in done.stderr


def test_gdb_s_commands_check_every_symbol_before_changing_anything_and_never_malloc():
    script = inject.gdb_script("/x/code.bin", 4096)
    lines = script.splitlines()
    first_change = next(i for i, ln in enumerate(lines) if "mmap)(" in ln)
    assert all(any(f"&{name}" in ln for ln in lines[:first_change]) for name in
               ("Py_AddPendingCall", "PyRun_SimpleString", "mmap"))
    assert "malloc" not in script and "strdup" not in script and "restore /x/code.bin binary" in script
    t = access.Target(me(), None, "gdb", "/usr/bin/gdb")
    command = inject.gdb_command(t, "/x/inject.gdb")
    assert command.index("set auto-solib-add off") < command.index("-p")  # torch's symbols are never read
    # nor any debug information, nor a libthread_db: the stop is short (bench/attach.py measures it)
    assert command.index("-readnever") < command.index("-p")
    assert command.index("set libthread-db-search-path /proc") < command.index("-p")
    # set before anything runs in the job: interrupted mid-call, gdb gives the call up and the job never gets SIGINT
    assert command.index("set unwindonsignal on") < command.index("-p")
    assert command.index("handle SIGINT stop print nopass") < command.index("-p")


@pytest.mark.parametrize("said,says", [
    ("ptrace: Operation not permitted.", "refused gdb's ptrace"),
    ('No symbol "Py_AddPendingCall" in current context.', "found no Py_AddPendingCall"),
    ("PATCHKIT-QUEUE-FULL", "queue of pending calls is full"),
    ("gdb: unrecognized option '-readnever'", "older than gdb 8.2"),
    ("something else\nentirely", "could not queue the code"),
])
def test_gdb_s_failures_are_said_plainly(said, says):
    t = access.Target(me(), None, "gdb", "/usr/bin/gdb")
    assert says in inject.gdb_error(t, said).message


LOOP = """\
import json, sys, time
import pkjob.train as train
inner = vars(train.Trainer)["step_logged"].__closure__[0].cell_contents
original = inner.__code__
t = train.Trainer()
i = 0
while i < 2000 and not __import__("os").path.exists(sys.argv[1]):
    t.step_logged(i)
    i += 1
    time.sleep(0.01)
print(json.dumps({"back": inner.__code__ is original, "left": "_patchkit_runtime" in vars(train), "steps": i}))
"""


@pytest.mark.parametrize("version", sorted(PYTHONS))
def test_gdb_gets_the_code_into_a_running_loop_and_its_own_code_comes_back(tmp_path, version):
    if helpers.gdb_missing() or helpers.ptrace_denied():
        pytest.skip(helpers.gdb_missing() or helpers.ptrace_denied())
    site = helpers.site(tmp_path)
    helpers.plain(site, stand_in=PYTHONS[version] != sys.executable)
    stop = tmp_path / "stop"
    job = subprocess.Popen([PYTHONS[version], "-c", LOOP, str(stop)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=dict(os.environ, PYTHONPATH=str(site)))
    try:
        time.sleep(1)
        t = access.check(job.pid, 2)
        s = payload.settings(str(helpers.recipe(tmp_path, "logged")), [], None, 2)
        f = payload.folder(t.proc, payload.request(s, 2, str(site)), t.python.runtime_from)
        inject.send(t, f, t.python.runtime_from)
        states = []
        for _ in range(600):
            status = json.loads(Path(f.out, "status.json").read_text()) if Path(f.out, "status.json").exists() else {}
            if status.get("state") and status["state"] not in states:
                states.append(status["state"])
            if status.get("clean"):
                break
            time.sleep(0.05)
        stop.touch()
        out, err = job.communicate(timeout=60)
        payload.remove(f)
    finally:
        job.kill()
    assert states[0] == "attached" and states[-1] == "restored", (states, err[-2000:])
    assert json.loads(out) == {"back": True, "left": False, "steps": json.loads(out)["steps"]}
    # no torch in the other interpreters: the profiler's start fails, one line, and the job runs on
    assert ("could not start the profiler" if PYTHONS[version] != sys.executable else "the window closed") in err


def test_a_process_gone_before_gdb_gets_in_is_an_error_not_a_hang(tmp_path):
    if helpers.gdb_missing():
        pytest.skip(helpers.gdb_missing())
    p = subprocess.Popen(["true"])
    p.wait()
    gone = Process(p.pid, (0,) * 4, (0,) * 4, (), 1, "/usr/bin/python3", False, (), 1, 0, 0, "x")
    f = payload.folder(me(), {"recipe": "r"}, "")
    try:
        with pytest.raises(inject.AttachError, match=f"process {p.pid} ended before gdb got in"):
            inject.through_gdb(access.Target(gone, None, "gdb", helpers.shutil.which("gdb")), f, "")
        assert sorted(os.listdir(f.base)) == sorted(["out", os.path.basename(f.request)])  # gdb's files removed
    finally:
        payload.remove(f)


FAKE_SENDER = """#!/bin/sh
printf '%s\\n' "$@" > "$(dirname "$0")/args"
cp "$5" "$(dirname "$0")/script"
[ -n "$FAIL" ] && { echo "RuntimeError: $FAIL" >&2; exit 1; }
exit 0
"""


def test_on_3_14_the_lines_go_as_a_private_file_to_sys_remote_exec(tmp_path, monkeypatch, folder):
    sender = tmp_path / "python3.14"
    sender.write_text(FAKE_SENDER)
    sender.chmod(0o755)
    t = access.Target(me(), None, "remote_exec", str(sender))
    inject.send(t, folder, str(REPO))
    args = (tmp_path / "args").read_text().splitlines()
    assert args[:2] == ["-I", "-c"] and "sys.remote_exec(int(sys.argv[1]), sys.argv[2])" in args[2]
    assert args[3] == str(os.getpid()) and args[4].startswith(folder.base)
    assert oct(os.stat(args[4]).st_mode & 0o777) == "0o600"
    assert (tmp_path / "script").read_text() == inject.bootstrap(folder, str(REPO))
    monkeypatch.setenv("FAIL", "Remote debugging is not enabled in the remote process")
    again = payload.folder(me(), {"recipe": "r"}, "")
    try:
        with pytest.raises(inject.AttachError, match="sys.remote_exec into process") as err:
            inject.through_remote_exec(t, again, "")
        assert "turned remote debugging off" in err.value.hint
    finally:
        payload.remove(again)


def test_the_job_s_own_ctrl_c_caught_inside_is_given_back_to_it(tmp_path, folder):
    fake = fake_agent(tmp_path, "raise KeyboardInterrupt")
    (tmp_path / "snippet.py").write_text(inject.bootstrap(folder, str(fake)))
    program = ("import sys, time\nexec(open(sys.argv[1]).read(), {'__name__': '__main__'})\ntry:\n"
               "    for _ in range(200):\n        time.sleep(0.01)\n    print('lost')\n"
               "except KeyboardInterrupt:\n    print('given back')\n")
    done = subprocess.run([sys.executable, "-c", program, str(tmp_path / "snippet.py")], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ""}, timeout=60)
    assert done.stdout.strip() == "given back", done.stderr


APART = """#!/bin/sh
d="$(dirname "$0")"
cut -d' ' -f5,6 /proc/$$/stat > "$d/group-and-session"
while [ ! -e "$d/go" ]; do sleep 0.05; done
touch "$d/done"
"""


def test_the_3_14_sender_runs_apart_and_an_interrupt_waits_for_it_having_withdrawn_the_request(tmp_path, folder):
    import _thread
    import threading

    sender = tmp_path / "python3.14"
    sender.write_text(APART)
    sender.chmod(0o755)

    def ctrl_c():  # the sender ends only once the request is gone
        _thread.interrupt_main()
        for _ in range(6000):
            if not os.path.exists(folder.request):
                break
            time.sleep(0.01)
        (tmp_path / "go").touch()

    threading.Timer(0.2, ctrl_c).start()
    with pytest.raises(KeyboardInterrupt):
        inject.send(access.Target(me(), None, "remote_exec", str(sender)), folder, "")
    assert (tmp_path / "done").exists() and not os.path.exists(folder.request)
    group, session = map(int, (tmp_path / "group-and-session").read_text().split())
    assert group == session != os.getsid(0)  # its own session: no signal of this terminal's or group's reaches it
