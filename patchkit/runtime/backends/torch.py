"""torch backend: ``torch.profiler.profile`` on CPU, plus CUDA when there is one.

contents: ``cpu`` is always recorded (the step markers live there); ``npu``
(device data) adds CUDA when ``torch.cuda.is_available()``; ``memory``,
``shapes``, ``stack``, ``module`` map to ``profile_memory``,
``record_shapes``, ``with_stack``, ``with_modules``.  Traces are Chrome
trace JSON files named as ``tensorboard_trace_handler(save_path)`` names them,
``<host>_<pid>[_<role>].<ns>.pt.trace.json``, written by ``export_chrome_trace``
under a temporary name and renamed only once they are whole: torch does not
report a write that failed (a full disk, a quota, a file size limit), and a
trace cut short must never look like a capture.  Whole is judged by the JSON's
structure (``json_cut``, which the runtime hands the code: it is
:func:`patchkit.core.wholejson.cut_at`, as ``patchkit traces`` judges),
never by a list of keys: torch adds ``"ERROR"`` when CUPTI reports a problem,
and may add others.  A trace that could not be
written is noted in ``failed_traces`` (which the runtime reads), and the
temporary files are removed.

``schedule.warmup`` 0 is patchkit's default: a window records the steps a
recipe names from the first one, as the users' hand-written schedules do.
``torch.profiler.schedule`` warns at every schedule without warmup ("Profiler
won't be using warmup, this can skew profiler results": the first recorded
step may carry the profiler's start-up), so with warmup 0 the code creates the
schedule with exactly that warning ignored, there and nowhere else, and a
job's stderr holds no warning caused by a default; set ``schedule.warmup=1``
for a warmed-up first step.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

from patchkit.core.vocabulary import NPU_ONLY, PERIODIC
from patchkit.runtime.backend import Backend, Plan
from patchkit.runtime.program import call
from patchkit.runtime.roles import role_of, worker_name
from patchkit.runtime.schedule import steps_function


class Torch(Backend):
    PROFILER = "torch.profiler"
    UNUSED = ("level", "export_type", "analysis", "mstx") + NPU_ONLY
    PID_IN_TRACE_NAMES = True
    LIBRARY = "torch"  # CUDA is added only where there is one

    def probe(self) -> Dict[str, Any]:
        import torch  # noqa: F401  (the real torch; absolute import)
        import torch.profiler

        return {"version": torch.__version__}

    def plan(self, settings: Mapping[str, Any], features: Mapping[str, Any], key: str) -> Plan:
        s = settings
        contents = s["contents"]
        quiet = not s["steps"] and not s["warmup"]  # torch's warning about warmup 0 ignored (see the docstring)
        create = ["import os", "import socket", "import time", *(["import warnings"] if quiet else []),
                  "", "import torch", "", "activities = [torch.profiler.ProfilerActivity.CPU]"]
        if "npu" in contents:
            create += ["if torch.cuda.is_available():", "    activities.append(torch.profiler.ProfilerActivity.CUDA)"]
        create += ["", *_handler(s["save_path"], role_of(key)), *_schedule(s)]
        create += call("prof = torch.profiler.profile", [
            "activities=activities",
            "schedule=schedule",
            "on_trace_ready=on_trace_ready",
            f"record_shapes={'shapes' in contents!r}",
            f"profile_memory={'memory' in contents!r}",
            f"with_stack={'stack' in contents!r}",
            f"with_modules={'module' in contents!r}",
            *(["with_flops=True"] if "flops" in contents else []),
        ])
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
        )


def _schedule(s: Mapping[str, Any]) -> List[str]:
    """``schedule``: torch.profiler's, or a function of exactly ``schedule.steps``."""
    if s["steps"]:
        return steps_function("torch.profiler.ProfilerAction", s["steps"])
    made = "schedule = torch.profiler.schedule(" + ", ".join(f"{k}={int(s[k])!r}" for k in PERIODIC) + ")"
    if s["warmup"]:
        return [made]
    return ["with warnings.catch_warnings():  # warmup 0 is asked for: torch's warning about it is not for the job",
            f"    warnings.filterwarnings('ignore', {WARMUP_WARNING!r}, UserWarning)",
            f"    {made}"]


WARMUP_WARNING = "Profiler won't be using warmup"  # how torch's warning about warmup 0 begins

def _handler(save_path: str, role: str) -> List[str]:
    """``on_trace_ready``: tensorboard_trace_handler's file, given its name only once it is written whole."""
    worker = worker_name(role)
    return [
        "failed_traces = []  # (trace, why) of each trace not written whole; nothing is left under its name",
        "",
        "",
        "def on_trace_ready(prof):",
        "    # tensorboard_trace_handler's file name, given to the trace only once it is written whole",
        f"    name = {worker} + '.' + str(time.time_ns()) + '.pt.trace.json'",
        f"    trace = os.path.join({save_path!r}, name)",
        "    part = trace + '.part'  # torch writes part + '.tmp', renamed to part unless it saw an error",
        "    try:",
        f"        os.makedirs({save_path!r}, exist_ok=True)",
        "        prof.export_chrome_trace(part)",
        "        if not os.path.exists(part):  # torch saw its stream fail: it never renamed its file",
        "            raise OSError('torch did not finish it: its temporary file ' + (json_cut(part + '.tmp', True) or "
        "'is whole but was not renamed'))",
        "        found = json_cut(part, True)  # its JSON's structure, whatever keys torch wrote",
        "        if found:",
        "            raise OSError('torch wrote only part of it: it ' + found)",
        "        with open(part, 'rb') as f:",
        "            os.fsync(f.fileno())",
        "        os.rename(part, trace)",
        "    except Exception as exc:",
        "        failed_traces.append((trace, type(exc).__name__ + ': ' + str(exc)))",
        "    finally:",
        "        for left in (part, part + '.tmp'):",
        "            if os.path.lexists(left):",
        "                os.unlink(left)",
        "",
        "",
    ]
