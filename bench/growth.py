"""Growth: apply time against file size, on synthetic files of 1k to 50k lines.

Each file is a module of many small classes plus the verl-shaped target class
somewhere in the middle; `patchkit.apply` (plan, transform, compile, back up,
write) is timed in this process, best of N, as the command line runs it: with
the cyclic garbage collector paused (left on, its full collections walk the
whole of libcst's tree again and again, and that alone grows faster than the
file).  The time is the CPU time of this process, so that other work on a
shared machine does not show up as growth.  Linear growth shows as a
constant time per 1,000 lines; the script prints the spread of that figure.

    python bench/growth.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import tempfile
import time
from pathlib import Path

import patchkit
from patchkit.state.ledger import Ledger

GOAL = 1.5  # the time ratio within 1.5x of the line ratio: linear, with room for a noisy machine

SIZES = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000)
TARGET = '''\
class DataParallelPPOActor:
    def update_policy(self, data):
        for _ in range(self.config.ppo_epochs):
            for batch_idx, mini_batch in enumerate(mini_batches):
                for micro_batch in micro_batches:
                    loss = self.loss(micro_batch)
                    loss.backward()
                grad_norm = self._optimizer_step()
        return {}
'''
FILLER = '''\
class Filler{n}:
    """A class that is not the target."""

    def method(self, x, y=None):
        total = 0
        for i in range(x):
            if i % 2:
                total += i * {n}
            else:
                total -= i
        return {{"total": total, "y": y}}

'''


def synthetic(lines: int) -> str:
    blocks, count, n = [], 0, 0
    per = FILLER.count("\n")
    while count < lines:
        blocks.append(FILLER.format(n=n))
        count += per
        n += 1
    blocks.insert(len(blocks) // 2, TARGET + "\n")
    return '"""Synthetic module."""\nimport os\n\n' + "".join(blocks)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="patchkit-growth-"))
    settings = patchkit.load("verl-fsdp-update")
    rows = []
    for size in SIZES:
        root = work / f"r{size}"
        source = synthetic(size)
        best = float("inf")
        for i in range(args.rounds):
            shutil.rmtree(root, ignore_errors=True)
            target = root / "verl" / "workers" / "actor" / "dp_actor.py"
            target.parent.mkdir(parents=True)
            (root / "verl" / "__init__.py").write_text("")
            target.write_text(source)
            meta = root / "verl-0.6.1.dist-info"
            meta.mkdir()
            (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: verl\nVersion: 0.6.1\n")
            ledger = Ledger(work / f"state{size}-{i}")
            gc.collect()
            gc.disable()
            start = time.process_time()
            patchkit.apply(settings, str(root), ledger=ledger)
            best = min(best, time.process_time() - start)
            gc.enable()
        lines = source.count("\n")
        rows.append((lines, best))
    print(f"growth: patchkit.apply on synthetic files (CPU time, garbage collector paused as in the commands; "
          f"best of {args.rounds})")
    per_k = []
    for lines, best in rows:
        per_k.append(best / lines * 1000)
        print(f"  {lines:7d} lines  {best * 1e3:8.1f} ms  {per_k[-1] * 1e3:6.2f} ms per 1k lines")
    spread = max(per_k[2:]) / min(per_k[2:])
    growth = (rows[-1][1] / rows[2][1]) / (rows[-1][0] / rows[2][0])  # 1.0 when linear, 10 when quadratic
    print(f"  per-line cost from 5k lines up varies by {spread:.2f}x (1.00 = perfectly linear); "
          f"50k/5k time ratio {rows[-1][1] / rows[2][1]:.1f} for {rows[-1][0] / rows[2][0]:.1f}x the lines")
    print(f"  time ratio / line ratio {growth:.2f} (1.00 = linear, 10 = quadratic); goal <= {GOAL}: "
          f"{'PASS' if growth <= GOAL else 'FAIL'}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
