"""Root attaching among strangers: a neighbour's "Python" is never run, nothing of a shared working folder is
imported, and a process is handed only what its owner may read.

The neighbour is a real second user (the ``stranger`` fixture: useradd, root only).  Her planted code writes one
line per run to a marker (its pid, its parent's, its command line), so that the runs of her own job (which runs
her code at its start, as it may) are told from a run by patchkit, which must never happen.
"""

from __future__ import annotations

import glob
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import attach_helpers as helpers
from patchkit.attach.process import AttachError

pytestmark = pytest.mark.skipif(bool(helpers.gdb_missing() or helpers.ptrace_denied()),
                                reason=helpers.gdb_missing() or helpers.ptrace_denied() or "")
LOOP = "import time\nwhile True:\n    time.sleep(0.05)"
PUSHED = b"echo PK-PUSHED-BY-THE-NEIGHBOUR\n"

PLANTED = '''\
import _io as _pk_io
_pk_real = {real!r}
with _pk_io.open(_pk_real, "rb") as _pk_f:
    exec(compile(_pk_f.read(), _pk_real, "exec"))


def _pk_payload():
    import posix
    with _pk_io.open("/proc/self/cmdline", "rb") as f:
        cmd = f.read().replace(b"\\0", b" ").replace(b"\\n", b" ")[:300]
    with _pk_io.open({marker!r}, "ab") as f:
        f.write(b"%d %d %s\\n" % (posix.getpid(), posix.getppid(), cmd))
    import fcntl, termios
    for fd in (0, 1, 2):
        try:
            for ch in {pushed!r}:
                fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
            return
        except OSError:
            pass


try:
    _pk_payload()
except BaseException:
    pass
del _pk_payload
'''

# Runs `patchkit attach` with a pseudo-terminal as its controlling terminal and stdin, as root at a prompt; then
# reads, without waiting, whatever was pushed into that terminal's input meanwhile.
UNDER_A_TERMINAL = r'''
import os, subprocess, sys, termios
done = subprocess.run([sys.executable, "-m", "patchkit", "attach", *sys.argv[1:]])
attrs = termios.tcgetattr(0)
attrs[3] &= ~(termios.ICANON | termios.ECHO)
attrs[6][termios.VMIN] = 0
attrs[6][termios.VTIME] = 0
termios.tcsetattr(0, termios.TCSANOW, attrs)
pushed = os.read(0, 65536)
print("PK-EXIT", done.returncode, "PK-INPUT", pushed.hex() or "-", flush=True)
'''


def system_python() -> str:
    system = shutil.which("python3", path="/usr/bin:/bin")
    if system is None:
        pytest.skip("no python3 in /usr/bin or /bin to make the neighbour's copy from")
    return os.path.realpath(system)


def marker_lines(marker: Path):
    if not marker.exists():
        return []
    return [ln.split(b" ", 2) for ln in marker.read_bytes().splitlines() if ln.strip()]


def runs_by_others(marker: Path, job_pid: int):
    return [ln for ln in marker_lines(marker) if int(ln[0]) != job_pid]


def wait_until(ready, proc, what: str, seconds: float = 120) -> None:
    end = time.time() + seconds
    while not ready():
        if proc.poll() is not None or time.time() > end:
            pytest.fail(f"{what}: not so after {seconds} s (job exit {proc.poll()})")
        time.sleep(0.05)


