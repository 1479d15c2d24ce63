"""attach.probe: the job's Python read from its files (never run), and what its user can import and read asked of
patchkit's own interpreter run as that user (attach.sandbox)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import attach_helpers as helpers
from patchkit.attach import probe, sandbox
from patchkit.attach.process import AttachError, read

REPO = Path(__file__).resolve().parent.parent
SLEEP = ["-c", "import time; time.sleep(60)"]


@pytest.fixture
def start():
    started = []

    def run(args, **kw):
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, **kw)
        started.append(proc)
        time.sleep(0.5)
        return read(proc.pid)

    yield run
    for p in started:
        p.kill()
        p.wait()


def test_the_job_s_python_is_read_and_its_runtime_imports_from_patchkit_s_install(start):
    found = probe.ask(start([sys.executable, *SLEEP]), 2)
    assert found.version == tuple(sys.version_info[:3]) and found.runtime_from == probe.INSTALL
    assert found.shown.startswith(f"Python {sys.version_info[0]}.{sys.version_info[1]}")
    assert os.path.realpath(found.executable) == os.path.realpath(sys.executable)
    assert (Path(probe.INSTALL) / "patchkit" / "runtime" / "__init__.py").is_file()


@pytest.mark.parametrize("version", helpers.OTHER_VERSIONS)
def test_another_version_s_job_is_read_as_that_version(start, version):
    exe = helpers.other_pythons().get(version)
    if exe is None:
        pytest.skip(f"no CPython {version} on this machine (pyenv or PATH)")
    found = probe.ask(start([exe, *SLEEP]), 2)
    assert ".".join(map(str, found.version[:2])) == version and found.runtime_from == probe.INSTALL


def test_the_job_s_executable_is_never_run(start, monkeypatch, tmp_path):
    """Only patchkit's own interpreter is started, whatever the job runs; for a job of this command's own user, on
    patchkit's own install folder, nothing is: this process answers what that helper would."""
    proc = start([sys.executable, *SLEEP])
    ran = []
    real = subprocess.Popen

    def popen(args, *a, **kw):
        ran.append(args[0])
        return real(args, *a, **kw)

    monkeypatch.setattr(sandbox.subprocess, "Popen", popen)
    assert probe.ask(proc, 2).runtime_from == probe.INSTALL and ran == []
    copy = tmp_path / "copy"
    shutil.copytree(REPO / "patchkit", copy / "patchkit", ignore=shutil.ignore_patterns("__pycache__"))
    assert probe.ask(proc, 2, install=str(copy)).runtime_from == str(copy)  # another folder: asked of the helper
    assert ran == [sys.executable]


def test_the_answer_given_here_is_the_helper_s(start):
    proc = start([sys.executable, *SLEEP])
    here = probe._answered_here(2)
    helper = sandbox.run(probe.IMPORTS, [probe.INSTALL, "2"], probe.ids(proc), warm=probe.RUNTIME)
    assert here == helper == {"patchkit": str(Path(probe.INSTALL) / "patchkit" / "__init__.py")}
    assert probe._answered_here(99) == sandbox.run(probe.IMPORTS, [probe.INSTALL, "99"], None, warm=probe.RUNTIME)
    assert not sandbox.drops(probe.ids(proc)) and not sandbox.drops(None)
    assert sandbox.drops(sandbox.Ids(1000, 1000, ())) == (os.geteuid() == 0)


def test_no_runtime_in_the_install_folder_is_refused_with_what_to_do(start, tmp_path):
    """A job whose own environment has patchkit is not looked into: the line says what to do instead."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with pytest.raises(AttachError, match="cannot import patchkit's runtime") as err:
        probe.ask(start([sys.executable, *SLEEP], env=env, cwd=tmp_path), 2, install=str(tmp_path / "empty"))
    assert "readable by" in err.value.hint and "not looked for" in err.value.hint


def test_lines_newer_than_the_runtime_serves_are_refused(start):
    with pytest.raises(AttachError, match="ImportError"):
        probe.ask(start([sys.executable, *SLEEP]), 99)


def test_a_python_older_than_3_10_is_read_and_left_to_access_to_refuse(start):
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = [*sorted(root.glob("versions/3.9.*/bin/python3.9")), shutil.which("python3.9")]
    exe = next((e for e in found if e and subprocess.run([str(e), "-c", "pass"], capture_output=True).returncode == 0),
               None)
    if exe is None:
        pytest.skip("no CPython 3.9 on this machine (pyenv or PATH)")
    found = probe.ask(start([str(exe), *SLEEP]), 2, install="/nowhere")  # no import asked of it
    assert found.version[:2] == (3, 9)


def _system_python() -> str:
    system = shutil.which("python3", path="/usr/bin:/bin")  # one every user may run (this one may be under /root)
    if system is None:
        pytest.skip("no python3 in /usr/bin or /bin for the other user's job")
    return system


def test_it_asks_as_the_job_s_user_who_must_be_able_to_read_the_install(start, stranger):
    private = Path(tempfile.mkdtemp(prefix="patchkit-probe-"))  # /tmp: every user may pass through
    shutil.copytree(REPO / "patchkit", private / "patchkit", ignore=shutil.ignore_patterns("__pycache__"))
    private.chmod(0o700)
    try:
        job = start([_system_python(), *SLEEP], user=stranger.uid, group=stranger.gid, extra_groups=[], cwd="/",
                    env={"PATH": os.defpath}, start_new_session=True)
        with pytest.raises(AttachError, match=f"uid {stranger.uid}"):
            probe.ask(job, 2, install=str(private))
        private.chmod(0o755)
        assert probe.ask(job, 2, install=str(private)).runtime_from == str(private)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def test_the_files_its_user_cannot_read_are_named(start, stranger):
    job = start([_system_python(), *SLEEP], user=stranger.uid, group=stranger.gid, extra_groups=[], cwd="/",
                env={"PATH": os.defpath}, start_new_session=True)
    secret, public = stranger.sticky / "secret.py", stranger.sticky / "public.py"
    secret.write_text("x = 1\n")
    secret.chmod(0o600)
    public.write_text("x = 1\n")
    public.chmod(0o644)
    assert probe.unreadable(job, [str(public), str(secret)]) == [(str(secret), "Permission denied")]
    assert probe.unreadable(start([sys.executable, *SLEEP]), [str(secret)]) == []  # root's own job: no check
