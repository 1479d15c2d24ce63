"""torch_npu.npu stand-in: device queries that answer as if one NPU were present.

``is_available()`` is True unless config(npu_available=False) (or env
TORCH_NPU_DOUBLE_NPU_AVAILABLE=0); ``device_count()`` follows config(device_count=...).
Streams are host-side objects only; synchronize() returns immediately.
"""

from __future__ import annotations

import contextlib
import sys

from torch_npu import _double
from torch_npu._double.codegen import recorded
from torch_npu._double.recorder import register_reset

_TRAIN = _double.freeze()

from . import streams  # noqa: E402
from .streams import Event, Stream, _device_index  # noqa: E402

if _TRAIN.has_mstx_module:
    from .mstx import mstx  # noqa: E402,F401  (shadows the submodule, as in torch_npu)

__all__ = ["is_available", "device_count", "current_device", "set_device", "synchronize",
           "current_stream", "default_stream", "stream", "Stream", "Event", "streams"]
if _TRAIN.has_mstx_module:
    __all__.append("mstx")


class _DeviceState:
    def __init__(self):
        self.device = 0
        self.current = {}
        self.default = {}


_state = _DeviceState()


@register_reset
def _reset_devices():
    _state.__init__()


def _lazy_init():
    return None


@recorded("npu.is_available")
def is_available():
    return bool(_double.get("npu_available"))


@recorded("npu.device_count")
def device_count():
    return int(_double.get("device_count")) if _double.get("npu_available") else 0


@recorded("npu.current_device")
def current_device():
    return _state.device


@recorded("npu.set_device")
def set_device(device):
    index = _device_index(device)
    if not _double.get("npu_available") or not 0 <= index < int(_double.get("device_count")):
        raise RuntimeError(f"Invalid device ID {index}; the torch_npu double has "
                           f"{device_count()} device(s).")
    _state.device = index


@recorded("npu.synchronize")
def synchronize(device=None):
    return None


def default_stream(device=None):
    index = _state.device if device is None else _device_index(device)
    if index not in _state.default:
        _state.default[index] = Stream(index)
    return _state.default[index]


@recorded("npu.current_stream")
def current_stream(device=None):
    index = _state.device if device is None else _device_index(device)
    return _state.current.get(index) or default_stream(index)


@contextlib.contextmanager
def stream(s):
    if s is None:
        yield
        return
    prev = _state.current.get(s.device_index)
    _state.current[s.device_index] = s
    try:
        yield
    finally:
        if prev is None:
            _state.current.pop(s.device_index, None)
        else:
            _state.current[s.device_index] = prev


def _maybe_register_torch_device():
    if not _double.get("register_torch_device"):
        return
    torch = sys.modules.get("torch")
    if torch is None or hasattr(torch, "npu"):
        return
    import torch_npu.npu as this
    try:
        # What torch_npu does on import: name the PrivateUse1 backend "npu" (global, one-way).
        torch.utils.rename_privateuse1_backend("npu")
        torch._register_device_module("npu", this)
    except Exception:  # noqa: BLE001 - older/newer torch: fall back to a plain attribute
        torch.npu = this
        sys.modules.setdefault("torch.npu", this)


_maybe_register_torch_device()