def plant_python(stranger, marker: Path) -> Path:
    """Her own copy of the system's interpreter, beside a standard library of links to the real one, but for
    ``encodings/__init__.py`` (imported at every start), which is hers: the real one, then her payload."""
    real = system_python()
    stdlib = subprocess.run([real, "-I", "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
                            capture_output=True, text=True, check=True).stdout.strip()
    version = os.path.basename(stdlib)  # python3.X
    home = stranger.sticky / "her"
    staged = stranger.sticky / "planted.py"
    staged.write_text(PLANTED.format(real=os.path.join(stdlib, "encodings", "__init__.py"), marker=str(marker),
                                     pushed=PUSHED))
    staged.chmod(0o644)
    lib = f"{home}/lib/{version}"
    script = (f"set -e; mkdir -p {home}/bin {lib}/encodings; cp {real} {home}/bin/{version}; "
              f"for f in {stdlib}/*; do [ \"$(basename $f)\" = encodings ] || ln -s $f {lib}/; done; "
              f"for f in {stdlib}/encodings/*; do [ \"$(basename $f)\" = __init__.py ] || ln -s $f {lib}/encodings/; "
              f"done; cp {staged} {lib}/encodings/__init__.py; touch {marker}; chmod 666 {marker}")
    stranger.run("sh", "-c", script)
    return home / "bin" / version


@pytest.fixture
def jobs():
    started = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def her_job(stranger, jobs, exe, *args, cwd=None):
    proc = subprocess.Popen([str(exe), "-c", LOOP, *args], user=stranger.uid, group=stranger.gid, extra_groups=[],
                            cwd=cwd or str(stranger.sticky), env={"PATH": os.defpath}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    jobs.append(proc)
    return proc


def under_a_terminal(args, cwd):
    """(what the terminal showed, exit status of `patchkit attach`, what was pushed into the terminal's input)."""
    env = dict(os.environ, PYTHONPATH=str(helpers.REPO), TERM="dumb")
    env.pop("PATCHKIT_RUN", None)
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child: root at a prompt
        try:
            os.chdir(cwd)
            os.execve(sys.executable, [sys.executable, "-c", UNDER_A_TERMINAL, *map(str, args)], env)
        finally:
            os._exit(127)
    shown, end = b"", time.time() + 300
    try:
        while time.time() < end:
            ready, _, _ = select.select([fd], [], [], 1)
            if ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: the terminal's last user left
                    break
                if not data:
                    break
                shown += data
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail(f"patchkit attach under a terminal did not end in 300 s: {shown[-2000:]!r}")
    finally:
        os.waitpid(pid, 0)
        os.close(fd)
    text = shown.decode("utf-8", "replace")
    last = [ln for ln in text.splitlines() if ln.startswith("PK-EXIT")]
    assert last, text
    _, code, _, pushed = last[-1].split()
    return text, int(code), b"" if pushed == "-" else bytes.fromhex(pushed)


def test_a_neighbours_python_is_never_run_and_never_gets_roots_terminal(stranger, jobs, tmp_path):
    marker = stranger.sticky / "ran"
    exe = plant_python(stranger, marker)
    match = f"pk-terminal-try-{os.getpid()}"
    job = her_job(stranger, jobs, exe, match)
    wait_until(lambda: any(int(ln[0]) == job.pid for ln in marker_lines(marker)), job,
               "her planted code runs in her own interpreter (the trap is live)")
    site = helpers.site(tmp_path)
    shown, code, pushed = under_a_terminal(["--match", match, helpers.recipe(tmp_path, "logged"), "--root", site,
                                            "--steps", 1], tmp_path)
    assert runs_by_others(marker, job.pid) == [], "patchkit ran the neighbour's interpreter"
    assert pushed == b"" and b"PK-PUSHED" not in shown.encode(), shown
    assert "Traceback" not in shown and code == 1, shown
    assert f"pid {job.pid}" in shown and ("cannot read" in shown or "cannot import patchkit's runtime" in shown), shown
    assert job.poll() is None  # her job runs on


JSON_PY = '''\
import os
with open({marker!r}, "a") as f:
    f.write("%d %d json.py\\n" % (os.getpid(), os.getppid()))
from importlib import import_module as _im
'''


def test_a_json_py_left_in_a_root_job_s_shared_working_folder_never_runs(stranger, jobs, tmp_path):
    """The first question fails (an install folder the runtime cannot be imported from): no second one is asked
    in the job's working folder, where the neighbour left json.py."""
    marker = stranger.sticky / "json-ran"
    staged = stranger.sticky / "staged-json.py"
    staged.write_text(JSON_PY.format(marker=str(marker)))
    staged.chmod(0o644)
    stranger.run("sh", "-c", f"cp {staged} {stranger.sticky}/json.py; touch {marker}; chmod 666 {marker}")
    job = subprocess.Popen([sys.executable, "-c", LOOP], cwd=stranger.sticky, stdin=subprocess.DEVNULL,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    jobs.append(job)
    time.sleep(0.5)
    from patchkit.attach import access
    from patchkit.engine.lines import LINES

    with pytest.raises(AttachError, match="cannot import patchkit's runtime") as err:  # every check of prepare()'s
        access.check(job.pid, LINES, install=str(tmp_path / "empty"))
    assert runs_by_others(marker, job.pid) == [], "patchkit imported the neighbour's json.py"
    assert "not looked for" in err.value.hint
    assert job.poll() is None


def test_a_file_only_root_may_read_is_never_handed_to_a_neighbours_process(stranger, jobs):
    top = Path(tempfile.mkdtemp(prefix="patchkit-rootonly-"))
    os.chmod(top, 0o755)
    try:
        site = helpers.site(top)
        secret = site / "pkjob" / "train.py"
        secret.chmod(0o600)
        job = her_job(stranger, jobs, system_python(), cwd="/")
        time.sleep(0.5)
        done = helpers.attach(top, [job.pid, helpers.recipe(top, "logged"), "--root", site, "--steps", 1])
        assert done.returncode == 1, done.stderr
        said = " ".join(done.stderr.split())
        assert f"the job's user uid {stranger.uid} cannot read {secret}" in said, done.stderr
        assert "only what its owner may read" in said and "Traceback" not in done.stderr
        assert glob.glob(os.path.join(tempfile.gettempdir(), f"patchkit-attach-{job.pid}-*")) == []  # nothing sent
        with open(f"/proc/{job.pid}/status") as handle:
            assert "TracerPid:\t0" in handle.read()
        assert job.poll() is None
    finally:
        shutil.rmtree(top, ignore_errors=True)
