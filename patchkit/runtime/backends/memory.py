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
from patchkit.runtime.backend import Backend, Plan
from patchkit.runtime.roles import role_of, worker_name

MODULE = {"cuda": "torch.cuda.memory", "npu": "torch_npu.npu.memory"}
MAX_ENTRIES = 100_000  # allocation events kept: enough for a few steps, bounded in memory


class Memory(Backend):
    STATIC_FEATURES = {"version": None, "device": "cuda",
                       "assumed": "no device probed: CUDA is assumed; on Ascend the same calls go to "
                                  "torch_npu.npu.memory"}
    PROFILER = "the allocator history"
    UNUSED = ("level", "contents", "export_type", "analysis", "mstx") + NPU_ONLY
    PID_IN_TRACE_NAMES = True
    LIBRARY, DEVICES = "torch", ("cuda", "npu")

    def probe(self) -> Dict[str, Any]:
        import torch

        if torch.cuda.is_available():
            return {"version": torch.__version__, "device": "cuda"}
        try:
            import torch_npu
        except ImportError:
            return {"version": torch.__version__, "device": None}
        return {"version": torch.__version__, "device": "npu" if torch_npu.npu.is_available() else None}

    def plan(self, settings: Mapping[str, Any], features: Mapping[str, Any], key: str) -> Plan:
        device = features.get("device")
        save_path = settings["save_path"]
        create = ["import os", "import socket", "import torch"]
        if device is None:
            create.append("raise RuntimeError('the memory backend needs a CUDA or NPU device; none is available here')")
        elif device == "npu":
            create.append("import torch_npu")
        create.append(f"os.makedirs({save_path!r}, exist_ok=True)")
        create.append("failed_traces = []  # (snapshot, why) of each one not written whole; none left under its name")
        memory = MODULE["npu" if device == "npu" else "cuda"]
        name = worker_name(role_of(key))
        return Plan(
            sections={
                "create": "\n".join(create) + "\n",
                "window_open": f"first = step\n{memory}._record_memory_history(max_entries={MAX_ENTRIES})\n",
                "window_close": f"snapshot = os.path.join({save_path!r}, {name} + '_steps' + str(first) + '-' "
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
            trace_dir=save_path,
        )
