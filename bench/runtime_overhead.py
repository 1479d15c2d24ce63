"""What the injected step line costs, after its capture window and inside it.

Usage::

    python bench/runtime_overhead.py [--calls 20000] [--reps 15] [--window-calls 200]

Measured side by side in one process, in interleaved repetitions (medians
reported; the machine may be shared and noisy), each inside a function of a
module that has ``_patchkit_runtime`` bound, exactly as in a patched file.

After the window:

* ``pass``: the empty statement (loop overhead only);
* the injected line ``_patchkit_runtime.step("bench-update")`` after its
  schedule is over;
* the role-choosing form the engine generates for verl's actor/ref methods
  (the key a lambda the runtime calls), and a guarded step (the guard a lambda
  the runtime no longer calls once the key is finished);
* the injected line of a ``schedule.trigger=manual`` recipe while it waits for
  ``patchkit capture`` (its watcher thread polling the request folder);
* ``prof.step()`` of a ``torch.profiler.profile`` whose schedule is over
  (what the hand-written seeds pay on every iteration, forever).

Goal: the injected line costs at most 5% of one ``prof.step()`` call.  The
ratio uses the line's gross time (loop overhead included) over prof.step()'s
net time, so it errs on the pessimistic side.

Inside a recording window (two profilers cannot run at once): one capture
of the torch backend (its code unchanged but for one line that hands the bench
the profiler it makes), stepped in alternating blocks of ``--window-calls``
steps by the injected line and by a bare ``prof.step()`` of that same profiler,
so both record into the same profiler with the same events behind them.
Goal: the median of the ratios of adjacent blocks is at most 1.15.

Exit status 0 when both goals are met, 1 when not.  Needs torch.
"""

from __future__ import annotations

import argparse
import contextlib
import io
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

GOAL = 0.05  # after the window: the injected line over one prof.step()
WINDOW_GOAL = 1.15  # inside a window: the injected line over a bare prof.step()

