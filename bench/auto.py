"""attach --auto: what watching costs a job, and how soon after the command its first step is recorded.

Two copies of the project's own trainer of nested loops (tests/auto_nested_job.py: epochs, mini-batches,
gradient accumulation), started as plain `python` processes, side by side:

- the cost while watched: the watcher of one copy is kept watching for --watch seconds (it would stop as soon as
  the step repeats, after about 2 s: kept on here, through the API, to measure), round after round, the rounds
  interleaved with as long unwatched.  For each copy, its median step time while watched over
  its median step time in the stretches beside, the wall clock (what the user waits for) and its main thread's
  CPU time (its compute); the watched copy's ratio over the unwatched copy's, over the same stretches (the
  machine is shared: a busy neighbour stretches both).  Goal: under 2% (ratio <= 1.02), and no difference after
  the watching (within 2% too);
- the command to the first recorded step: `patchkit attach PID --auto --steps 3`, from its start to the start of
  the first ProfilerStep span of its trace (the trace's own wall clock).  Goal: the watching time it reports,
  plus one step, plus one second.

    python bench/auto.py [--rounds 3] [--watch 10] [--quick]

Needs gdb and the right to trace a child (it says so and gives no verdict otherwise).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

import attach_helpers as helpers  # noqa: E402
import autojobs  # noqa: E402

GOAL = 1.02


def per_step(job, since, until, key):
    """The job's median time per step, by ``key`` ("t": wall clock, "cpu": its main thread's), over the steps
    that ended between two moments."""
    lines = job.steps()
    pairs = [(b[key] - a[key]) for a, b in zip(lines, lines[1:]) if since <= a["t"] and b["t"] <= until]
    return statistics.median(pairs) if pairs else float("nan"), len(pairs)


def watched_for(pid: int, seconds: float) -> tuple:
    """Watch ``pid`` for ``seconds`` (not stopping when the step repeats): (start, end, the watcher's share)."""
    from patchkit.attach import auto

    s = auto.Watching([pid], seconds)
    s.prepare()
    s.spec["watch"]["repeats"] = 10 ** 9  # measured, not stopped early
    start = time.time()
    if not auto.watch(s):
        raise SystemExit("interrupted")
    w = s.watches[pid]
    return start, time.time(), w.cost, w.samples


def first_recorded(tmp: Path, job, env, n: int) -> tuple:
    """(seconds from the command to the first recorded span, the watching time it said, one step, the whole
    command's seconds)."""
    t0 = time.time()
    done = subprocess.run([sys.executable, "-m", "patchkit", "attach", str(job.pid), "--auto", "--steps", "3",
                           "--json", "--save", str(tmp / f"auto-round-{n}.yaml")], capture_output=True, text=True,
                          env=env, cwd=tmp, timeout=600)
    took = time.time() - t0
    if done.returncode != 0:
        raise SystemExit(f"patchkit attach --auto failed:\n{done.stderr[-3000:]}")
    watched = float(re.search(r"watched ([\d.]+) s", done.stderr).group(1))
    (status,) = json.loads(done.stdout)
    (trace,) = status["captures"][0]["traces"]
    with open(trace) as handle:
        data = json.load(handle)
    first = min(e["ts"] for e in data["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#"))
    start = data["baseTimeNanoseconds"] / 1e9 + first / 1e6
    lines = job.steps()
    step = statistics.median(b["t"] - a["t"] for a, b in zip(lines, lines[1:]) if b["t"] < t0)
    return start - t0, watched, step, took


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--watch", type=float, default=10.0, help="seconds each copy is watched a round")
    ap.add_argument("--quick", action="store_true", help="one short round (the test suite's run)")
    args = ap.parse_args(argv)
    why = helpers.gdb_missing() or helpers.ptrace_denied()
    if why:
        print(f"attach --auto benchmark: goal not measured here: {why}")
        return 0
    rounds, stretch = (1, 3.0) if args.quick else (args.rounds, args.watch)
    tmp = Path(tempfile.mkdtemp(prefix="patchkit-bench-auto-"))
    atexit.register(shutil.rmtree, tmp, True)
    env = dict(os.environ, PYTHONPATH=str(REPO), PATCHKIT_HOME=str(tmp / "home"))
    os.environ["PATCHKIT_HOME"] = env["PATCHKIT_HOME"]
    watched = autojobs.start("nested", tmp, steps=10 ** 6, name="watched")
    beside = autojobs.start("nested", tmp, steps=10 ** 6, name="beside")
    try:
        for job in (watched, beside):
            job.wait_steps(5, timeout=300)
        load = os.getloadavg()
        calm, busy, shares = [], [], []
        for _ in range(rounds):
            t1 = time.time()
            time.sleep(stretch)
            t2, t3, share, looks = watched_for(watched.pid, stretch)
            calm.append((t1, t2))
            busy.append((t2, t3))
            shares.append((share, looks))
        time.sleep(stretch)
        after = (busy[-1][1], time.time())
        print(f"watched {rounds} x {stretch:g} s, beside as long unwatched (load average {load[0]:.2f}, "
              f"{os.cpu_count()} CPUs); the watcher took {statistics.median(s for s, _ in shares):.2%} of the job's "
              f"time in {statistics.median(n for _, n in shares):.0f} looks a round:")
        ok = True
        for key, what in (("t", "wall clock"), ("cpu", "main thread's CPU")):
            def ratio(stretches, job):
                return statistics.median(per_step(job, a, b, key)[0] for a, b in stretches)
            mine = ratio(busy, watched) / ratio(calm, watched)
            theirs = ratio(busy, beside) / ratio(calm, beside)
            later = (per_step(watched, *after, key)[0] / ratio(calm, watched)) / \
                (per_step(beside, *after, key)[0] / ratio(calm, beside))
            cost = mine / theirs
            ok = ok and cost <= GOAL and later <= GOAL
            print(f"  step time ({what}): watched / unwatched stretches {mine:.3f}x, the copy beside {theirs:.3f}x; "
                  f"ratio {cost:.3f}  goal <= {GOAL}  {'PASS' if cost <= GOAL else 'FAIL'}; after the watch "
                  f"{later:.3f}  {'PASS' if later <= GOAL else 'FAIL'}")
        figures = [first_recorded(tmp, watched, env, n) for n in range(rounds)]
        first, said, step, took = (statistics.median(f[i] for f in figures) for i in range(4))
        goal = said + step + 1.0
        ok = ok and first <= goal
        print(f"  attach --auto -> first recorded step (median of {rounds}): {first:5.2f} s  goal <= {goal:5.2f} s "
              f"(watching {said:.2f} s + one step {step:.2f} s + 1 s)  ratio {first / goal:4.2f} "
              f"{'PASS' if first <= goal else 'FAIL'}; the whole command {took:.2f} s")
    finally:
        for job in (watched, beside):
            job.finish(timeout=60)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
