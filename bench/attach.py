"""Attach: how soon a running job records after `patchkit attach`, how long the attach holds up one of its steps, and
what it costs the job once detached.

Jobs with no patchkit in them, started as plain `python` processes, each attached round after round with
`patchkit attach PID RECIPE --steps 3` (the rounds interleaved, so that both jobs meet the same neighbours):

- patchkit's own test job (tests/attach_job.py on pkjob, written into a temporary folder), recipe at
  `Trainer.step_logged`;
- a third party's: a transformers `Trainer` on a 2-layer GPT-2 built from `GPT2Config` (no download), made-up token
  data, CPU, recipe at `Trainer.training_step` (planned on transformers/trainer.py, 4,700 lines).  transformers is
  this benchmark's own need, not a test dependency: where it is missing the line says how to install it.

Each job pauses `--step` seconds a step (the rest of a real step: data, logging, a collective).  For each job, the
median of the rounds:

- from the start of the `patchkit attach` command to the start of the first recorded step (the job's own clock,
  the step read from the labels the job puts inside each step's work in the trace).  Goal: within one step plus
  one second;
- the job's longest step from the start of the command to that first recorded step: the step gdb stopped and the
  agent swapped the code in.  Goal: within one step plus half a second;

each as a ratio to its goal, side by side, with the machine's load (`os.getloadavg`) before and after: on a
shared machine a busy neighbour stretches every figure.  Then the step time (its main thread's CPU time per step)
of patchkit's job after the detach against before the attach, beside the same ratio of a job never attached, over
the same stretches of time.  Goal: no difference beyond noise (within 5%).

    python bench/attach.py [--rounds 3] [--step 0.2] [--quick]

Needs gdb and the right to trace a child (it says so and gives no verdict otherwise).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import attach_helpers as helpers  # noqa: E402

NOISE = 0.05
INSTALL = "pip install transformers accelerate"  # what the transformers job needs (Trainer wants accelerate)

HF_JOB = textwrap.dedent('''\
    """A transformers Trainer started without patchkit: a 2-layer GPT-2 from its config, made-up tokens, CPU."""
    import argparse, json, os, time

    ap = argparse.ArgumentParser()
    for name in ("--journal", "--stop", "--out"):
        ap.add_argument(name, required=True)
    ap.add_argument("--pause", type=float, default=0.0)
    args = ap.parse_args()

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, n_positions=64, vocab_size=256,
                                       bos_token_id=0, eos_token_id=0))


    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 1 << 16

        def __getitem__(self, i):
            ids = torch.randint(0, 256, (32,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids}


    class Journal(TrainerCallback):
        """One JSON line per step (its index, start, end, the main thread's CPU time); the step's label inside the
        model's forward, so that the ProfilerStep# span of the step holds it; stops when the stop file appears."""

        def __init__(self):
            self.log, self.step, self.label = open(args.journal, "a"), 0, None

        def on_step_begin(self, _args, state, control, **kw):
            self.step, self.t0, self.c0 = state.global_step, time.time(), time.thread_time()

        def on_step_end(self, _args, state, control, **kw):
            time.sleep(args.pause)  # the rest of a real step
            self.log.write(json.dumps({"step": self.step, "start": self.t0, "end": time.time(),
                                       "cpu": time.thread_time() - self.c0}) + "\\n")
            self.log.flush()
            control.should_training_stop = os.path.exists(args.stop)


    journal = Journal()


    def label_in(module, inputs):
        journal.label = torch.profiler.record_function("job-step-%d" % journal.step)
        journal.label.__enter__()


    def label_out(module, inputs, output):
        journal.label.__exit__(None, None, None)


    model.register_forward_pre_hook(label_in)
    model.register_forward_hook(label_out)
    training = TrainingArguments(output_dir=args.out, max_steps=10 ** 6, per_device_train_batch_size=8,
                                 learning_rate=1e-3, logging_strategy="no", save_strategy="no", report_to=[],
                                 use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, seed=0)
    Trainer(model=model, args=training, train_dataset=Tokens(), callbacks=[journal]).train()
    ''')

HF_RECIPE = textwrap.dedent('''\
    id: bench-hf-training-step
    description: one step per Trainer.training_step call (bench/attach.py)
    target:
      package: transformers
      distribution: transformers
      versions: ">=4.40"
      files: [transformers/trainer.py]
    backend: torch
    profiler:
      contents: [cpu]
      save_path: {save}
    points:
      - class: Trainer
        method: training_step
        at: method_start
    ''')


class HFJob(helpers.Running):
    """The transformers job, its output in a file (a pipe nobody reads would fill)."""

    def __init__(self, tmp: Path, pause: float):
        self.log, self.stop = tmp / "hf.log", tmp / "hf.stop"
        (tmp / "hf_job.py").write_text(HF_JOB)
        with open(tmp / "hf.out", "w") as out:
            self.proc = subprocess.Popen([sys.executable, str(tmp / "hf_job.py"), "--journal", str(self.log), "--stop",
                                          str(self.stop), "--out", str(tmp / "hf-out"), "--pause", str(pause)],
                                         cwd=tmp, stdout=out, stderr=subprocess.STDOUT, text=True)
        self.pid = self.proc.pid

    def finish(self, timeout=60, stop=True):
        self.stop.touch()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def transformers_missing() -> str:
    import importlib.util

    for name in ("transformers", "accelerate"):
        if importlib.util.find_spec(name) is None:
            return f"{name} is not installed here ({INSTALL}: this benchmark's own, not a test dependency)"
    return ""


def step_time(job, since, until):
    """The median CPU time of the job's main thread per step, over the steps run between two moments (on a shared
    machine the wall clock mostly measures the neighbours; see _timing.py)."""
    times = [s["cpu"] for s in job.steps() if since <= s["start"] and s["end"] <= until]
    return statistics.median(times) if times else float("nan"), len(times)


def one_round(tmp, job, recipe, env, root=None):
    """(seconds from the command to the first recorded step, the longest step of the job meanwhile)."""
    t0 = time.time()
    done = subprocess.run([sys.executable, "-m", "patchkit", "attach", str(job.pid), str(recipe), "--steps", "3",
                           "--json", *(["--root", str(root)] if root else [])],
                          capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"patchkit attach failed:\n{done.stderr[-3000:]}")
    (status,) = json.loads(done.stdout)
    (trace,) = status["captures"][0]["traces"]
    first = helpers.recorded_labels(trace)[0][1][0]
    steps = job.steps()
    start = {s["step"]: s["start"] for s in steps}[first]
    longest = max((s["end"] - s["start"] for s in steps if s["end"] > t0 and s["start"] < start), default=0.0)
    return start - t0, longest


def verdict(took: float, goal: float) -> str:
    return f"{took:5.2f} s  goal <= {goal:5.2f} s  ratio {took / goal:4.2f} {'PASS' if took <= goal else 'FAIL'}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--step", type=float, default=0.2, help="the jobs' pause a step, seconds (their work adds a little)")
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
    own = helpers.Job(tmp, site, steps=10 ** 6, pause=args.step, name="attached")
    jobs = [own]
    measured = [("patchkit's own (pkjob)", own, helpers.recipe(tmp, "logged"), site)]
    missing = transformers_missing()
    if missing:
        print(f"transformers Trainer job: not measured: {missing}")
    else:
        hf = HFJob(tmp, args.step)
        jobs.append(hf)
        (tmp / "bench-hf-training-step.yaml").write_text(HF_RECIPE.format(save=tmp / "traces-hf"))
        measured.append(("transformers Trainer", hf, tmp / "bench-hf-training-step.yaml", None))
    try:
        for _, job, _, _ in measured:
            job.wait_steps(5, timeout=300)
        load = os.getloadavg()
        figures = {name: ([], []) for name, *_ in measured}
        for _ in range(rounds):
            for name, job, recipe, root in measured:
                time.sleep(args.step * 3)
                first, longest = one_round(tmp, job, recipe, env, root)
                figures[name][0].append(first)
                figures[name][1].append(longest)
        after = os.getloadavg()
        print(f"attach -> first recorded step, and the job's longest step meanwhile (median of {rounds} round(s); "
              f"load average {load[0]:.2f} before, {after[0]:.2f} after, {os.cpu_count()} CPUs):")
        ok = True
        for name, job, _, _ in measured:
            step = statistics.median(s["end"] - s["start"] for s in job.steps()[3:40])  # before any attach
            first, longest = (statistics.median(v) for v in figures[name])
            ok = ok and first <= step + 1.0 and longest <= step + 0.5
            print(f"  {name:24} one step {step:4.2f} s | first recorded step {verdict(first, step + 1.0)} | "
                  f"longest step {verdict(longest, step + 0.5)}")
        for job in jobs[1:]:
            job.finish(timeout=60)
        own.finish(timeout=60)  # the jobs below keep the machine busy: the first ones are timed on a quieter one
        # the step time, compute only (no pause), of a job side by side with one never attached: before, after
        busy = helpers.Job(tmp, site, steps=10 ** 6, pause=0.0, name="busy")
        beside = helpers.Job(tmp, site, steps=10 ** 6, pause=0.0, name="beside")
        jobs += [busy, beside]
        busy.wait_steps(5)
        beside.wait_steps(5)
        t1 = time.time()
        time.sleep(stretch)
        t2 = time.time()
        one_round(tmp, busy, helpers.recipe(tmp, "logged"), env, site)
        t3 = time.time()
        time.sleep(stretch)
        t4 = time.time()
        (before, n1), (after_, n2) = step_time(busy, t1, t2), step_time(busy, t3, t4)
        (ref_before, _), (ref_after, _) = step_time(beside, t1, t2), step_time(beside, t3, t4)
        mine, theirs = after_ / before, ref_after / ref_before
        ratio = mine / theirs
        print(f"step time after detach / before attach ({n1} and {n2} steps, {before * 1e3:.2f} and {after_ * 1e3:.2f} "
              f"ms): attached job {mine:.3f}x, the job never attached beside it {theirs:.3f}x; ratio {ratio:.3f}; "
              f"goal within noise ({1 - NOISE:.2f}-{1 + NOISE:.2f}): {'PASS' if abs(ratio - 1) <= NOISE else 'FAIL'}")
        ok = ok and abs(ratio - 1) <= NOISE
    finally:
        for j in jobs:
            j.finish(timeout=60)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
