"""Control surface of the torch_npu test double (test-only, never shipped).

    import torch_npu._double as d
    d.config(version="2.5.1", strict=True)   # before torch_npu.profiler / torch_npu.npu are imported
    d.recorder.calls / .profiles / .warnings / .errors / .diagnostics / .mstx
    d.reset()                                 # clear records and process-wide singletons
    d.reload(version="2.7.1")                 # in-process switch of train (tests only)

Environment (read once, when this package is first imported):
    TORCH_NPU_DOUBLE_VERSION  torch_npu version to imitate (default 2.14.0)
    TORCH_NPU_DOUBLE_STRICT   "1" turns reset-warnings and silent hazards into DoubleStrictError
    TORCH_NPU_DOUBLE_TORCH    "0" never delegates to torch.profiler (synthetic events only)
    TORCH_NPU_DOUBLE_NPU_AVAILABLE  "0" makes torch_npu.npu.is_available() return False
"""

from __future__ import annotations

import importlib
import os
import sys

from .trains import (DEFAULT_VERSION, REPRESENTATIVE, Train, UnsupportedTrainError,
                     known_versions, train_of)
from .recorder import (CallRecord, DoubleStrictError, ErrorRecord, MstxRecord, ProfileRecord,
                       Recorder, recorder, register_reset)

__all__ = [
    "config", "current_train", "recorder", "reset", "reload", "DoubleStrictError",
    "UnsupportedTrainError", "Train", "known_versions", "train_of", "CallRecord",
    "ErrorRecord", "MstxRecord", "ProfileRecord", "Recorder", "register_reset",
]


def _env_flag(name, default):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return raw.strip().lower() in ("1", "true", "yes", "on")


def _initial_config():
    version = os.environ.get("TORCH_NPU_DOUBLE_VERSION") or DEFAULT_VERSION
    train_of(version)  # unknown versions are a test-setup error: ValueError at import
    torch_env = os.environ.get("TORCH_NPU_DOUBLE_TORCH")
    return {
        "version": version,
        "strict": _env_flag("TORCH_NPU_DOUBLE_STRICT", False),
        "npu_available": _env_flag("TORCH_NPU_DOUBLE_NPU_AVAILABLE", True),
        "device_count": 1,
        # "auto": use torch.profiler when torch imports; False: synthetic events only.
        "torch_backend": "auto" if torch_env in (None, "") else _env_flag("TORCH_NPU_DOUBLE_TORCH", True),
        # Mirror mstx ranges as torch record_function events while the torch backend runs.
        "mstx_mirror": True,
        # Pretend the msprof CLI (msproftx=on) or mspti enables mstx without a profiler.
        "mstx_external": False,
        # CANN capabilities that change analysis results.
        "cann_supports_db": True,
        "cann_db_default": False,
        # Register torch.npu = torch_npu.npu when torch_npu.npu is imported.
        "register_torch_device": False,
    }


_CONFIG = _initial_config()
_FROZEN_VERSION = None  # set once torch_npu.profiler / torch_npu.npu are imported
_TRAIN_CACHE = {}


def config(version=None, train=None, strict=None, **options):
    """Read or change the double's configuration; returns a copy of it.

    ``version`` (e.g. "2.5.1") or ``train`` ("T5" or 5) selects the release to
    imitate.  It must be chosen before ``torch_npu.profiler``/``torch_npu.npu``
    are imported; afterwards use :func:`reload`.  Other options: npu_available,
    device_count, torch_backend ("auto"/True/False), mstx_mirror, mstx_external,
    cann_supports_db, cann_db_default, register_torch_device.
    """
    global _CONFIG
    if version is not None and train is not None:
        raise ValueError("pass either version or train, not both")
    if train is not None:
        num = int(str(train).upper().lstrip("T"))
        if num not in REPRESENTATIVE:
            raise ValueError(f"torch_npu double: unsupported train {train!r}")
        version = REPRESENTATIVE[num]
    if version is not None:
        train_of(version)
        if _FROZEN_VERSION is not None and version != _FROZEN_VERSION:
            raise RuntimeError(
                f"torch_npu double: torch_npu.profiler was already imported as {_FROZEN_VERSION}; "
                f"call torch_npu._double.reload(version={version!r}) or select the version "
                "with TORCH_NPU_DOUBLE_VERSION before importing torch_npu")
        _CONFIG["version"] = version
    if strict is not None:
        _CONFIG["strict"] = bool(strict)
    for key, val in options.items():
        if key not in _CONFIG:
            raise TypeError(f"torch_npu double: unknown config option {key!r}")
        _CONFIG[key] = val
    return dict(_CONFIG)


def get(key):
    return _CONFIG[key]


def is_strict() -> bool:
    return bool(_CONFIG["strict"])


def current_train() -> Train:
    """The train the double imitates; raises UnsupportedTrainError for T0 (2.1.0)."""
    version = _FROZEN_VERSION or _CONFIG["version"]
    tr = _TRAIN_CACHE.get(version)
    if tr is None:
        tr = _TRAIN_CACHE[version] = Train(version)
    if tr.n == 0:
        raise UnsupportedTrainError(
            f"torch_npu double: version {version} belongs to the legacy train T0 (2023-12), "
            "whose positional profiler API is not supported")
    return tr


def freeze() -> Train:
    """Called by the train-dependent modules when they are imported."""
    global _FROZEN_VERSION
    tr = current_train()
    _FROZEN_VERSION = tr.version
    return tr


def reset():
    """Clear all records and the process-wide singletons (paths, mstx, active profilers)."""
    recorder.reset()


_TRAIN_MODULE_PREFIXES = ("torch_npu.profiler", "torch_npu.npu", "torch_npu._C", "torch_npu.utils",
                          "torch_npu.version")


def reload(**cfg):
    """Re-import the train-dependent modules under a new configuration (tests only).

    Objects created before the reload keep the old train's behaviour.  Returns
    the ``torch_npu`` package.
    """
    global _FROZEN_VERSION
    reset()
    pkg = sys.modules.get("torch_npu")
    for name in list(sys.modules):
        if name.startswith(_TRAIN_MODULE_PREFIXES):
            del sys.modules[name]
    if pkg is not None:
        for attr in ("profiler", "npu", "_C", "utils", "version"):
            pkg.__dict__.pop(attr, None)
    _FROZEN_VERSION = None
    config(**cfg)
    current_train()
    pkg = importlib.import_module("torch_npu")
    importlib.import_module("torch_npu.npu")
    importlib.import_module("torch_npu.profiler")
    return pkg
