"""Whether the Python that runs a patched package can import ``patchkit.runtime``.

The inserted lines import the runtime; where it is missing they fall back to
a stand-in that does nothing (see :func:`patchkit.engine.lines.header_lines`), so
the job runs on, unprofiled.  ``apply`` warns when it can tell that this will
happen: a ``--root`` shaped like site-packages that holds no patchkit and is
not on this interpreter's own path.  A source checkout gives no such sign (its
interpreter is wherever it is installed from), so it gets no warning.
Standard library only, file lookups only.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

from patchkit import DISTRIBUTION

_SITE_NAMES = ("site-packages", "dist-packages")


def _same(a: str, b: Path) -> bool:
    try:
        return os.path.samefile(a or ".", b)
    except OSError:
        return False


def _has_patchkit(root: Path) -> bool:
    """``root`` holds an importable patchkit with a runtime, or this distribution's metadata (an editable install)."""
    if (root / "patchkit" / "runtime.py").is_file():
        return True
    wheel_name = DISTRIBUTION.replace("-", "_")
    try:
        return any(entry.startswith(f"{wheel_name}-") and entry.endswith((".dist-info", ".egg-info"))
                   for entry in os.listdir(root))
    except OSError:
        return False


def _site_packages_like(root: Path) -> bool:
    if root.name in _SITE_NAMES:
        return True
    try:
        return any(entry.endswith(".dist-info") for entry in os.listdir(root))
    except OSError:
        return False


def runtime_missing(root: Path) -> Optional[str]:
    """A warning when the environment that imports packages from ``root`` cannot import patchkit.runtime, else None."""
    if any(_same(entry, root) for entry in sys.path):
        return None  # this interpreter imports from root, and it runs patchkit
    if _has_patchkit(root) or not _site_packages_like(root):
        return None
    return (f"{root} has no patchkit: a Python that imports packages from there cannot import patchkit.runtime, "
            f"so the inserted lines will do nothing there (one line on stderr says so when the module is imported); "
            f"install this build of patchkit ({DISTRIBUTION}: a wheel built from its checkout, or a path that "
            f"environment shares; it is not the registry's `patchkit`) into that environment")
