"""attach.sandbox: patchkit's own interpreter run as another user, apart from the command that runs it: a new
session with no terminal, stdin /dev/null, no inherited descriptor, an empty working folder, that user's ids, a
bounded time whose end kills its whole group, bounded output, and an answer read as a stranger's."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from patchkit.attach import sandbox
from patchkit.attach.sandbox import Ids, SandboxError

LOOKS = r'''
import errno
try:
    os.close(os.open("/dev/tty", os.O_RDWR))
    tty = "opened"
except OSError as exc:
    tty = errno.errorcode.get(exc.errno, str(exc.errno))
try:
    listing = os.listdir(".")
except OSError as exc:
    listing = exc.strerror
answer({"sid": os.getsid(0), "pid": os.getpid(), "pgid": os.getpgid(0), "stdin": os.readlink("/proc/self/fd/0"),
        "fds": sorted(int(f) for f in os.listdir("/proc/self/fd")), "cwd": os.getcwd(), "listing": listing,
        "ids": [list(os.getresuid()), list(os.getresgid()), sorted(os.getgroups())], "tty": tty,
        "env": sorted(os.environ), "path": sys.path, "flags": [sys.flags.isolated, sys.flags.no_site]})
'''


def test_it_runs_in_a_session_of_its_own_with_no_terminal_no_stdin_no_descriptors_and_an_empty_folder():
    keep = os.open(os.devnull, os.O_RDONLY)  # a descriptor of this process's, not marked close-on-exec
    os.set_inheritable(keep, True)
    try:
        said = sandbox.run(LOOKS)
    finally:
        os.close(keep)
    assert said["sid"] == said["pid"] == said["pgid"] != os.getsid(0)
    assert said["stdin"] == "/dev/null" and said["tty"] == "ENXIO"
    assert said["fds"][:3] == [0, 1, 2] and len(said["fds"]) <= 4  # 0, 1, 2 and the listing's own
    assert said["listing"] == [] and os.path.basename(said["cwd"]).startswith("patchkit-helper-")
    assert not os.path.exists(said["cwd"])  # removed after
    assert set(said["env"]) <= {"PATH", "LC_CTYPE"} and said["flags"] == [1, 1]
    assert "" not in said["path"] and said["cwd"] not in said["path"]


def test_it_runs_as_the_user_it_is_given(stranger):
    said = sandbox.run(LOOKS, ids=Ids(stranger.uid, stranger.gid, ()))
    assert said["ids"] == [[stranger.uid] * 3, [stranger.gid] * 3, []]
    assert said["listing"] == "Permission denied"  # the folder is root's: nothing could be put there either
    assert said["sid"] == said["pid"] and said["tty"] == "ENXIO" and said["stdin"] == "/dev/null"


def test_arguments_and_warm_modules(stranger):
    code = "answer({'args': sys.argv[1:], 'patchkit': [m for m in sys.modules if m.startswith('patchkit')]})"
    said = sandbox.run(code, ["a b", "--c"], ids=Ids(stranger.uid, stranger.gid, ()),
                       warm=["patchkit", "patchkit.runtime"])
    assert said == {"args": ["a b", "--c"], "patchkit": []}  # patchkit's own modules are forgotten before the code


@pytest.fixture
def shared():
    folder = Path(tempfile.mkdtemp(prefix="patchkit-sandbox-test-"))
    os.chmod(folder, 0o777)
    yield folder
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait_gone(pid: int) -> None:
    import time

    end = time.time() + 60
    while not _gone(pid):
        if time.time() > end:
            os.kill(pid, 9)
            pytest.fail(f"process {pid}, left by the helper, still runs")
        time.sleep(0.05)


WARM = ["subprocess", "time"]  # imported before the drop: the user may not reach this interpreter's own library
CHILD = r'''
import subprocess, time
child = subprocess.Popen(["sleep", "600"])
with open(sys.argv[1], "w") as handle:
    handle.write(str(child.pid))
if sys.argv[2] == "hang":
    time.sleep(600)
answer({"child": child.pid})
'''


@pytest.mark.parametrize("how", ["hang", "answer"])
def test_its_whole_group_is_killed_at_the_end_and_on_the_timeout(how, shared, stranger):
    pidfile = shared / "child"
    ids = Ids(stranger.uid, stranger.gid, ())
    if how == "hang":
        with pytest.raises(SandboxError, match="did not finish within 2 s"):
            sandbox.run(CHILD, [str(pidfile), how], ids=ids, timeout=2, warm=WARM)
    else:
        assert sandbox.run(CHILD, [str(pidfile), how], ids=ids, warm=WARM)["child"] == int(pidfile.read_text())
    _wait_gone(int(pidfile.read_text()))


@pytest.mark.parametrize("code,says", [
    ("print('not json')", "gave no answer"),
    ("print('[1, 2]')", "gave no answer"),
    ("raise ValueError('boom')", "boom"),
    ("sys.stdout.write('x' * (1 << 20)); sys.stdout.flush(); answer({})", "gave no answer"),
    ("answer({'deep': 1}); sys.stdout.write('\\n' + '[' * 100000)", "gave no answer"),
])
def test_anything_but_a_json_object_is_one_line(code, says):
    with pytest.raises(SandboxError, match=says) as err:
        sandbox.run(code)
    assert "\n" not in str(err.value)
