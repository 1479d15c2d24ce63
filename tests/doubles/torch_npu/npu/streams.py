"""torch_npu.npu.streams stand-in: streams and events with no device behind them."""

from __future__ import annotations

import itertools

from torch_npu._double import recorder

_ids = itertools.count(1)
_PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1, which torch_npu registers as "npu"


def _device_index(device):
    if device is None:
        from . import current_device
        return current_device()
    if isinstance(device, int):
        return device
    text = str(device)
    if text.startswith("npu"):
        return int(text.split(":", 1)[1]) if ":" in text else 0
    index = getattr(device, "index", None)
    if isinstance(index, int):
        return index
    raise ValueError(f"Expected a npu device, but got: {device!r}")


class Stream:
    """Host-side stand-in for torch_npu.npu.Stream (``npu_stream`` is a fake handle)."""

    def __init__(self, device=None, priority=0, **kwargs):
        self.device_index = _device_index(device)
        self.device_type = _PRIVATEUSE1
        self.stream_id = next(_ids)
        self.npu_stream = 0x7F0000000000 + self.stream_id * 0x100
        self.priority = priority

    @property
    def device(self):
        return f"npu:{self.device_index}"

    def query(self):
        return True

    def synchronize(self):
        recorder.diagnostics.append(f"stream_synchronize:{self.stream_id}")

    def wait_event(self, event):
        return None

    def wait_stream(self, stream):
        return None

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and other.stream_id == self.stream_id

    def __hash__(self):
        return hash((self.device_index, self.stream_id))

    def __repr__(self):
        return f"<torch_npu.npu.Stream device=npu:{self.device_index} npu_stream={self.npu_stream:#x}>"


class Event:
    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.enable_timing = enable_timing
        self.recorded = False

    def record(self, stream=None):
        self.recorded = True

    def wait(self, stream=None):
        return None

    def query(self):
        return True

    def synchronize(self):
        return None

    def elapsed_time(self, end_event):
        return 0.0
