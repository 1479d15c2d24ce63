"""Real training frameworks for the jobs of tests/autojobs.py: Hugging Face transformers (with accelerate, which its
Trainer needs) and PyTorch Lightning 2.x, installed once from the package registry.

They go into one virtual environment in a cache outside the repository (under the same root as
tests/realwheels.py, beside tests/verlenv.py's environments)::

    CACHE/frameworks-env/<base>/                a virtual environment; <base> as verlenv's

built the way tests/verlenv.py builds verl's: no pip and no torch of its own; while pip installs into it, a ``.pth``
file puts this interpreter's site-packages after its own, so pip sees torch (the CPU build the tests use) as
installed and never brings another.  What this interpreter already has at a version that satisfies
:data:`REQUIREMENTS` is not installed again.  A job runs with this interpreter and :func:`site_packages` first on
PYTHONPATH.

A registry that cannot be reached raises :class:`FrameworksEnvError`, a :class:`realwheels.RealWheelError`: the
suite's conftest then skips the test, saying why (and fails it in CI, where the registry is reachable).

Command line (pre-build, print where it is and what it holds)::

    python tests/frameworksenv.py
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Dict, Sequence

import realwheels
import verlenv

ROOT = realwheels.CACHE / "frameworks-env"

# Lightning 2.x: the `lightning` package (lightning.pytorch); transformers' Trainer imports accelerate.
REQUIREMENTS = ("transformers>=4.40", "accelerate>=0.26", "lightning>=2.0,<3")

# Bump when what the environment holds changes, so an old one is rebuilt.
_LAYOUT = 1


class FrameworksEnvError(realwheels.RealWheelError):
    """The frameworks could not be installed (the package registry cannot be reached, or pip failed)."""


def env_dir() -> Path:
    return ROOT / verlenv._base_key()


def _marker() -> Path:
    return env_dir() / "patchkit-frameworks-env.json"


def _wanted() -> Dict[str, object]:
    return {"layout": _LAYOUT, "requirements": list(REQUIREMENTS)}


def built() -> bool:
    """Whether an environment with :data:`REQUIREMENTS` is there already (nothing is built)."""
    with contextlib.suppress(OSError, ValueError):
        return json.loads(_marker().read_text()) == _wanted()
    return False


def ensure() -> Path:
    """Build the environment unless an identical one is there (a minute, with pip); return its folder."""
    with realwheels._locked("frameworks-env"):
        if not built():
            try:
                verlenv._build(env_dir(), REQUIREMENTS)
            except verlenv.VerlEnvError as exc:
                raise FrameworksEnvError(str(exc)) from None
            _marker().write_text(json.dumps(_wanted()))
    return env_dir()


def site_packages() -> Path:
    """The environment's packages (built on first use), to put first on a job's PYTHONPATH."""
    (found,) = ensure().glob("lib/python*/site-packages")
    return found


def main(argv: Sequence[str]) -> int:
    folder = site_packages()
    have = sorted(p.name for p in folder.glob("*.dist-info"))
    print("frameworks: %s (%s)\n  %s" % (folder, ", ".join(REQUIREMENTS), "\n  ".join(have)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
