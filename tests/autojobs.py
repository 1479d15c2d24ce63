"""The jobs ``patchkit attach PID --auto`` is tested on, started and read: a trainer of nested loops, transformers'
Trainer, Lightning, and an inference engine (tests/auto_*_job.py; what they share: tests/auto_common.py), and what
their traces recorded in each step.

:func:`start` starts one without patchkit, as a :class:`attach_helpers.Running` (its journal lines, its steps, a
wait for them, a kill) that also finishes (:meth:`AutoJob.finish`: its last line and its stderr).  The jobs of
:data:`FRAMEWORKS` run with tests/frameworksenv.py's packages first on PYTHONPATH: where those cannot be installed,
:func:`start` raises its error, which the suite's conftest turns into a skip that says why.

:func:`labels_per_span` reads a torch trace (a Chrome-trace ``*.pt.trace.json``): for each ``ProfilerStep#N`` span,
how many of the jobs' own labels (``job-forward``, ``job-backward``, ``job-optimizer``) and of torch's
``Optimizer.step#...`` events (the only mark of an optimizer step in the frameworks' loops) fall inside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import attach_helpers
import frameworksenv
import realverl

TESTS = Path(__file__).resolve().parent
SCRIPTS = {kind: TESTS / f"auto_{kind}_job.py" for kind in ("nested", "hf", "lightning", "engine")}
FRAMEWORKS = ("hf", "lightning")  # the jobs that need tests/frameworksenv.py's packages
OPTIMIZER = "Optimizer.step"  # the key under which labels_per_span counts realverl.OPTIMIZER's events


class AutoJob(attach_helpers.Running):
    """One of :data:`SCRIPTS` running: ``log`` (its journal), ``stop`` (its stop file), ``proc``, ``pid``, ``kind``."""

    finish = attach_helpers.Job.finish  # (the last line: final, steps, losses), stderr; stops the job first

    def __init__(self, kind: str, tmp: Path, steps: int = 1000, env: Optional[Dict[str, str]] = None,
                 python: Optional[str] = None, args: Sequence[str] = (), name: str = ""):
        self.kind = kind
        name = name or f"auto-{kind}"
        self.log, self.stop = tmp / f"{name}.log", tmp / f"{name}.stop"
        for p in (self.log, self.stop):
            if p.exists():
                p.unlink()
        environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PATCHKIT_RUN", "RANK", "WORLD_SIZE")}
        if kind in FRAMEWORKS:
            environ["PYTHONPATH"] = str(frameworksenv.site_packages())
        environ.update(OMP_NUM_THREADS="1", PYTHONHASHSEED="0", **(env or {}))
        command = [python or sys.executable, str(SCRIPTS[kind]), "--steps", str(steps), "--journal", str(self.log),
                   "--stop", str(self.stop), *args]
        self.proc = subprocess.Popen(command, cwd=tmp, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.pid = self.proc.pid

    def step_seconds(self) -> List[float]:
        """The wall time between consecutive journal lines: each step's time, but the first's."""
        times = [line["t"] for line in self.steps()]
        return [b - a for a, b in zip(times, times[1:])]


def start(kind: str, tmp: Path, steps: int = 1000, env: Optional[Dict[str, str]] = None,
          python: Optional[str] = None, args: Sequence[str] = (), name: str = "") -> AutoJob:
    """The job ``kind`` (a key of :data:`SCRIPTS`) started in ``tmp`` without patchkit, to run ``steps`` steps at
    most; ``env`` added to its environment, ``python`` instead of this interpreter, ``args`` after its own."""
    return AutoJob(kind, tmp, steps=steps, env=env, python=python, args=args, name=name)


def spans(events: List[dict]) -> List[dict]:
    """The ``ProfilerStep#N`` spans of a trace's events, in order."""
    return sorted((e for e in events if str(e.get("name", "")).startswith("ProfilerStep#") and "dur" in e),
                  key=lambda e: e["ts"])


def labels_per_span(trace, prefix: str = "job-") -> List[Tuple[int, Dict[str, int]]]:
    """``(N, counts)`` for each ``ProfilerStep#N`` span of the trace file ``trace``, in order: how many events named
    ``prefix...`` of each name lie inside it, and under :data:`OPTIMIZER` how many of torch's ``Optimizer.step#``
    events; names with none are left out."""
    with open(trace) as handle:
        events = [e for e in json.load(handle)["traceEvents"] if "dur" in e and isinstance(e.get("name"), str)]
    found = spans(events)
    counted = [Counter() for _ in found]
    for e in events:
        key = e["name"] if e["name"].startswith(prefix) else OPTIMIZER if e["name"].startswith(realverl.OPTIMIZER) \
            else None
        for span, counts in zip(found, counted):
            if key and span["ts"] <= e["ts"] and e["ts"] + e["dur"] <= span["ts"] + span["dur"]:
                counts[key] += 1
    return [(int(span["name"].split("#")[1]), dict(counts)) for span, counts in zip(found, counted)]
