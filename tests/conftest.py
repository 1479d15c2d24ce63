"""Shared fixtures: an isolated PATCHKIT_HOME and writable copies of the fixture trees."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
RECIPES = REPO / "recipes"


@pytest.fixture(scope="session", autouse=True)
def no_real_home(tmp_path_factory):
    """Module- and session-scoped fixtures run before each test's own home: they get one for the session, so no
    test ever writes the ledger, backups or capture index of the machine running the suite."""
    import os

    saved = os.environ.get("PATCHKIT_HOME")
    os.environ["PATCHKIT_HOME"] = str(tmp_path_factory.mktemp("session-home"))
    yield
    if saved is None:
        os.environ.pop("PATCHKIT_HOME", None)
    else:
        os.environ["PATCHKIT_HOME"] = saved


@pytest.fixture(autouse=True)
def patchkit_home(tmp_path_factory, monkeypatch):
    """Every test gets its own ledger and no PATCHKIT_ROOT from the environment."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    monkeypatch.delenv("PATCHKIT_ROOT", raising=False)
    return home


@pytest.fixture
def tree(tmp_path):
    """``tree("verl-0.6")`` -> a writable copy of fixtures/verl-0.6."""

    def copy(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(FIXTURES / name, dest)
        return dest

    return copy


@pytest.fixture
def clean_runtime(monkeypatch):
    """patchkit.runtime forgotten before and after the test, with no PATCHKIT_STRICT or RANK from outside."""
    from patchkit import runtime

    monkeypatch.delenv("PATCHKIT_STRICT", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    runtime.reset()
    yield runtime
    runtime.reset()


def snapshot(root: Path) -> dict:
    """Every file under ``root`` with its bytes, to prove nothing changed."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """Real-wheel tests fail in CI when a download fails; elsewhere they skip and say why."""
    import os

    import realwheels

    try:
        return (yield)
    except realwheels.RealWheelError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"real wheels could not be fetched (is the package registry reachable?): {exc}")


def _hypothesis_profiles() -> None:
    """In CI the property tests replay the same examples every run (a red CI must mean a real regression);
    elsewhere they explore new ones."""
    import os

    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
    if os.environ.get("CI"):
        settings.load_profile("ci")


_hypothesis_profiles()


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory):
    """The save path of one real two-rank gloo run of the demo sample (tests/capturing.py), made once."""
    from capturing import two_rank_run

    return two_rank_run(tmp_path_factory)


@pytest.fixture
def terminal(monkeypatch):
    """stderr a terminal for the progress bars (patchkit.cli.progress), still captured by CliRunner."""
    from patchkit.cli import progress

    from progress_helpers import Terminal

    real = progress.stream
    monkeypatch.setattr(progress, "stream", lambda: Terminal(real()))


class Stranger:
    """A second, unprivileged user (made with useradd for the session) and a sticky folder anyone may write, as
    ``/tmp`` is: what another user on a shared node can do there, done as that user."""

    def __init__(self, name: str, uid: int, gid: int, sticky: Path):
        self.name, self.uid, self.gid, self.sticky = name, uid, gid, sticky

    def run(self, *command: str) -> None:
        """``command`` run as the stranger (``ln -s``, ``mv``, ``mkdir``: no Python, nothing of the test's)."""
        import subprocess

        done = subprocess.run(list(command), user=self.uid, group=self.gid, extra_groups=[], capture_output=True,
                              text=True, timeout=60, cwd="/")
        assert done.returncode == 0, f"{command} as {self.name}: {done.stderr}"


@pytest.fixture(scope="session")
def stranger_account():
    """(name, uid, gid) of a second user, made with useradd and removed after the session; skipped unless root."""
    import os
    import pwd
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("links planted by another user need a second user, made with useradd, which only root can run")
    if not shutil.which("useradd") or not shutil.which("userdel"):
        pytest.skip("useradd and userdel are not installed: no second user can be made")
    name = f"pkstranger{os.getpid() % 100000}"
    done = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        pytest.skip(f"useradd could not make a second user: {done.stderr.strip()}")
    entry = pwd.getpwnam(name)
    yield name, entry.pw_uid, entry.pw_gid
    subprocess.run(["userdel", name], capture_output=True, timeout=60)


@pytest.fixture
def stranger(stranger_account):
    """A :class:`Stranger` with a fresh sticky folder (mode 1777, under ``/tmp`` so that the stranger can reach it)."""
    import os
    import tempfile

    sticky = Path(tempfile.mkdtemp(prefix="patchkit-sticky-", dir="/tmp"))
    os.chmod(sticky, 0o1777)
    yield Stranger(*stranger_account, sticky)
    shutil.rmtree(sticky, ignore_errors=True)


@pytest.fixture
def jobs():
    """The jobs a test starts (anything with ``kill()``: attach_helpers.Job, ...), each killed at its end."""
    started = []
    yield started
    for job in started:
        job.kill()
