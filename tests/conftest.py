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
