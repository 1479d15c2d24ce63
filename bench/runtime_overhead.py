"""What the injected step line costs once its capture window is over.

Usage::

    python bench/runtime_overhead.py [--calls 20000] [--reps 15]

Measured side by side in one process, in interleaved repetitions (medians
reported), each inside a function of a module that has ``_patchkit_runtime``
bound, exactly as in a patched file:

* ``pass``: the empty statement (loop overhead only);
* the injected line ``_patchkit_runtime.step("bench-update")`` after its
  schedule is over;
* the role-choosing form the engine generates for verl's actor/ref methods;
* ``prof.step()`` of a ``torch.profiler.profile`` whose schedule is over
  (what the hand-written seeds pay on every iteration, forever).

Goal: the injected line costs at most 5% of one ``prof.step()`` call.  The
ratio uses the line's gross time (loop overhead included) over prof.step()'s
net time, so it errs on the pessimistic side.  Also reported, measured one
after the other (two profilers cannot run at once): the cost of a step
inside a recording window, patchkit against plain ``prof.step()``.

Exit status 0 when the goal is met, 1 when not.  Needs torch.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import types
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import patchkit.runtime  # noqa: E402

GOAL = 0.05

PATCHED_MODULE = '''
def empty(n):
    for _ in range(n):
        pass


def injected(n):
    for _ in range(n):
        _patchkit_runtime.step("bench-update")  # patchkit:bench-update


def injected_role(n, self):
    for _ in range(n):
        _patchkit_runtime.step("bench-logprob/ref" if self.actor_optimizer is None else "bench-logprob/actor" if self.actor_optimizer is not None else None)  # patchkit:bench-logprob


def plain_prof_step(n, prof):
    for _ in range(n):
        prof.step()
'''


def patched_module():
    mod = types.ModuleType("bench_patched_module")
    mod._patchkit_runtime = patchkit.runtime
    exec(compile(PATCHED_MODULE, "<bench patched module>", "exec"), mod.__dict__)
    return mod


def settings(save_path, **schedule):
    s = dict(backend="torch", level="level0", contents=("cpu",), export_type="text", analysis=False,
             save_path=save_path, ranks="all", wait=0, warmup=0, active=1, repeat=1, skip_first=0, mstx=False)
    s.update(schedule)
    return s


def timed(fn, *args):
    t = time.perf_counter_ns()
    fn(*args)
    return time.perf_counter_ns() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000, help="calls per timed run (default 20000)")
    ap.add_argument("--reps", type=int, default=15, help="interleaved repetitions (default 15)")
    ap.add_argument("--window-calls", type=int, default=2000, help="steps timed inside a window (default 2000)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")

    import torch

    rt = patchkit.runtime
    mod = patched_module()
    tmp = tempfile.mkdtemp(prefix="patchkit-bench-")
    try:
        # --- after the window -------------------------------------------------
        rt.configure("bench-update", **settings(os.path.join(tmp, "update")))
        rt.configure("bench-logprob", **settings(os.path.join(tmp, "logprob")))
        ref = types.SimpleNamespace(actor_optimizer=None)
        for _ in range(2):  # step 0 records, step 1 closes the window: the schedule is over
            rt.step("bench-update")
        for _ in range(2):
            mod.injected_role(1, ref)
        states = {r["key"]: r["state"] for r in rt.report()}
        assert states == {"bench-update": "finished", "bench-logprob/ref": "finished"}, states

        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            schedule=torch.profiler.schedule(wait=0, warmup=0, active=1, repeat=1),
            on_trace_ready=torch.profiler.tensorboard_trace_handler(os.path.join(tmp, "plain")),
        )
        prof.start()
        prof.step()
        prof.step()  # its window is over too; the seeds keep calling this every iteration

        variants = {
            "empty": (mod.empty,),
            "injected": (mod.injected,),
            "injected_role": (mod.injected_role, ref),
            "prof_step": (mod.plain_prof_step, prof),
        }
        n = args.calls
        for fn, *extra in variants.values():  # warm up
            fn(max(n // 10, 1), *extra)
        samples = {k: [] for k in variants}
        names = list(variants)
        for rep in range(args.reps):
            order = names[rep % len(names):] + names[:rep % len(names)]
            for name in order:
                fn, *extra = variants[name]
                samples[name].append(timed(fn, n, *extra) / n)
        prof.stop()
        med = {k: statistics.median(v) for k, v in samples.items()}
        empty = med["empty"]
        prof_net = med["prof_step"] - empty

        # --- inside a window (one profiler at a time, so one after the other) -------
        w = args.window_calls
        plain = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            schedule=torch.profiler.schedule(wait=0, warmup=0, active=w + 2, repeat=1),
            on_trace_ready=lambda p: None,
        )
        plain.start()
        plain.step()
        in_plain = timed(mod.plain_prof_step, w, plain) / w
        plain.stop()
        rt.configure("bench-window", **settings(os.path.join(tmp, "window"), active=w + 2))
        rt.step("bench-window")  # starts it
        rt.step("bench-window")
        t = time.perf_counter_ns()
        for _ in range(w):
            rt.step("bench-window")
        in_patchkit = (time.perf_counter_ns() - t) / w
        rt.reset()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    us = 1e-3
    ratio = med["injected"] / prof_net
    ratio_role = med["injected_role"] / prof_net
    print(f"patchkit runtime overhead (torch {torch.__version__}, Python {sys.version.split()[0]}); "
          f"per call, median of {args.reps} interleaved runs of {n} calls")
    print(f"  empty statement (loop only)              {empty * us:9.4f} us")
    print(f"  injected step, after the window          {med['injected'] * us:9.4f} us"
          f"   (net {(med['injected'] - empty) * us:.4f})")
    print(f"  injected role-choosing step, after       {med['injected_role'] * us:9.4f} us"
          f"   (net {(med['injected_role'] - empty) * us:.4f})")
    print(f"  torch prof.step(), after its window      {med['prof_step'] * us:9.4f} us"
          f"   (net {prof_net * us:.4f})")
    print(f"  ratio injected / prof.step(): {ratio:.2%}; role form: {ratio_role:.2%}; goal <= {GOAL:.0%}: "
          + ("PASS" if max(ratio, ratio_role) <= GOAL else "FAIL"))
    print(f"  inside a recording window ({w} steps, one after the other): patchkit step {in_patchkit * us:.2f} us, "
          f"plain prof.step() {in_plain * us:.2f} us")
    return 0 if max(ratio, ratio_role) <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
