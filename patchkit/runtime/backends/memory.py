"""memory backend: the allocator's history during each window, dumped as a snapshot that memory_viz opens.

The users' ``tool=torch_memory``.  When a window opens, recording of every
allocation and free starts (``_record_memory_history``, with stacks); when it
closes, the snapshot is written and recording stops.  CUDA through
``torch.cuda.memory``, Ascend through ``torch_npu.npu.memory`` (the same
calls); the device is found when the capture starts.  One file per window::

    <save_path>/<host>_<pid>[_<role>]_steps<first>-<last>.pickle

to drop on https://pytorch.org/memory_viz (or ``python -m
torch.cuda._memory_viz trace_plot FILE -o FILE.html``).  Without a CUDA or NPU
device the capture does not start: one line says so, and the job goes on.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

from patchkit.core.vocabulary import NPU_ONLY
from patchkit.runtime.backends.registry import Plan, no_equivalent, role_of

STATIC_FEATURES: Dict[str, Any] = {"version": None, "device": "cuda",
                                   "assumed": "no device probed: CUDA is assumed; on Ascend the same calls go to "
                                              "torch_npu.npu.memory"}
MODULE = {"cuda": "torch.cuda.memory", "npu": "torch_npu.npu.memory"}
MAX_ENTRIES = 100_000  # allocation events kept: enough for a few steps, bounded in memory
UNUSED = ("level", "contents", "export_type", "analysis", "mstx") + NPU_ONLY


def probe() -> Dict[str, Any]:
    import torch

    if torch.cuda.is_available():
        return {"version": torch.__version__, "device": "cuda"}
    try:
        import torch_npu
    except ImportError:
        return {"version": torch.__version__, "device": None}
    return {"version": torch.__version__, "device": "npu" if torch_npu.npu.is_available() else None}


def plan(s: Mapping[str, Any], features: Mapping[str, Any], key: str) -> Plan:
    device = features.get("device")
    role = role_of(key)
    name = "socket.gethostname() + '_' + str(os.getpid())" + (f" + {('_' + role)!r}" if role else "")
    create = ["import os", "import socket", "import torch"]
    if device is None:
        create.append("raise RuntimeError('the memory backend needs a CUDA or NPU device; none is available here')")
    elif device == "npu":
        create.append("import torch_npu")
    create.append(f"os.makedirs({s['save_path']!r}, exist_ok=True)")
    create.append("failed_traces = []  # (snapshot, why) of each one not written whole; none is left under its name")
    memory = MODULE.get(device, MODULE["cuda"])
    notes = no_equivalent("the allocator history", s, UNUSED)
    return Plan(
        sections={
            "create": "\n".join(create) + "\n",
            "window_open": f"first = step\n{memory}._record_memory_history(max_entries={MAX_ENTRIES})\n",
            "window_close": f"snapshot = os.path.join({s['save_path']!r}, {name} + '_steps' + str(first) + '-' "
                            f"+ str(step) + '.pickle')\n"
                            "try:  # under a temporary name, renamed once written whole (a full disk raises)\n"
                            f"    {memory}._dump_snapshot(snapshot + '.part')\n"
                            "    with open(snapshot + '.part', 'rb') as f:\n"
                            "        os.fsync(f.fileno())\n"
                            "    os.rename(snapshot + '.part', snapshot)\n"
                            "except Exception as exc:\n"
                            "    failed_traces.append((snapshot, type(exc).__name__ + ': ' + str(exc)))\n"
                            "    if os.path.lexists(snapshot + '.part'):\n"
                            "        os.unlink(snapshot + '.part')\n"
                            "finally:\n"
                            f"    {memory}._record_memory_history(enabled=None)\n",
        },
        trace_dir=s["save_path"],
        notes=tuple(notes),
    )
