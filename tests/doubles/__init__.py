"""Test doubles for patchkit's test suite (test-only; nothing here ships in patchkit/).

``torch_npu/`` imitates one torch_npu release train on a CPU-only machine; see
its package docstring.  Use :func:`npu_double_env` to run generated code against
a chosen release in a subprocess.
"""

from __future__ import annotations

import os

DOUBLES_DIR = os.path.dirname(os.path.abspath(__file__))

__all__ = ["npu_double_env", "DOUBLES_DIR"]


def npu_double_env(version: str, strict: bool = False) -> dict:
    """Environment for a subprocess that should import the torch_npu double.

    Returns a copy of ``os.environ`` with ``PYTHONPATH`` starting with this
    ``tests/doubles`` directory, ``TORCH_NPU_DOUBLE_VERSION=<version>`` and
    ``TORCH_NPU_DOUBLE_STRICT`` set to "1" or "0".  Pass it as ``env=`` to
    ``subprocess.run``.  An unknown version raises ValueError here already.
    """
    from .torch_npu._double.trains import train_of

    train_of(version)
    env = dict(os.environ)
    parts = [DOUBLES_DIR] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                             if p and os.path.abspath(p) != DOUBLES_DIR]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env["TORCH_NPU_DOUBLE_VERSION"] = version
    env["TORCH_NPU_DOUBLE_STRICT"] = "1" if strict else "0"
    return env
