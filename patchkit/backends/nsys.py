"""nsys backend: CUDA profiler API edges for Nsight Systems, an NVTX range per recorded step.

Run the job under ``nsys profile --capture-range=cudaProfilerApi``
(add ``--capture-range-end=repeat`` when schedule.repeat is not 1): nsys records
from ``torch.cuda.profiler.start()`` at the first recorded step of a window
to ``torch.cuda.profiler.stop()`` after its last one, and writes the report
itself.  Warmup steps record nothing here.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

from .registry import Plan

STATIC_FEATURES: Dict[str, Any] = {"version": None}


def probe() -> Dict[str, Any]:
    import torch  # noqa: F401
    import torch.cuda.nvtx  # noqa: F401
    import torch.cuda.profiler  # noqa: F401

    return {"version": torch.__version__}


def plan(s: Mapping[str, Any], features: Mapping[str, Any], key: str) -> Plan:
    notes = ["nsys writes the report: run under `nsys profile --capture-range=cudaProfilerApi"
             + (" --capture-range-end=repeat" if s["repeat"] != 1 else "") + "`"]
    unused = [f"profiler.{k}" for k in ("save_path", "level", "contents", "export_type", "analysis", "mstx")]
    notes.append(", ".join(unused) + " are not used by nsys")
    return Plan(
        sections={
            "create": "import torch\n\n"
                      "if not torch.cuda.is_available():\n"
                      "    raise RuntimeError('the nsys backend needs a CUDA device (torch.cuda.is_available() is False)')\n",
            "window_open": "torch.cuda.profiler.start()\n",
            "step_enter": f"torch.cuda.nvtx.range_push({key!r} + '#' + str(step))\n",
            "step_exit": "torch.cuda.nvtx.range_pop()\n",
            "window_close": "torch.cuda.synchronize()\ntorch.cuda.profiler.stop()\n",
        },
        trace_dir=None,
        notes=tuple(notes),
    )
