"""Test doubles for patchkit's test suite (test-only; nothing here ships in patchkit/).

``torch_npu/`` imitates one torch_npu release train on a CPU-only machine; see
its package docstring.  Use :func:`npu_double_env` to run generated code against
a chosen release in a subprocess.
"""

from __future__ import annotations

import os

DOUBLES_DIR = os.path.dirname(os.path.abspath(__file__))

__all__ = ["npu_double_env", "DOUBLES_DIR"]


def _trains():
    """Load the train table on its own: importing the double here would run its import-time hooks."""
    import importlib.util

    path = os.path.join(DOUBLES_DIR, "torch_npu", "_double", "trains.py")
    spec = importlib.util.spec_from_file_location("_torch_npu_double_trains", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def npu_double_env(version: str, strict: bool = False) -> dict:
    """Environment for a subprocess that should import the torch_npu double.

    Returns a copy of ``os.environ`` with ``PYTHONPATH`` starting with this
    ``tests/doubles`` directory, ``TORCH_NPU_DOUBLE_VERSION=<version>`` and
    ``TORCH_NPU_DOUBLE_STRICT`` set to "1" or "0".  Pass it as ``env=`` to
    ``subprocess.run``.  An unknown version raises ValueError here already.
    """
    _trains().train_of(version)
    env = dict(os.environ)
    parts = [DOUBLES_DIR] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                             if p and os.path.abspath(p) != DOUBLES_DIR]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env["TORCH_NPU_DOUBLE_VERSION"] = version
    env["TORCH_NPU_DOUBLE_STRICT"] = "1" if strict else "0"
    return env