PATCHED_MODULE = '''
def empty(n):
    for _ in range(n):
        pass


def injected(n):
    for _ in range(n):
        _patchkit_runtime.step("bench-update")  # patchkit:bench-update


def injected_role(n, self):
    for _ in range(n):
        _patchkit_runtime.step(lambda: "bench-logprob/actor" if (self.actor_optimizer is not None) else "bench-logprob/ref" if (self.actor_optimizer is None) else None)  # patchkit:bench-logprob


def injected_guarded(n, self):
    for _ in range(n):
        _patchkit_runtime.step("bench-update", lambda: self.actor_optimizer is None)  # patchkit:bench-update


def injected_manual(n):
    for _ in range(n):
        _patchkit_runtime.step("bench-manual")  # patchkit:bench-manual


def plain_prof_step(n, prof):
    for _ in range(n):
        prof.step()


def injected_key(n, key):
    for _ in range(n):
        _patchkit_runtime.step(key)  # patchkit:bench-window
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
    ap.add_argument("--window-calls", type=int, default=200,
                    help="steps per timed block inside the window (default 200)")
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
        os.environ["PATCHKIT_HOME"] = os.path.join(tmp, "home")  # the manual key registers there
        rt.configure("bench-manual", **settings(os.path.join(tmp, "manual"), trigger="manual"))
        with contextlib.redirect_stderr(io.StringIO()):
            mod.injected_manual(1)  # registered, parked, the watcher thread started

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
            "injected_guarded": (mod.injected_guarded, ref),
            "injected_manual": (mod.injected_manual,),
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

        # --- inside one window: blocks of injected steps and of bare prof.step() calls, alternating --
        with contextlib.redirect_stderr(io.StringIO()):  # the [patchkit] window lines
            blocks = window_blocks(rt, mod, args.window_calls, args.reps * 2, os.path.join(tmp, "window"))
        rt.reset()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    us = 1e-3
    ratio = med["injected"] / prof_net
    ratio_role = med["injected_role"] / prof_net
    ratio_guarded = med["injected_guarded"] / prof_net
    ratio_manual = med["injected_manual"] / prof_net
    in_plain = statistics.median(blocks["plain"])
    in_patchkit = statistics.median(blocks["patchkit"])
    in_ratio = statistics.median(p / q for p, q in zip(blocks["patchkit"], blocks["plain"]))
    after_ok = max(ratio, ratio_role, ratio_guarded, ratio_manual) <= GOAL
    window_ok = in_ratio <= WINDOW_GOAL
    print(f"patchkit runtime overhead (torch {torch.__version__}, Python {sys.version.split()[0]}); "
          f"per call, median of {args.reps} interleaved runs")
    print(f"after the window ({n} calls a run):")
    print(f"  empty statement (loop only)              {empty * us:9.4f} us")
    print(f"  injected step, after the window          {med['injected'] * us:9.4f} us"
          f"   (net {(med['injected'] - empty) * us:.4f})")
    print(f"  injected role-choosing step, after       {med['injected_role'] * us:9.4f} us"
          f"   (net {(med['injected_role'] - empty) * us:.4f})")
    print(f"  injected guarded step, after             {med['injected_guarded'] * us:9.4f} us"
          f"   (net {(med['injected_guarded'] - empty) * us:.4f})")
    print(f"  injected step, manual trigger, waiting   {med['injected_manual'] * us:9.4f} us"
          f"   (net {(med['injected_manual'] - empty) * us:.4f})")
    print(f"  torch prof.step(), after its window      {med['prof_step'] * us:9.4f} us"
          f"   (net {prof_net * us:.4f})")
    print(f"  ratio injected / prof.step(): {ratio:.2%}; role form: {ratio_role:.2%}; guarded: "
          f"{ratio_guarded:.2%}; manual, waiting: "
          f"{ratio_manual:.2%}; goal <= {GOAL:.0%}: "
          + ("PASS" if after_ok else "FAIL"))
    print(f"inside a recording window ({len(blocks['plain'])} + {len(blocks['patchkit'])} blocks of "
          f"{args.window_calls} steps, alternating, into the same profiler):")
    print(f"  bare prof.step()                         {in_plain * us:9.2f} us")
    print(f"  injected step                            {in_patchkit * us:9.2f} us"
          f"   (+{(in_patchkit - in_plain) * us:.2f})")
    print(f"  ratio injected / prof.step() (median of adjacent blocks' ratios): {in_ratio:.3f}x; "
          f"goal <= {WINDOW_GOAL}x: " + ("PASS" if window_ok else "FAIL"))
    return 0 if after_ok and window_ok else 1


HOLD = "_patchkit_bench_hold"  # where the bench backend's code leaves its profiler


def holding_torch_backend():
    """The torch backend, its code unchanged but for one line that hands the bench the profiler it makes."""
    from patchkit.runtime import backends

    hold = sys.modules.setdefault(HOLD, types.ModuleType(HOLD))

    class Holding(type(backends.get("torch"))):  # the torch backend, one line added to its create section
        def plan(self, settings, features, key):
            p = super().plan(settings, features, key)
            create = p.sections["create"] + f"import {HOLD}\n{HOLD}.prof = prof\n"
            return p._replace(sections=dict(p.sections, create=create))

    backends.register("bench_torch", Holding)
    return hold


def window_blocks(rt, mod, w, count, folder):
    """ns per step of ``count`` blocks of w steps each, inside one recording window, alternately:
    the injected line, and a bare ``prof.step()`` of the same profiler (so both record into the same
    profiler, with the same number of events behind them)."""
    hold = holding_torch_backend()
    key = "bench-window"
    rt.configure(key, **settings(folder, backend="bench_torch", active=2 * w * count + 2))
    rt.step(key)  # starts it: step 0 opens the window
    rt.step(key)
    prof = hold.prof
    out = {"patchkit": [], "plain": []}
    for i in range(count):
        for name in (("plain", "patchkit") if i % 2 == 0 else ("patchkit", "plain")):
            if name == "plain":
                out[name].append(timed(mod.plain_prof_step, w, prof) / w)
            else:
                out[name].append(timed(mod.injected_key, w, key) / w)
    del hold.prof
    return out


if __name__ == "__main__":
    sys.exit(main())
