"""When root attaches to another user's job, the channel's ``out/`` is hers: everything she puts there is read as a
stranger's, and never keeps root's commands from ending, cleaning up and giving root's own job its code back.

A real second user (the ``stranger`` fixture: useradd, so root only) owns a process and the channel's ``out/``, as
a real attach to her job makes it, and fills it: statuses of the wrong types, 10,000-deep JSON, a huge file, a link,
a folder or a FIFO where the status or the detach file goes, a 5,000-deep nest of folders, files made while it is
removed.  Each goes through ``patchkit attach --status``, ``patchkit detach --timeout 5`` and the attaching session
(poll, detach, close): no traceback, a line naming the process, each command ends, nothing left in the temporary
folder.  Then a real job of hers, attached by root next to root's own, does it from inside: root's job gets its
own code back.  Trace paths she names outside the folder root named never reach root's captures index, and a
line break in her error text stays on its line.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from types import SimpleNamespace as NS

import pytest

import attach_helpers as helpers
from patchkit.attach import flow, payload, records, session
from patchkit.attach.process import AttachError, read
from patchkit.cli.attach import process_line
from patchkit.core import manifest, private

RECIPE = "pkjob-logged"
NEST = "import os, sys\nfd = os.open(sys.argv[1], os.O_RDONLY)\nfor _ in range(int(sys.argv[2])):\n" \
       "    os.mkdir('d', dir_fd=fd)\n    inner = os.open('d', os.O_RDONLY, dir_fd=fd)\n    os.close(fd)\n" \
       "    fd = inner\n"
FILL = textwrap.dedent("""\
    import os, sys, time
    out, stash, i = sys.argv[1], sys.argv[2], 0
    while True:  # hard links to a file of hers: as fast as root unlinks them (a link count stops at 65000)
        if i % 60000 == 0:
            src = os.path.join(stash, f"src-{os.getpid()}-{i}")
            open(src, "a").close()
        try:
            os.link(src, os.path.join(out, f"l-{os.getpid()}-{i}"))
        except OSError:
            time.sleep(0.001)
        i += 1
    """)
SYSTEM = f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"  # one she may run (root's is under /root)


def as_her(stranger, *command, **popen):
    return subprocess.Popen(list(command), user=stranger.uid, group=stranger.gid, extra_groups=[], cwd="/",
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **popen)


@pytest.fixture
def hers(stranger):
    """A process of hers (still running: the records want it), and a dead pid for an attaching command gone."""
    job = as_her(stranger, "sleep", "600")
    gone = subprocess.Popen(["true"])
    gone.wait()
    yield read(job.pid), gone.pid
    job.kill()
    job.wait()


def channel_for(proc, attacher):
    """The request folder a real attach to ``proc`` makes (``out/`` hers), and its record."""
    f = payload.folder(proc, {"recipe": RECIPE}, "")
    rec = {"pid": proc.pid, "started": proc.started, "base": f.base, "out": f.out, "recipe": RECIPE,
           "attacher": attacher, "time": 0}
    with records.records_dir() as folder:
        private.write(folder, f"{proc.pid}-{proc.started}.json", json.dumps(rec).encode())
    return f


def status_file(stranger, f, data):
    path = os.path.join(f.out, "status.json")
    stranger.run("sh", "-c", 'printf %s "$1" > "$2"', "sh", data if isinstance(data, str) else json.dumps(data), path)


SHAPES = {
    "a number where a name goes": lambda s, f: status_file(s, f, {"state": "restored", "targets": [1, 2], "why": 7,
                                                                  "recipe": 5, "error": 3, "pid": "x"}),
    "a string where a list goes": lambda s, f: status_file(s, f, {"state": "restored", "captures": "abc",
                                                                  "targets": "m:f", "running": "x"}),
    "wrong pairs": lambda s, f: status_file(s, f, {"state": "restored", "original_code": True, "captures": [
        {"recorded": [[1], [1, 2, 3], "ab", [None, 1]], "traces": "x"}, 5]}),
    "a state that is a number": lambda s, f: status_file(s, f, {"state": 5}),
    "10,000-deep JSON": lambda s, f: status_file(s, f, '{"state": "attached", "x": ' + "[" * 10000 + "]" * 10000
                                                 + "}"),
    "a huge file": lambda s, f: s.run("truncate", "-s", "4G", os.path.join(f.out, "status.json")),
    "a link as the status": lambda s, f: s.run("ln", "-s", "/etc/shadow", os.path.join(f.out, "status.json")),
    "a folder as the status": lambda s, f: s.run("mkdir", os.path.join(f.out, "status.json")),
    "a FIFO as the status": lambda s, f: s.run("mkfifo", os.path.join(f.out, "status.json")),
    "a FIFO at detach": lambda s, f: s.run("mkfifo", os.path.join(f.out, "detach")),
    "a folder at detach": lambda s, f: s.run("mkdir", os.path.join(f.out, "detach")),
    "a link at detach": lambda s, f: s.run("ln", "-s", "/etc/shadow", os.path.join(f.out, "detach")),
    "a 5,000-deep nest": lambda s, f: s.run(SYSTEM, "-c", NEST, f.out, "5000"),
}


def command(*args, timeout=120):
    """``patchkit ARGS``; a guard against a hang (before: `detach` waited on the FIFO for ever), not a measure."""
    env = dict(os.environ, PYTHONPATH=str(helpers.REPO))
    env.pop("PATCHKIT_RUN", None)
    return subprocess.run([sys.executable, "-m", "patchkit", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=timeout, stdin=subprocess.DEVNULL)


def said_one_line(done, pid):
    text = done.stdout + done.stderr
    assert "Traceback" not in text and "Error:" not in text.replace("error:", ""), text
    lines = [ln for ln in text.splitlines() if f"pid {pid}" in ln]
    assert lines and all(ln.startswith(("pid ", "error: pid ")) for ln in lines), text
    return lines


def left(pid):
    return glob.glob(os.path.join(tempfile.gettempdir(), f"patchkit-attach-{pid}-*"))


@pytest.mark.skipif(not os.path.exists(SYSTEM), reason=f"no {SYSTEM} for the second user to run")
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_status_and_detach_say_one_line_end_and_clean_up(stranger, hers, shape):
    proc, gone = hers
    f = channel_for(proc, gone)  # the attaching command was killed: these commands clean up after it
    SHAPES[shape](stranger, f)
    shown = command("attach", "--status", proc.pid)
    said_one_line(shown, proc.pid)
    done = command("detach", proc.pid, "--timeout", "5")
    lines = said_one_line(done, proc.pid)
    assert left(proc.pid) == [] or any("left behind" in ln for ln in lines), lines
    assert records.records(proc.pid) == []


@pytest.mark.skipif(not os.path.exists(SYSTEM), reason=f"no {SYSTEM} for the second user to run")
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_attaching_session_polls_detaches_and_closes_whatever_she_wrote(stranger, hers, shape):
    proc, _ = hers
    s = session.Session([proc.pid], RECIPE)
    a = session.Attached(NS(proc=proc), channel_for(proc, os.getpid()))
    a.state, s.attached = "attached", [a]
    SHAPES[shape](stranger, a.folder)
    s.poll()
    s.detach(timeout=5)  # a FIFO at detach: before, this blocked for ever
    line = process_line(a.pid, a.state, a.status)
    assert line.startswith(f"pid {a.pid}: ") and "\n" not in line
    said = s.close()
    assert left(proc.pid) == [] and said == [] and records.records(proc.pid) == []


@pytest.mark.skipif(not os.path.exists(SYSTEM), reason=f"no {SYSTEM} for the second user to run")
def test_files_she_makes_while_the_channel_is_removed_do_not_keep_it(stranger, hers):
    proc, gone = hers
    for how in ("close", "detach"):
        f = channel_for(proc, gone)
        stranger.run(SYSTEM, "-c", NEST, f.out, "50")
        stash = stranger.sticky / f"stash-{how}"
        stranger.run("mkdir", str(stash))
        fillers = [as_her(stranger, SYSTEM, "-c", FILL, f.out, str(stash)) for _ in range(2)]
        try:
            helpers.wait_for(lambda: len(os.listdir(f.out)) > 1000, 60, fillers[0])
            if how == "close":
                s = session.Session([proc.pid], RECIPE)
                s.attached = [session.Attached(NS(proc=proc), f)]
                said = s.close()
                assert left(proc.pid) == [] and said == []
            else:
                said_one_line(command("detach", proc.pid, "--timeout", "5"), proc.pid)
            assert left(proc.pid) == []  # before: rmtree 40 times, and the folder stayed
        finally:
            for filler in fillers:
                filler.kill()
                filler.wait()


class Answered(session.Session):
    """A session whose request is in the channel already (as :meth:`inject` leaves it)."""

    def inject(self):
        pass


def test_a_job_s_error_text_stays_on_its_line(stranger, hers):
    proc, _ = hers
    s = Answered([proc.pid], RECIPE)
    s.attached = [session.Attached(NS(proc=proc), channel_for(proc, os.getpid()))]
    status_file(stranger, s.attached[0].folder, {"state": "refused", "error": "no\n  hint: run rm -rf / as root"})
    with pytest.raises(AttachError) as exc:
        flow.run(s, None, 5)
    shown = exc.value.render().splitlines()  # before: a second hint line, hers
    assert shown[0] == f"pid {proc.pid}: refused: no\\x0a  hint: run rm -rf / as root" and len(shown) == 2
    assert left(proc.pid) == []
    shown = command("attach", "--status", proc.pid)  # the record is gone with the folder
    assert "nothing attached" in shown.stderr


def test_trace_paths_outside_the_folder_root_named_never_reach_root_s_index(stranger, tmp_path, monkeypatch):
    save = stranger.sticky / "save"
    stranger.run("mkdir", str(save))
    stranger.run("touch", str(save / "rank0.pt.trace.json"))
    stranger.run("ln", "-s", "/etc", str(save / "out"))
    roots = tmp_path / "roots-only"
    roots.mkdir(mode=0o700)
    (roots / "secret").write_text("x")
    traces = ["/", "/etc", "/etc/passwd", str(roots), str(roots / "secret"), f"{save}/../../etc/passwd",
              f"{save}/out/passwd", str(save / "rank0.pt.trace.json")]
    status = {"state": "restored", "captures": [{"traces": traces}]}
    monkeypatch.setattr(manifest, "_noted", set())
    s = NS(attached=[NS(status=status, save_folder=str(save), target=NS(proc=NS(uid=stranger.uid)))])
    flow.note_folders(s)
    assert manifest.indexed_folders() == [str(save)]  # before: /, /etc and root's folder too: `traces` walked /


JOB = textwrap.dedent("""\
    import json, os, sys, threading, time
    import pkjob.train as train

    inner = vars(train.Trainer)["step_logged"].__closure__[0].cell_contents
    original = inner.__code__

    def hostile(out):  # what a job of hers can do to the channel root hands her
        os.mkdir(os.path.join(out, "status.json"))  # her agent's status never lands: root reads a folder
        os.mkfifo(os.path.join(out, "detach"))
        fd = os.open(out, os.O_RDONLY)
        for _ in range(5000):
            os.mkdir("d", dir_fd=fd)
            inner_fd = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner_fd
        i = 0
        while True:
            try:
                os.close(os.open(os.path.join(out, f"f{i}"), os.O_CREAT | os.O_WRONLY, 0o600))
            except OSError:
                pass
            i += 1
            time.sleep(0.002)

    def watch():
        import glob
        while True:
            for out in glob.glob(f"/tmp/patchkit-attach-{os.getpid()}-*/out"):
                try:
                    return hostile(out)
                except OSError:
                    pass
            time.sleep(0.001)

    if sys.argv[2] == "hostile":
        threading.Thread(target=watch, daemon=True).start()
    print("ready", flush=True)
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
    for _ in range(200):
        if inner.__code__ is original and "_patchkit_runtime" not in vars(train):
            break
        time.sleep(0.05)
    print(json.dumps({"back": inner.__code__ is original, "left": "_patchkit_runtime" in vars(train)}))
    """)


@pytest.mark.skipif(bool(helpers.gdb_missing() or helpers.ptrace_denied()) or not os.path.exists(SYSTEM),
                    reason=helpers.gdb_missing() or helpers.ptrace_denied() or f"no {SYSTEM} for the second user")
def test_root_s_own_job_gets_its_code_back_whatever_her_job_does_to_its_channel(stranger, tmp_path):
    site = helpers.site(stranger.sticky)  # she must read the package her job imports
    helpers.plain(site)
    (stranger.sticky / "job.py").write_text(JOB)
    stop = stranger.sticky / "stop"
    env = {"PATH": os.defpath, "PYTHONPATH": str(site)}
    mine = subprocess.Popen([sys.executable, str(stranger.sticky / "job.py"), str(stop), "plain"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    theirs = subprocess.Popen([SYSTEM, str(stranger.sticky / "job.py"), str(stop), "hostile"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/",
                              user=stranger.uid, group=stranger.gid, extra_groups=[])
    try:
        for job in (mine, theirs):
            assert job.stdout.readline().strip() == "ready", job.communicate(timeout=30)[1]
        done = command("attach", "--pids", f"{mine.pid},{theirs.pid}", helpers.recipe(tmp_path, "logged"),
                       "--root", site, "--timeout", "30", timeout=300)  # before: it hung on her FIFO
        assert done.returncode == 1, done.stderr
        said_one_line(done, theirs.pid)
        assert f"pid {theirs.pid}: failed: the job wrote an unreadable status (status.json is not a regular " \
               "file (a folder): never read)" in done.stderr
        assert left(mine.pid) == [] and left(theirs.pid) == []
        stop.touch()
        out, err = mine.communicate(timeout=60)
        assert json.loads(out.splitlines()[-1]) == {"back": True, "left": False}, err
    finally:
        stop.touch()
        for job in (mine, theirs):
            job.kill()
            job.communicate()
