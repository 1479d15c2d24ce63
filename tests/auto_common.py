"""What the jobs of tests/autojobs.py share: their command line, their journal and their stop file.

Each job (tests/auto_*_job.py) is started without patchkit and imports this module from its own folder (Python puts
a script's folder first on sys.path, so ``python tests/auto_nested_job.py ...`` works from any folder).  A job writes
one JSON line per optimizer step (per forward for the engine) to ``--journal``, flushed at once: ``{"step": i,
"loss": float}`` (the engine: ``"out"``) with ``t``, the wall clock when the line was written, and ``cpu``, the main
thread's CPU time then (``flops`` too, the step's floating-point operations, with ``--count-flops``); it stops after
``--steps`` or when the ``--stop`` file appears, and ends with ``{"final": true, "steps": n, "losses": [...]}`` (the
engine: ``"outs"`` too).  Runs are deterministic: seeded, one thread.  With ``--profile DIR`` the job records a few
steps itself, one ``ProfilerStep#N`` span each, as ``patchkit attach --auto`` should.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
import warnings


def parse(doc: str, steps: int = 1000, **extra):
    """The job's arguments: ``--steps``, ``--journal``, ``--stop``, ``--seed``, and ``extra`` (name -> default,
    typed by the default)."""
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--steps", type=int, default=steps, help="optimizer steps (forwards) to run at most")
    ap.add_argument("--journal", required=True, help="one JSON line per step is appended here")
    ap.add_argument("--stop", required=True, help="the job stops after the step during which this file appears")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count-flops", action="store_true",
                    help="count each step's floating-point operations (torch's FlopCounterMode), in its line")
    ap.add_argument("--profile", metavar="DIR", default="",
                    help="record steps 2 to 4 with the torch profiler, one ProfilerStep#N span each, a trace in DIR")
    for name, default in extra.items():
        ap.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    return ap.parse_args()


def deterministic(seed: int) -> None:
    """Seeded, one thread: two runs compute the same numbers bit for bit."""
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)


def quiet() -> None:
    """Before a framework is imported: its warnings, progress bars and info lines say nothing on stderr (a job's
    stderr under patchkit must hold patchkit's own lines only; a plain run's is empty)."""
    os.environ.update(TRANSFORMERS_VERBOSITY="error", TRANSFORMERS_NO_ADVISORY_WARNINGS="1", HF_HUB_OFFLINE="1",
                      HF_HUB_DISABLE_PROGRESS_BARS="1", TOKENIZERS_PARALLELISM="false", HF_DATASETS_OFFLINE="1")
    warnings.filterwarnings("ignore")


def quiet_loggers() -> None:
    """After a framework is imported (Lightning sets its loggers to INFO when imported): they log errors only."""
    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning", "lightning_fabric",
                 "transformers", "accelerate"):
        logging.getLogger(name).setLevel(logging.ERROR)


class Journal:
    """The job's journal and its stop file; around its loop (:meth:`running`), what ``--count-flops`` and
    ``--profile`` ask for."""

    def __init__(self, args, value: str = "loss"):
        self.path, self.stop_file, self.limit, self.value = args.journal, args.stop, args.steps, value
        self.values = []
        self.handle = open(self.path, "a")
        self.counter, self.counted, self.profiler = None, 0, None

    def running(self, args):
        """Around the job's loop.  ``--count-flops``: each step's line says how many floating-point operations it
        took (torch's FlopCounterMode; the same numbers are computed).  ``--profile DIR``: the torch profiler
        records steps 2 to 4 (one ``ProfilerStep#N`` span from each line to the next) into a trace in DIR."""
        import contextlib

        stack = contextlib.ExitStack()
        if args.count_flops:
            from torch.utils.flop_counter import FlopCounterMode

            self.counter = stack.enter_context(FlopCounterMode(display=False))
        if args.profile:
            import torch

            self.profiler = stack.enter_context(torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU],
                schedule=torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1),
                on_trace_ready=torch.profiler.tensorboard_trace_handler(args.profile)))
        return stack

    def step(self, value: float, **more) -> bool:
        """Log the next step's value; whether the job goes on (False: ``--steps`` done, or the stop file is there)."""
        value = float(value)
        if self.counter is not None:
            total = self.counter.get_total_flops()
            more, self.counted = {"flops": total - self.counted, **more}, total
        line = {"step": len(self.values), self.value: value, "t": time.time(), "cpu": time.thread_time(), **more}
        self.values.append(value)
        self.handle.write(json.dumps(line) + "\n")
        self.handle.flush()
        if self.profiler is not None:
            self.profiler.step()
        return not self.done()

    def done(self) -> bool:
        return len(self.values) >= self.limit or os.path.exists(self.stop_file)

    def close(self, **more) -> None:
        final = {"final": True, "steps": len(self.values), "losses": self.values, **more}
        if self.value != "loss":
            final[self.value + "s"] = self.values
        self.handle.write(json.dumps(final) + "\n")
        self.handle.close()
