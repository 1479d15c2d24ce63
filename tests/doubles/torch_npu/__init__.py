"""CPU test double of ``torch_npu`` for patchkit's tests (never shipped, never in patchkit/).

It imitates one torch_npu release train (section 15 of the torch_npu reference):
exact per-train signatures of torch_npu.profiler / torch_npu.npu.mstx /
dynamic_profile, warn-and-reset validation, swallowed errors, the ProfilerAction
state machine, *_ascend_pt output folders and a small analysis step.  Events are
collected with torch.profiler (CPU) when torch imports, otherwise synthesised.

Running generated (patched) code against a chosen release, in a subprocess::

    import subprocess, sys
    from tests.doubles import npu_double_env          # or: from doubles import npu_double_env
    env = npu_double_env("2.5.1", strict=True)        # full os.environ copy + 3 overrides
    subprocess.run([sys.executable, "train.py"], env=env, check=True)

``npu_double_env`` prepends tests/doubles to PYTHONPATH and sets
TORCH_NPU_DOUBLE_VERSION and TORCH_NPU_DOUBLE_STRICT ("1"/"0").  Other knobs:
TORCH_NPU_DOUBLE_TORCH=0 (never use torch.profiler), TORCH_NPU_DOUBLE_NPU_AVAILABLE=0.
In strict mode reset-warnings and silent hazards raise DoubleStrictError (a
ValueError); a profile never stopped makes the process exit with status 3.

In-process (tests only)::

    import torch_npu._double as d
    d.config(version="2.7.1", strict=False)   # before torch_npu.profiler is imported
    tn = d.reload(version="2.12.0")           # or switch trains later
    d.recorder.calls / .profiles / .warnings / .errors / .diagnostics / .mstx; d.reset()

The train-dependent submodules (profiler, npu) are imported lazily so that
``torch_npu._double.config()`` can run first.  Selecting 2.1.0 (legacy train T0)
raises UnsupportedTrainError (an ImportError) on import.
"""

import importlib as _importlib
import os as _os

from . import _double

_double.current_train()  # unknown version -> ValueError, T0 -> UnsupportedTrainError

_LAZY = ("profiler", "npu", "version", "utils", "_C")


def __getattr__(name):
    if name in _LAZY:
        return _importlib.import_module(f"{__name__}.{name}")
    if name == "__version__":
        return _double.current_train().version
    raise AttributeError(f"module 'torch_npu' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | {"__version__"})


def _non_intrusive_init():
    """PROF_CONFIG_PATH set before import: dynamic profiling driven by optimizer steps (T3+)."""
    path = _os.environ.get("PROF_CONFIG_PATH")
    train = _double.current_train()
    if not path or not train.non_intrusive:
        return
    from .profiler import dynamic_profile as _dp
    from .profiler._backend import get_torch
    from ._double.log import diag
    _dp.init(path)
    torch = get_torch()
    if torch is None:
        diag("non_intrusive_no_torch")
        return
    try:
        from torch.optim.optimizer import register_optimizer_step_post_hook
    except ImportError:
        diag("non_intrusive_no_optimizer_hook")
        return
    register_optimizer_step_post_hook(_dp._step_from_optimizer_hook)
    diag("non_intrusive_hook:" + ("register_optimizer_step_post_hook" if train.optimizer_post_hook
                                  else "optimizer_step_patch(simulated with a post hook)"))


_non_intrusive_init()
