"""What the jobs of tests/autojobs.py share: their command line, their journal and their stop file.

Each job (tests/auto_*_job.py) is started without patchkit and imports this module from its own folder (Python puts
a script's folder first on sys.path, so ``python tests/auto_nested_job.py ...`` works from any folder).  A job writes
one JSON line per optimizer step (per forward for the engine) to ``--journal``, flushed at once: ``{"step": i,
"loss": float}`` (the engine: ``"out"``) with ``t``, the wall clock when the line was written, and ``cpu``, the main
thread's CPU time then; it stops after ``--steps`` or when the ``--stop`` file appears, and ends with ``{"final":
true, "steps": n, "losses": [...]}`` (the engine: ``"outs"`` too).  Runs are deterministic: seeded, one thread.
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
    """The job's journal and its stop file."""

    def __init__(self, args, value: str = "loss"):
        self.path, self.stop_file, self.limit, self.value = args.journal, args.stop, args.steps, value
        self.values = []
        self.handle = open(self.path, "a")

    def step(self, value: float, **more) -> bool:
        """Log the next step's value; whether the job goes on (False: ``--steps`` done, or the stop file is there)."""
        value = float(value)
        line = {"step": len(self.values), self.value: value, "t": time.time(), "cpu": time.thread_time(), **more}
        self.values.append(value)
        self.handle.write(json.dumps(line) + "\n")
        self.handle.flush()
        return not self.done()

    def done(self) -> bool:
        return len(self.values) >= self.limit or os.path.exists(self.stop_file)

    def close(self, **more) -> None:
        final = {"final": True, "steps": len(self.values), "losses": self.values, **more}
        if self.value != "loss":
            final[self.value + "s"] = self.values
        self.handle.write(json.dumps(final) + "\n")
        self.handle.close()
