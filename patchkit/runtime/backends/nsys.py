"""nsys backend: CUDA profiler API edges for Nsight Systems, an NVTX range per recorded step.

Run the job under ``nsys profile --capture-range=cudaProfilerApi`` with the
``--capture-range-end`` that :func:`options` gives for the schedule: nsys records
from ``torch.cuda.profiler.start()`` at the first recorded step of a window
to ``torch.cuda.profiler.stop()`` after its last one, and writes the report
itself.  Warmup steps record nothing here.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping

from patchkit.core.vocabulary import NPU_ONLY
from patchkit.runtime.backend import Backend, Plan


class Nsys(Backend):
    PROFILER = "nsys"
    LIBRARY, DEVICES = "torch", ("cuda",)
    UNUSED = ("save_path", "level", "contents", "export_type", "analysis", "mstx") + NPU_ONLY

    def probe(self) -> Dict[str, Any]:
        import torch  # noqa: F401
        import torch.cuda.nvtx  # noqa: F401
        import torch.cuda.profiler  # noqa: F401

        return {"version": torch.__version__}

    def launch(self, settings: Mapping[str, Any]) -> List[str]:
        """How to run the job under nsys for this schedule, printed by `patchkit show`."""
        opts = options(settings)
        flags = " ".join(f"--{k}={v}" for k, v in opts.items())
        return [f"nsys profile {flags} -o worker_%p python ...",
                "on Ray (verl): every worker process under nsys, through the job's runtime_env; the reports are",
                "written on each node under /tmp/ray/session_latest/logs/nsight/:",
                f"  ray job submit --runtime-env-json '{json.dumps({'nsight': opts})}' "
                "-- python3 -m verl.trainer.main_ppo ...",
                "(verl's own global_tool_config.nsys.worker_nsight_options apply only while its profile_steps are set; "
                "keep them null with patchkit)"]

    def plan(self, settings: Mapping[str, Any], features: Mapping[str, Any], key: str) -> Plan:
        flags = " ".join(f"--{k}={v}" for k, v in options(settings).items() if k != "trace")
        return Plan(
            sections={
                "create": "import torch\n\n"
                          "if not torch.cuda.is_available():\n"
                          "    raise RuntimeError('the nsys backend needs a CUDA device "
                          "(torch.cuda.is_available() is False)')\n",
                "window_open": "torch.cuda.profiler.start()\n",
                "step_enter": f"torch.cuda.nvtx.range_push({key!r} + '#' + str(step))\n",
                "step_exit": "torch.cuda.nvtx.range_pop()\n",
                "window_close": "torch.cuda.synchronize()\ntorch.cuda.profiler.stop()\n",
                "range_open": "torch.cuda.nvtx.range_push(name)\n",
                "range_close": "torch.cuda.nvtx.range_pop()\n",
                "mark": "torch.cuda.nvtx.mark(name)\n",
            },
            trace_dir=None,
            notes=(f"nsys writes the report: run under `nsys profile {flags}` (see the lines below)",),
        )


def options(s: Mapping[str, Any]) -> Dict[str, str]:
    """The nsys options that record exactly this schedule's windows: one capture range (one report) per window.

    ``stop`` after a single window, ``repeat:N`` for N windows, ``repeat`` for windows until the process exits;
    never the ``*-shutdown`` ends, which would end the training process with the last window.
    """
    end = "stop" if s["repeat"] == 1 else "repeat" if s["repeat"] == 0 else f"repeat:{s['repeat']}"
    return {"trace": "cuda,nvtx", "capture-range": "cudaProfilerApi", "capture-range-end": end}
