"""attach.probe: the job's interpreter says its version and flavour, and whether it imports patchkit's runtime, run as the
job's own user; from patchkit's install folder, else from the job's own environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchkit.attach import probe
from patchkit.attach.process import AttachError, read

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def start():
    started = []

    def run(args, **kw):
        proc = subprocess.Popen(args, **kw)
        started.append(proc)
        time.sleep(0.5)
        return read(proc.pid)

    yield run
    for p in started:
        p.kill()
        p.wait()


SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_the_job_s_interpreter_says_what_it_is_and_imports_the_runtime_from_patchkit_s_install(start):
    found = probe.ask(start(SLEEP), 2)
    assert found.version == tuple(sys.version_info[:3]) and found.runtime_from == probe.INSTALL
    assert found.shown.startswith(f"Python {sys.version_info[0]}.{sys.version_info[1]}")
    assert os.path.realpath(found.executable) == os.path.realpath(sys.executable)
    assert (Path(probe.INSTALL) / "patchkit" / "runtime" / "__init__.py").is_file()


def test_a_job_whose_environment_has_patchkit_imports_it_from_there(start, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    found = probe.ask(start(SLEEP, env=env, cwd=tmp_path), 2, install=str(tmp_path / "empty"))
    assert found.runtime_from == ""


def test_no_runtime_anywhere_is_refused_with_what_to_do(start, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = start([sys.executable, "-S", "-c", "import time; time.sleep(60)"], env=env, cwd=tmp_path)
    with pytest.raises(AttachError, match="cannot import patchkit's runtime") as err:
        probe.ask(proc, 2, install=str(tmp_path / "empty"))
    assert "make" in err.value.hint and "readable by" in err.value.hint


def test_lines_newer_than_the_runtime_serves_are_refused(start, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with pytest.raises(AttachError, match="ImportError"):
        probe.ask(start(SLEEP, env=env, cwd=tmp_path), 99)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs a job as another user")
def test_it_runs_as_the_job_s_user_who_must_be_able_to_read_the_install(start):
    import tempfile

    private = Path(tempfile.mkdtemp(prefix="patchkit-probe-"))  # /tmp: every user may pass through
    shutil.copytree(REPO / "patchkit", private / "patchkit", ignore=shutil.ignore_patterns("__pycache__"))
    private.chmod(0o700)
    system = shutil.which("python3", path="/usr/bin:/bin")  # one every user may run (this one may be under /root)
    try:
        if system is None:
            pytest.skip("no /usr/bin/python3")
        nobody = start([system, *SLEEP[1:]], user=65534, group=65534, cwd="/", env={"PATH": os.defpath})
        with pytest.raises(AttachError, match="uid 65534"):
            probe.ask(nobody, 2, install=str(private))
        private.chmod(0o755)
        assert probe.ask(nobody, 2, install=str(private)).runtime_from == str(private)
    finally:
        shutil.rmtree(private, ignore_errors=True)
