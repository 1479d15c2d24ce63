"""Attach: how soon a running job records after `patchkit attach`, and what it costs the job once detached.

Two CPU training jobs with no patchkit in them run side by side (tests/attach_job.py on pkjob, written into a
temporary folder); `patchkit attach --steps 3` gets into one of them, round after round.

- From the start of the `patchkit attach` command to the start of the first recorded step (the job's own clock,
  the step read from the trace's labels).  Goal: within one step plus one second (median of the rounds).
- The job's step time (its main thread's CPU time per step) after the detach against before the attach, beside
  the same ratio of a job never attached, over the same stretches of time.  Goal: no difference beyond noise
  (within 5%).

    python bench/attach.py [--rounds 3] [--step 0.2] [--quick]

Needs gdb and the right to trace a child (it says so and gives no verdict otherwise).
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import attach_helpers as helpers  # noqa: E402

NOISE = 0.05


def step_time(job, since, until):
    """The median CPU time of the job's main thread per step, over the steps run between two moments (on a shared
    machine the wall clock mostly measures the neighbours; see _timing.py)."""
    times = [s["cpu"] for s in job.steps() if since <= s["start"] and s["end"] <= until]
    return statistics.median(times) if times else float("nan"), len(times)


def one_round(tmp, site, job, recipe, env):
    t0 = time.time()
    done = subprocess.run([sys.executable, "-m", "patchkit", "attach", str(job.pid), str(recipe), "--root", str(site),
                           "--steps", "3", "--json"], capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"patchkit attach failed:\n{done.stderr[-3000:]}")
    import json

    (status,) = json.loads(done.stdout)
    (trace,) = status["captures"][0]["traces"]
    first = helpers.recorded_labels(trace)[0][1][0]
    start = {s["step"]: s["start"] for s in job.steps()}[first]
    return start - t0, status["attached_at"] - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--step", type=float, default=0.2, help="the job's step, seconds (its pause; compute adds a little)")
    ap.add_argument("--quick", action="store_true", help="one round, short stretches (the test suite's run)")
    args = ap.parse_args(argv)
    why = helpers.gdb_missing() or helpers.ptrace_denied()
    if why:
        print(f"attach benchmark: goal not measured here: {why}")
        return 0
    rounds, stretch = (1, 3.0) if args.quick else (args.rounds, 15.0)
    tmp = Path(tempfile.mkdtemp(prefix="patchkit-bench-attach-"))
    atexit.register(shutil.rmtree, tmp, True)  # its jobs, traces and state folder go with it
    env = dict(os.environ, PYTHONPATH=str(REPO), PATCHKIT_HOME=str(tmp / "home"))
    site = helpers.site(tmp)
    recipe = helpers.recipe(tmp, "logged")
    job = helpers.Job(tmp, site, steps=10 ** 6, pause=args.step, name="attached")
    jobs = [job]
    try:
        job.wait_steps(5)
        first, attached = [], []
        for _ in range(rounds):
            time.sleep(args.step * 3)
            a, b = one_round(tmp, site, job, recipe, env)
            first.append(a)
            attached.append(b)
        step = statistics.median(s["end"] - s["start"] for s in job.steps()[-50:])
        took, goal = statistics.median(first), step + 1.0
        print(f"attach -> first recorded step: {took:.2f} s (median of {rounds}; in the job {statistics.median(attached):.2f} s "
              f"after the command started); one step = {step:.2f} s; goal <= one step + 1 s = {goal:.2f} s: "
              f"ratio {took / goal:.2f} {'PASS' if took <= goal else 'FAIL'}")
        job.finish(timeout=60)  # the jobs below keep the machine busy: the first one is timed on a quiet one
        # the step time, compute only (no pause), of a job side by side with one never attached: before, after
        busy = helpers.Job(tmp, site, steps=10 ** 6, pause=0.0, name="busy")
        beside = helpers.Job(tmp, site, steps=10 ** 6, pause=0.0, name="beside")
        jobs += [busy, beside]
        busy.wait_steps(5)
        beside.wait_steps(5)
        t1 = time.time()
        time.sleep(stretch)
        t2 = time.time()
        one_round(tmp, site, busy, recipe, env)
        t3 = time.time()
        time.sleep(stretch)
        t4 = time.time()
        (before, n1), (after, n2) = step_time(busy, t1, t2), step_time(busy, t3, t4)
        (ref_before, _), (ref_after, _) = step_time(beside, t1, t2), step_time(beside, t3, t4)
        mine, theirs = after / before, ref_after / ref_before
        ratio = mine / theirs
        print(f"step time after detach / before attach ({n1} and {n2} steps, {before * 1e3:.2f} and {after * 1e3:.2f} ms): "
              f"attached job {mine:.3f}x, the job never attached beside it {theirs:.3f}x; ratio {ratio:.3f}; "
              f"goal within noise ({1 - NOISE:.2f}-{1 + NOISE:.2f}): {'PASS' if abs(ratio - 1) <= NOISE else 'FAIL'}")
        ok = took <= goal and abs(ratio - 1) <= NOISE
    finally:
        for j in jobs:
            j.finish(timeout=60)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
