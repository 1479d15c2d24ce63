"""torch backend: ``torch.profiler.profile`` on CPU, plus CUDA when there is one.

contents: ``cpu`` is always recorded (the step markers live there); ``npu``
(device data) adds CUDA when ``torch.cuda.is_available()``; ``memory``,
``shapes``, ``stack``, ``module`` map to ``profile_memory``,
``record_shapes``, ``with_stack``, ``with_modules``.  Traces are Chrome
trace JSON files written by ``tensorboard_trace_handler(save_path)``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

from ..vocabulary import DEFAULTS, NPU_ONLY, PERIODIC
from .program import call
from .registry import Plan, role_of
from .schedule import steps_function

STATIC_FEATURES: Dict[str, Any] = {"version": None}

UNUSED = ("level", "export_type", "analysis", "mstx") + NPU_ONLY


def probe() -> Dict[str, Any]:
    import torch  # noqa: F401  (the real torch; absolute import)
    import torch.profiler

    return {"version": torch.__version__}


def plan(s: Mapping[str, Any], features: Mapping[str, Any], key: str) -> Plan:
    contents = s["contents"]
    role = role_of(key)
    create: List[str] = []
    if role:
        create += ["import os", "import socket"]
    create += ["import torch", "", "activities = [torch.profiler.ProfilerActivity.CPU]"]
    if "npu" in contents:
        create += ["if torch.cuda.is_available():", "    activities.append(torch.profiler.ProfilerActivity.CUDA)"]
    handler = [repr(s["save_path"])]
    if role:  # actor, ref, ... share a folder: the role goes into the file name
        handler.append(f"worker_name=socket.gethostname() + '_' + str(os.getpid()) + {('_' + role)!r}")
    if s["steps"]:  # exactly these steps: a schedule function
        create += ["", *steps_function("torch.profiler.ProfilerAction", s["steps"])]
        schedule = "schedule"
    else:
        schedule = "torch.profiler.schedule(" + ", ".join(f"{k}={int(s[k])!r}" for k in PERIODIC) + ")"
    create += call("prof = torch.profiler.profile", [
        "activities=activities",
        f"schedule={schedule}",
        f"on_trace_ready=torch.profiler.tensorboard_trace_handler({', '.join(handler)})",
        f"record_shapes={'shapes' in contents!r}",
        f"profile_memory={'memory' in contents!r}",
        f"with_stack={'stack' in contents!r}",
        f"with_modules={'module' in contents!r}",
        *(["with_flops=True"] if "flops" in contents else []),
    ])
    notes = []
    unused = [f"profiler.{k}={s[k]!r}" for k in UNUSED if s[k] != DEFAULTS[k]]
    if unused:
        notes.append("torch.profiler has no equivalent of " + ", ".join(unused) + "; not used")
    return Plan(
        sections={
            "create": "\n".join(create) + "\n",
            "begin": "prof.start()\n",
            "advance": "prof.step()\n",
            "end": "prof.stop()\n",
            "range_open": "handle = torch.autograd.profiler.record_function(name)\nhandle.__enter__()\n",
            "range_close": "handle.__exit__(None, None, None)\n",
            "mark": "with torch.autograd.profiler.record_function(name):\n    pass\n",
        },
        trace_dir=s["save_path"],
        notes=tuple(notes),
    )

