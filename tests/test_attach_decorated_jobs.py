"""`patchkit attach` with decorating points, on real CPU jobs started without patchkit: the built-in sglang-forward
(`at: on_exit` on ModelRunner.forward) on an importable SGLang-shaped runner, and a recipe with an on_exit under the
method's own decorator and a range around another method.  Exactly the next N steps are recorded, each ProfilerStep#
holding its own step's work (and its range); afterwards the class holds its very own objects again, every function
has its own code object, and the losses are those of an unattached run.  Also: detach mid-window, and each shape
attach refuses (before anything is injected where it can tell, else in the job), with nothing changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import attach_helpers as helpers
from attach_helpers import attach

pytestmark = pytest.mark.skipif(bool(helpers.gdb_missing() or helpers.ptrace_denied()),
                                reason=helpers.gdb_missing() or helpers.ptrace_denied() or "")
STEPS = 240  # each job's whole run; the window comes in its middle
NAMES = ("forward", "forward_kept", "_forward_raw", "busy", "cached")

RUNNER = textwrap.dedent('''\
    """An SGLang-shaped model runner for the attach tests (importable, on CPU): ModelRunner.forward, one pass a call."""

    import functools
    import time

    import torch


    def keep(func):
        """A decorator that keeps the function in its closure only (as verl's GPUMemoryLogger does)."""
        def f(*args, **kwargs):
            return func(*args, **kwargs)
        return f


    class ModelRunner:
        def __init__(self, seed, pause):
            torch.manual_seed(seed)
            gen = torch.Generator().manual_seed(seed)
            self.model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
            self.data = [torch.randn(16, 32, generator=gen) for _ in range(8)]
            self.pause = pause
            self.is_draft_worker = False
            self.forward_pass_id = 0
            self.losses = []

        def _forward_raw(self, i):
            with torch.profiler.record_function(f"job-step-{i}"):
                loss = self.model(self.data[i % len(self.data)]).pow(2).mean()
                loss.backward()
                self.opt.step()
                self.opt.zero_grad()
                time.sleep(self.pause)
            return loss.item()

        def forward(self, forward_batch, skip_attn_backend_init: bool = False):
            self.forward_pass_id = self.forward_pass_id + 1
            output = self._forward_raw(forward_batch)
            self.losses.append(output)
            return output

        @keep
        def forward_kept(self, forward_batch):
            return self.forward(forward_batch)

        @property
        def busy(self):
            return self.forward_pass_id > 0

        @functools.lru_cache(maxsize=None)
        def cached(self, i):
            return i

        def stream(self, i):
            yield self.forward(i)
    ''')

JOB = textwrap.dedent('''\
    """The job: calls runner.<call>(i) each step, as SGLang's worker calls model_runner.forward; one JSON line a step,
    then what it finds of its own objects."""
    import argparse, json, os, time

    ap = argparse.ArgumentParser()
    for name, kind in (("--call", str), ("--steps", int), ("--pause", float), ("--journal", str), ("--stop", str)):
        ap.add_argument(name, type=kind)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    from sglang.srt.model_executor import model_runner as mr

    held = {n: vars(mr.ModelRunner)[n] for n in %(names)r}
    kept = held["forward_kept"].__closure__[0].cell_contents
    functions = {"forward": held["forward"], "forward_kept": kept, "_forward_raw": held["_forward_raw"]}
    codes = {n: f.__code__ for n, f in functions.items()}
    runner = mr.ModelRunner(0, args.pause)
    log = open(args.journal, "a")
    for i in range(args.steps):
        t0 = time.time()
        getattr(runner, args.call)(i)
        log.write(json.dumps({"step": i, "start": t0, "end": time.time(), "loss": runner.losses[-1]}) + "\\n")
        log.flush()
        if os.path.exists(args.stop):
            break
    log.write(json.dumps({"final": True, "losses": runner.losses,
                          "held": {n: vars(mr.ModelRunner)[n] is held[n] for n in held},
                          "cell": held["forward_kept"].__closure__[0].cell_contents is kept,
                          "code": {n: f.__code__ is codes[n] for n, f in functions.items()},
                          "left": sorted(n for n in vars(mr) if "patchkit" in n)}) + "\\n")
    log.close()
    ''') % {"names": NAMES}

RANGE_RECIPE = textwrap.dedent('''\
    id: runner-range
    description: one step per forward_kept (under its own decorator), a range around each raw forward
    target:
      package: sglang
      distribution: sglang
      versions: ">=0.4"
      files: [sglang/srt/model_executor/model_runner.py]
    backend: torch
    profiler:
      contents: [cpu]
      save_path: {save}
    points:
    {points}
    ''')

TORCH = ["--backend", "torch", "profiler.contents=[cpu]"]


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    folder = root / "sglang" / "srt" / "model_executor"
    folder.mkdir(parents=True)
    for package in (root / "sglang", root / "sglang" / "srt", folder):
        (package / "__init__.py").write_text("")
    (folder / "model_runner.py").write_text(RUNNER)
    (root / "sglang-0.5.5.dist-info").mkdir()
    (root / "sglang-0.5.5.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.5\n")
    (tmp_path / "job.py").write_text(JOB)
    return root


def recipe(tmp_path, points, rid="runner-range"):
    path = tmp_path / f"{rid}.yaml"
    path.write_text(RANGE_RECIPE.format(save=tmp_path / "traces", points=points).replace("runner-range", rid))
    return path


class Job(helpers.Running):
    """The SGLang-shaped job (JOB), started without patchkit."""

    def __init__(self, tmp_path, site, call="forward", steps=STEPS, name="job"):
        self.log, self.stop = tmp_path / f"{name}.log", tmp_path / f"{name}.stop"
        env = dict(os.environ, PYTHONPATH=str(site))
        env.pop("PATCHKIT_RUN", None)
        self.proc = subprocess.Popen([sys.executable, str(tmp_path / "job.py"), "--call", call, "--steps", str(steps),
                                      "--pause", "0.03", "--journal", str(self.log), "--stop", str(self.stop)],
                                     cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.pid = self.proc.pid

    def finish(self, stop=False):
        if stop:
            self.stop.touch()
        _, err = self.proc.communicate(timeout=180)
        final = [ln for ln in self.lines() if "final" in ln]
        assert final, err[-3000:]
        return final[-1]


def start(jobs, *args, **kw):
    jobs.append(Job(*args, **kw))
    return jobs[-1]


def spans_of(trace, *names):
    """Each ProfilerStep# span, in order, with the job-step labels and the spans named ``names`` inside it."""
    with open(trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if "dur" in e]
    inside = lambda e, s: s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"]  # noqa: E731
    out = []
    for span in sorted((e for e in events if str(e["name"]).startswith("ProfilerStep#")), key=lambda e: e["ts"]):
        labels = sorted(int(e["name"].rsplit("-", 1)[1]) for e in events
                        if str(e["name"]).startswith("job-step-") and inside(e, span))
        named = [[int(e["name"].rsplit("-", 1)[1]) for e in events if str(e["name"]).startswith("job-step-")
                  and inside(e, r)] for r in events if r["name"] in names and inside(r, span)]
        out.append((int(span["name"].split("#")[1]), labels, named))
    return out


def left_as_it_was(final, plain=None):
    assert all(final["held"].values()) and final["cell"] and all(final["code"].values()), final
    assert final["left"] == []
    if plain is not None:
        assert final["losses"] == plain["losses"] and len(final["losses"]) == STEPS


EXIT_UNDER_OWN = ("  - class: ModelRunner\n    method: forward_kept\n    at: on_exit\n"
                  "  - class: ModelRunner\n    method: _forward_raw\n    at: method\n    action: range\n    name: raw")


@pytest.mark.parametrize("case", ["sglang-forward", "under-its-own-decorator-with-a-range"])
def test_the_next_steps_are_recorded_and_the_class_holds_its_own_objects_again(tmp_path, site, jobs, case):
    call = "forward" if case == "sglang-forward" else "forward_kept"
    plain = start(jobs, tmp_path, site, call=call, name="plain")
    job = start(jobs, tmp_path, site, call=call)
    job.wait_steps(20)
    args = (["sglang-forward", *TORCH, f"profiler.save_path={tmp_path / 'traces'}"] if case == "sglang-forward"
            else [recipe(tmp_path, EXIT_UNDER_OWN)])
    done = attach(tmp_path, [job.pid, *args, "--root", site, "--steps", 3, "--json"])
    assert done.returncode == 0, done.stderr
    (status,) = json.loads(done.stdout)
    assert status["state"] == "restored" and status["original_code"] and status["why"] == "the window closed"
    assert "the job's own code is back" in done.stderr  # (a short window may close between two looks at it)
    (capture,) = status["captures"]
    (trace,) = capture["traces"]
    spans = spans_of(trace, "raw")
    assert [j for j, _, _ in spans] == [0, 1, 2] and all(len(labels) == 1 for _, labels, _ in spans), spans
    k = spans[0][1][0]
    assert [labels for _, labels, _ in spans] == [[k], [k + 1], [k + 2]]
    if case != "sglang-forward":
        assert [named for _, _, named in spans] == [[[k]], [[k + 1]], [[k + 2]]]  # one range a step, round its work
    log = {ln["step"]: ln for ln in job.steps()}
    assert log[k - 1]["start"] < status["attached_at"] < log[k]["end"], "the window starts at the next call"
    left_as_it_was(job.finish(), plain.finish())


def test_detach_mid_window_keeps_what_was_recorded_and_gives_the_class_its_method_back(tmp_path, site, jobs):
    job = start(jobs, tmp_path, site, steps=100000)
    job.wait_steps(10)
    env = dict(os.environ, PYTHONPATH=str(helpers.REPO))
    proc = subprocess.Popen([sys.executable, "-m", "patchkit", "attach", str(job.pid), "sglang-forward", *TORCH,
                             f"profiler.save_path={tmp_path / 'traces'}", "--root", str(site), "--steps", "500",
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    helpers.wait_for(helpers.recording, 120, proc)
    gone = subprocess.run([sys.executable, "-m", "patchkit", "detach", str(job.pid)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert gone.returncode == 0 and "the job's own code is back" in gone.stdout, (gone.stdout, gone.stderr)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    (status,) = json.loads(out)
    assert status["state"] == "restored" and status["original_code"] and status["why"] == "detached"
    ((first, last),) = status["captures"][0]["recorded"]
    assert first == 0 and last < 499
    spans = spans_of(status["captures"][0]["traces"][0])
    assert len(spans) == last + 1 and all(len(labels) == 1 for _, labels, _ in spans)
    left_as_it_was(job.finish(stop=True))


REFUSED = {  # point -> what the refusal says, and whether it comes before anything is injected
    "busy": ("a property's function", True),
    "stream": ("is a generator", True),
    "cached": ("elsewhere than in a closure", False),
}


@pytest.mark.parametrize("method", sorted(REFUSED))
def test_each_shape_attach_cannot_decorate_is_refused_and_nothing_changes(tmp_path, site, jobs, method):
    says, before = REFUSED[method]
    job = start(jobs, tmp_path, site, steps=100000)
    job.wait_steps(3)
    path = recipe(tmp_path, f"  - class: ModelRunner\n    method: {method}\n    at: on_exit", rid=f"refused-{method}")
    done = attach(tmp_path, [job.pid, path, "--root", site, "--steps", 2])
    assert done.returncode == 1 and says in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert ("attached" not in done.stderr.replace("nothing attached", "")) if before else "refused" in done.stderr
    assert not [p for p in os.listdir("/tmp") if p.startswith(f"patchkit-attach-{job.pid}-")]
    left_as_it_was(job.finish(stop=True))
    assert not (tmp_path / "traces").exists()
