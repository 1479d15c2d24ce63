"""attach.stepfind: a job's step found from what the watcher of ``attach --auto`` saw, on simulated jobs.

Each scenario is a job's script and what its thread does over time (:class:`Job`): frames entered and left, time
spent at lines, optimizer steps and model forwards in torch's frames.  :class:`Job` samples the stack every 5 ms
as the watcher does and turns what it saw into a ``Watch`` (calls, moves, lines, leaves, markers), so each test
reads as the job it describes: nested training loops with gradient accumulation, a step function, an inference
loop, a job with no marker, an idle job, a loop of one statement, and hostile watches; tests/auto_nested_job.py's
shape, its micro-batch loop entered by moves forward, its epochs seen turning, or one micro-batch a step."""

from __future__ import annotations

import ast
import itertools
import random
from collections import Counter
from contextlib import contextmanager
from typing import Dict, List, NamedTuple, Tuple

import pytest

from patchkit.attach.stepfind import Candidate, Found, find

TORCH = "/envs/job/lib/python3.12/site-packages/torch"
OPTIMIZER = (TORCH + "/optim/optimizer.py", 478, "Optimizer.profile_hook_step.<locals>.wrapper")
MODULE = (TORCH + "/nn/modules/module.py", 1771, "Module._wrapped_call_impl")
LOADER = (TORCH + "/utils/data/dataloader.py", 729, "_BaseDataLoaderIter.__next__")
JOB = "/home/someone/job/train.py"


class Watch(NamedTuple):  # the fields of patchkit.attach.watchread.Watch, in its order
    pid: int
    interval: float
    first: float
    last: float
    samples: int
    stopped: str
    threads: List[str]
    codes: List[Tuple[str, int, str]]
    calls: List[Tuple[int, int, int, int, float, float]]
    wraps: List[Tuple[int, float, float, int, int]]
    lines: List[Tuple[int, int, int]]
    leaves: List[Tuple[int, int, int]]
    markers: List[Tuple[str, int, float]]
    cutoff: str


def firstlines(text: str) -> Dict[str, int]:
    """Each function's co_qualname -> co_firstlineno (its first decorator's line when decorated)."""
    out = {"<module>": 1}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    out[name] = min([child.lineno] + [d.lineno for d in child.decorator_list])
                visit(child, name + (".<locals>." if not isinstance(child, ast.ClassDef) else "."))
            else:
                visit(child, prefix)
    visit(ast.parse(text), "")
    return out


class Job:
    """One thread of a simulated job, sampled every ``interval`` as the watcher samples (times in microseconds)."""

    def __init__(self, text: str, file: str = JOB, cutoff: str = TORCH, interval: float = 0.005):
        self.text, self.file, self.cutoff = text, file, cutoff
        self.tags = {line.rpartition("# @")[2].strip(): n for n, line in enumerate(text.splitlines(), 1)
                     if "# @" in line}
        self.defs = firstlines(text)
        self.step_us = round(interval * 1e6)
        self.now = self.next_sample = 0
        self.stack: List[list] = []  # [code, line, frame id]
        self.codes: List[Tuple[str, int, str]] = []
        self.frames: Dict[int, list] = {}  # frame id -> [code, parent id, parent line, start, end]
        self.snaps: List[Tuple[int, tuple]] = []
        self.markers: List[Tuple[str, int, int]] = []
        self.ids = itertools.count()

    def code(self, key: Tuple[str, int, str]) -> int:
        if key not in self.codes:
            self.codes.append(key)
        return self.codes.index(key)

    @contextmanager
    def call(self, qualname: str, at: str = "", where: Tuple[str, int, str] = ()):
        if at:
            self.stack[-1][1] = self.tags[at]
        key = where or (self.file, self.defs[qualname], qualname)
        self.stack.append([self.code(key), key[1], next(self.ids)])
        yield
        self.stack.pop()

    def run(self, tag: str, seconds: float) -> None:
        """The frame on top is at the line tagged ``# @tag`` for ``seconds``."""
        self.stack[-1][1] = self.tags[tag]
        self.spend(seconds)

    def spend(self, seconds: float) -> None:
        end = self.now + round(seconds * 1e6)
        while self.next_sample < end:
            self.register(self.next_sample, seen=True)
            self.snaps.append((self.next_sample, tuple((fid, code, line) for code, line, fid in self.stack)))
            self.next_sample += self.step_us
        self.now = end

    def register(self, t: int, seen: bool) -> None:
        for depth, (code, line, fid) in enumerate(self.stack):
            if fid not in self.frames:
                parent = self.stack[depth - 1] if depth else (None, -1, None)
                self.frames[fid] = [code, parent[2], parent[1], t, t]
            elif seen:
                self.frames[fid][4] = t

    def torch(self, where: Tuple[str, int, str], tag: str, seconds: float, marker: str = "") -> None:
        with self.call(where[2], at=tag, where=where):
            self.spend(seconds)
            if marker:  # the hook runs as the step ends: the frames on the stack then are registered
                self.register(self.now, seen=False)
                self.markers.append((marker, self.stack[-1][2], self.now))

    def step(self, tag: str, seconds: float = 0.004) -> None:
        self.torch(OPTIMIZER, tag, seconds, marker="optimizer")

    def forward(self, tag: str, seconds: float) -> None:
        self.torch(MODULE, tag, seconds)

    def load(self, tag: str, seconds: float) -> None:
        self.torch(LOADER, tag, seconds)

    def watch(self) -> Watch:
        index = {fid: i for i, fid in enumerate(self.frames)}
        calls = [(code, 0, index.get(parent, -1), line, start / 1e6, end / 1e6)
                 for code, parent, line, start, end in self.frames.values()]
        wraps = []  # the moves: the deepest frame both looks share, its line changed or a new call on one line
        for (t0, s0), (t1, s1) in zip(self.snaps, self.snaps[1:]):
            p = 0
            while p < min(len(s0), len(s1)) and s0[p][0] == s1[p][0]:
                p += 1
            if not p:
                continue
            a, b = s0[p - 1][2], s1[p - 1][2]
            if b != a or (p < min(len(s0), len(s1)) and s0[p][1] == s1[p][1]):
                wraps.append((index[s0[p - 1][0]], t0 / 1e6, t1 / 1e6, a, b))
        lines = Counter((code, line) for _, snap in self.snaps for _, code, line in snap)
        leaves = Counter([(code, line) for _, code, line in snap if not self.in_torch(code)][-1]
                         for _, snap in self.snaps)
        return Watch(4242, self.step_us / 1e6, self.snaps[0][0] / 1e6, self.snaps[-1][0] / 1e6, len(self.snaps),
                     "repeated", ["MainThread"], list(self.codes), calls, wraps,
                     [(c, line, n) for (c, line), n in lines.items()],
                     [(c, line, n) for (c, line), n in leaves.items()],
                     [(kind, index[fid], t / 1e6) for kind, fid, t in self.markers], self.cutoff)

    def in_torch(self, code: int) -> bool:
        return bool(self.cutoff) and self.codes[code][0].startswith(self.cutoff + "/")

    def source_of(self, file: str):
        return self.text if file == self.file else None


def by(found: Found, kind: str, line: int) -> Candidate:
    return next(c for c in found.candidates if c.kind == kind and c.line == line)


TRAINING = '''\
import torch


def train(model, loader, opt, epochs):
    for epoch in range(epochs):  # @epoch
        for batch in loader:  # @batch
            opt.zero_grad()  # @zero
            for micro in batch.chunk(4):  # @micro
                loss = compute_loss(model, micro)  # @loss
                loss.backward()  # @backward
            opt.step()  # @step
        evaluate(model)  # @evaluate


def compute_loss(model, micro):
    out = model(micro)  # @forward
    return out.float().mean()  # @mean


def evaluate(model):
    model.eval()  # @eval_body


train(model, loader, opt, epochs=4)  # @main
'''


def training(epochs: int = 4, batches: int = 8, micros: int = 4, torch: str = "optimizer forward") -> Job:
    """Gradient accumulation: each optimizer step takes 4 micro-batches (157 ms a step), and an evaluation ends
    each epoch.  ``torch`` says what torch runs (an optimizer step and model forwards are markers), the rest is
    time at the line."""
    job = Job(TRAINING)
    with job.call("<module>"), job.call("train", at="main"):
        for _ in range(epochs):
            job.run("epoch", 0.001)
            for _ in range(batches):
                job.load("batch", 0.010)
                job.run("zero", 0.001)
                for _ in range(micros):
                    job.run("micro", 0.0005)
                    with job.call("compute_loss", at="loss"):
                        job.forward("forward", 0.012) if "forward" in torch else job.run("forward", 0.012)
                        job.run("mean", 0.003)
                    job.run("backward", 0.020)
                job.step("step") if "optimizer" in torch else job.run("step", 0.004)
            with job.call("evaluate", at="evaluate"):
                job.run("eval_body", 0.1)
    return job


def test_nested_training_loops_the_mini_batch_loop_is_the_step():
    job = training()
    found = find(job.watch(), job.source_of)
    tags = job.tags
    assert found.marker == "optimizer step"
    best = found.candidates[found.chosen]
    assert found.chosen == 0 and (best.kind, best.line, best.qualname) == ("loop", tags["batch"], "train")
    assert best.code == "for batch in loader:  # @batch" and best.file == JOB and best.thread == "MainThread"
    assert (best.role, best.holds, best.per_step) == ("step", "one optimizer step", 1.0)
    assert best.repeats == 4 * 7  # 8 turns an epoch, the first entered; the last ends where the loop is left
    assert best.period == pytest.approx(0.157, abs=0.005) and best.regularity > 0.9
    assert best.share == pytest.approx(8 * 0.157 / (8 * 0.157 + 0.101), abs=0.02)
    assert found.why == (f"each turn of the loop at line {tags['batch']} of train holds exactly one optimizer step "
                         f"(28 of 28), and covers {best.share:.0%} of the job's time")

    micro = by(found, "loop", tags["micro"])  # entered, then 3 turns back a step: 3 complete turns of 35.5 ms
    assert (micro.role, micro.per_step, micro.repeats) == ("inner", 0.0, 3 * 32)
    assert micro.holds == "1/4 of an optimizer step (a micro-batch: 4 per step)"
    assert micro.period == pytest.approx(0.035) and micro.regularity == 1.0
    helper = by(found, "function", firstlines(TRAINING)["compute_loss"])
    assert (helper.qualname, helper.role, helper.per_step, helper.repeats) == ("compute_loss", "inner", 0.0, 128)
    assert helper.holds == micro.holds and helper.code == "def compute_loss(model, micro):"
    assert helper.share == pytest.approx(128 * 0.015 / job.watch().last, abs=0.01)
    epoch = by(found, "loop", tags["epoch"])
    assert (epoch.role, epoch.holds, epoch.per_step, epoch.repeats) == ("outer", "8 optimizer steps (an epoch?)",
                                                                        8.0, 2)
    assert epoch.period == pytest.approx(8 * 0.157 + 0.101, abs=0.005)
    evaluate = by(found, "function", firstlines(TRAINING)["evaluate"])
    assert (evaluate.role, evaluate.holds, evaluate.repeats) == ("", "no optimizer step", 3)
    assert [c.role for c in found.candidates] == ["step", "inner", "inner", "outer", ""]
    assert [c.line for c in found.candidates][1:3] == [tags["micro"], firstlines(TRAINING)["compute_loss"]]
    assert not any(c.file.startswith(TORCH) or c.qualname == "<module>" for c in found.candidates)


def test_a_single_epoch_has_no_epoch_loop_and_the_step_stays_chosen():
    job = training(epochs=1, batches=12)
    found = find(job.watch(), job.source_of)
    assert [c.line for c in found.candidates if c.kind == "loop"] == [job.tags["batch"], job.tags["micro"]]
    assert found.candidates[found.chosen].line == job.tags["batch"] and found.candidates[0].repeats == 11


def test_with_no_optimizer_step_the_model_forwards_are_the_markers():
    """An optimizer of the job's own: each micro-batch runs one forward, and the micro-batch loop covers the most."""
    job = training(torch="forward")
    found = find(job.watch(), job.source_of)
    assert found.marker == "model forward" and found.candidates[found.chosen].line == job.tags["micro"]
    assert [(c.line, c.role, c.holds) for c in found.candidates] == [
        (job.tags["micro"], "step", "one model forward"), (15, "step", "one model forward"),
        (job.tags["epoch"], "outer", "32 model forwards"), (job.tags["batch"], "outer", "4 model forwards"),
        (20, "", "no model forward")]


def test_with_no_marker_a_loop_seen_turning_twice_is_ranked_after_those_seen_more():
    """The epoch loop covers all the time, but 2 turns give one period: nothing says it is regular."""
    job = training(torch="")
    found = find(job.watch(), job.source_of)
    assert found.marker == "" and found.chosen == 0
    assert [(c.kind, c.line) for c in found.candidates] == [
        ("loop", job.tags["batch"]), ("loop", job.tags["micro"]), ("function", 15), ("function", 20),
        ("loop", job.tags["epoch"])]
    assert found.candidates[-1].share == 1.0 and found.candidates[-1].regularity == pytest.approx(1.0, abs=0.01)


FLAT_ACCUMULATION = '''\
def train(model, loader, opt):
    for i, batch in enumerate(loader):  # @loop
        model(batch).sum().backward()  # @fwd
        if (i + 1) % 4 == 0:  # @check
            opt.step()  # @ostep
            opt.zero_grad()  # @zero
'''


def test_gradient_accumulation_in_one_loop_has_no_step_and_says_why():
    """An optimizer step every 4 turns of the one loop: no function or loop holds one step, and why says so."""
    job = Job(FLAT_ACCUMULATION)
    with job.call("train"):
        for i in range(40):
            job.run("loop", 0.003)
            job.forward("fwd", 0.030)
            job.run("check", 0.0005)
            if (i + 1) % 4 == 0:
                job.step("ostep")
                job.run("zero", 0.001)
    found = find(job.watch(), job.source_of)
    loop, = found.candidates
    assert found.chosen is None and (loop.role, loop.per_step, loop.repeats) == ("inner", 9 / 38, 38)
    assert found.why == ("10 optimizer steps were seen (one every 0.139 s), but no function or loop holds exactly "
                         "one each, 3 times or more; each turn of the loop at line 2 of train holds 1/4 of an "
                         "optimizer step (a micro-batch: 4 per step)")
    assert found.top[0] == (JOB, job.tags["fwd"], "train", pytest.approx(0.87, abs=0.01))


STEP_FUNCTION = '''\
import torch


def train_step(model, batch, opt):
    loss = model(batch).sum()  # @fwd
    loss.backward()  # @bwd
    opt.step()  # @ostep
    opt.zero_grad()  # @zero


for batch in loader:  # @loop
    train_step(model, batch, opt)  # @call
'''


def train_steps(job: Job, zero: bool = False) -> None:
    """20 turns of a loop that loads its batch (12 ms) and calls ``train_step`` (forward, backward, the optimizer's
    step: 54 ms, 55 with ``zero``)."""
    for _ in range(20):
        job.load("loop", 0.012)
        with job.call("train_step", at="call"):
            job.forward("fwd", 0.020)
            job.run("bwd", 0.030)
            job.step("ostep")
            if zero:
                job.run("zero", 0.001)


def test_a_step_function_called_once_a_step_from_the_module_s_loop():
    job = Job(STEP_FUNCTION)
    with job.call("<module>"):
        train_steps(job, zero=True)
    found = find(job.watch(), job.source_of)
    assert len(found.candidates) == 1  # the module's loop is no candidate: no recipe point goes there
    best = found.candidates[0]
    assert found.chosen == 0 and (best.kind, best.qualname, best.line) == ("function", "train_step", 4)
    assert (best.role, best.per_step, best.repeats, best.holds) == ("step", 1.0, 19, "one optimizer step")
    assert best.period == pytest.approx(0.067, abs=0.005) and best.share == pytest.approx(55 / 67, abs=0.03)
    assert best.covers == pytest.approx(55 / 67, abs=0.05)  # each call lasts that much of its period
    assert found.why.startswith("each call of train_step holds exactly one optimizer step (19 of 19), and covers ")


SERVING = '''\
import torch


@torch.no_grad()
def serve(model, requests):
    for request in requests:  # @request
        tokens = tokenize(request)  # @tokenize
        for _ in range(16):  # @token
            logits = model(tokens)  # @fwd
            tokens = extend(tokens, logits)  # @extend
        send(tokens)  # @send


def extend(tokens, logits):
    return tokens + [int(logits.argmax())]  # @extend_body


serve(model, requests)  # @main
'''


def test_an_inference_loop_is_judged_by_its_model_forwards():
    job = Job(SERVING)
    with job.call("<module>"), job.call("serve", at="main"):
        for _ in range(5):
            job.run("tokenize", 0.006)
            for _ in range(16):
                job.run("token", 0.0002)
                job.forward("fwd", 0.025)
                with job.call("extend", at="extend"):
                    job.run("extend_body", 0.002)
            job.run("send", 0.02)
    found = find(job.watch(), job.source_of)
    assert found.marker == "model forward"
    best = found.candidates[found.chosen]
    assert (best.kind, best.qualname, best.line) == ("loop", "serve", job.tags["token"])  # in a decorated function
    assert (best.role, best.holds, best.per_step) == ("step", "one model forward", 1.0)
    assert best.repeats == 5 * 15 and best.period  # each request's first token: the loop entered == pytest.approx(0.0272, abs=0.003)
    request = by(found, "loop", job.tags["request"])
    assert (request.role, request.holds, request.per_step, request.repeats) == ("outer", "16 model forwards", 16, 3)
    assert "extend" not in {c.qualname for c in found.candidates}  # each call seen once: too short to tell apart
    assert found.why.startswith(f"each turn of the loop at line {job.tags['token']} of serve holds exactly one "
                                "model forward (75 of 75)")


SIMULATION = '''\
class World:
    def advance(self):
        self.state = physics(self.state)  # @physics
        return self.state  # @ret


def simulate(world, steps):
    for step in range(steps):  # @loop
        world.advance()  # @call
        if step % 10 == 0:  # @check
            log(step)  # @log


simulate(World(), 1000)  # @main
'''


def simulation(steps: int = 40, jitter: float = 0.004) -> Job:
    job, rand = Job(SIMULATION, cutoff=""), random.Random(7)
    with job.call("<module>"), job.call("simulate", at="main"):
        for step in range(steps):
            job.run("loop", 0.001)
            with job.call("World.advance", at="call"):
                job.run("physics", 0.030 + rand.uniform(0, jitter))
                job.run("ret", 0.0005)
            job.run("check", 0.0005)
            if step % 10 == 0:
                job.run("log", 0.008)
    return job


def test_with_no_marker_the_step_is_what_covers_the_time_most_regularly():
    job = simulation()
    found = find(job.watch(), job.source_of)
    assert found.marker == ""
    loop, advance = found.candidates
    assert found.chosen == 0 and (loop.kind, loop.line, loop.qualname) == ("loop", job.tags["loop"], "simulate")
    assert (advance.kind, advance.qualname, advance.line) == ("function", "World.advance", 2)
    assert loop.share > advance.share and loop.share == pytest.approx(1.0, abs=0.01)
    assert loop.period == pytest.approx(0.035, abs=0.005) and loop.regularity >= 0.8
    assert (loop.role, loop.holds, loop.per_step) == ("", "", None)
    assert found.why == ("no optimizer step or model forward was seen: chosen by the time each repetition covers "
                         f"and how regular it is ({loop.share:.0%} of the time, regularity {loop.regularity:.2f})")


def test_with_no_marker_an_irregular_job_has_no_step():
    job, rand = Job(SIMULATION, cutoff=""), random.Random(0)
    with job.call("<module>"), job.call("simulate", at="main"):
        for _ in range(30):
            with job.call("World.advance", at="call"):
                job.run("physics", rand.lognormvariate(-3, 1.2))  # 50 ms at the median, often 10 or 200
            job.run("log", 0.01)
    found = find(job.watch(), job.source_of)
    assert found.chosen is None and [(c.kind, c.share, c.regularity) for c in found.candidates] == [
        ("loop", 1.0, 0.4), ("function", pytest.approx(0.89, abs=0.01), 0.4)]
    assert found.why.startswith("no optimizer step or model forward was seen, and nothing repeats regularly")


IDLE = '''\
import time


def main():
    while True:
        time.sleep(3600)  # @sleep


main()  # @main
'''


def test_an_idle_job_has_no_step_and_the_busiest_places_are_named():
    job = Job(IDLE, cutoff="")
    with job.call("<module>"), job.call("main", at="main"):
        job.run("sleep", 2.0)
    found = find(job.watch(), job.source_of)
    assert found == Found((), None, "no function or loop repeated 3 times in 2.0 s", "", ((JOB, 6, "main", 1.0),))


ONE_STATEMENT = '''\
def train_step(model, batch, opt):
    model(batch).sum().backward()  # @fwd
    opt.step()  # @ostep


def main(model, loader, opt):
    for batch in loader:  # @loop
        train_step(model, batch, opt)  # @call
'''


def test_a_loop_of_one_statement_turns_on_the_same_line():
    job = Job(ONE_STATEMENT)
    with job.call("main"):
        for _ in range(12):
            with job.call("train_step", at="call"):
                job.forward("fwd", 0.040)
                job.step("ostep")
    watch = job.watch()
    main = [w for w in watch.wraps if watch.codes[watch.calls[w[0]][0]][2] == "main"]
    assert main and all(a == b == job.tags["call"] for _, _, _, a, b in main)  # train_step's moves are forward
    found = find(watch, job.source_of)
    function, loop = found.candidates  # as wide as each other: the innermost first
    assert found.chosen == 0 and (loop.kind, loop.line, function.qualname) == ("loop", job.tags["loop"], "train_step")
    assert loop.role == function.role == "step" and loop.repeats == 10 and function.repeats == 10
    assert loop.share == function.share == 1.0 and loop.period == function.period == pytest.approx(0.045)


WINDOWS = '''\
def train(model, loader, opt):
    for batch in loader:  # @loop
        opt.step()  # @first
        loss = model(batch).sum()  # @fwd
        loss.backward()  # @bwd
        opt.step()  # @last
        opt.zero_grad()  # @zero
'''


@pytest.mark.parametrize("where", ["first", "last"])
def test_a_marker_between_the_two_samples_of_a_wrap_is_in_the_turn_its_line_says(where):
    """An optimizer step at the top of the loop's body, or near its end: in some turns a sample sees the frame
    between the step and the wrap, in others the step falls between the wrap's two samples (a rule that put those
    always in the turn before, or always in the next, would count 0 and 2 steps in some turns)."""
    job, rand = Job(WINDOWS), random.Random(11)
    with job.call("train"):
        for _ in range(30):
            job.run("loop", 0.0005)
            if where == "first":
                job.step("first", 0.001)
            job.forward("fwd", 0.010 + rand.uniform(0, 0.004))
            job.run("bwd", 0.012)
            if where == "last":
                job.step("last", 0.001)
                job.run("zero", rand.uniform(0.0005, 0.005))
    watch = job.watch()
    inside = [w for w in watch.wraps for _, _, t in watch.markers if w[1] < t <= w[2] and w[4] < w[3]]  # turns
    assert 5 <= len(inside) <= 25
    found = find(watch, job.source_of)
    best = found.candidates[found.chosen]
    assert (best.kind, best.role, best.per_step, best.repeats) == ("loop", "step", 1.0, 28)
    assert found.why.startswith("each turn of the loop at line 2 of train holds exactly one optimizer step (28 of 28)")


def test_a_file_that_cannot_be_read_leaves_its_functions_without_loops():
    job = training()
    for source_of in (lambda file: None, lambda file: "def (:\n\0garbage"):
        found = find(job.watch(), source_of)
        assert {c.kind for c in found.candidates} == {"function"} and {c.code for c in found.candidates} == {""}
        assert [c.qualname for c in found.candidates] == ["compute_loss", "evaluate"]
        assert found.chosen is None and found.why == (
            "32 optimizer steps were seen (one every 0.157 s), but no function or loop holds exactly one each, 3 times "
            "or more; each call of compute_loss holds 1/4 of an optimizer step (a micro-batch: 4 per step)")
        assert found.top[0][:3] == (JOB, job.tags["backward"], "train")


def test_hostile_rows_are_skipped_and_change_nothing():
    job = training()
    clean = job.watch()
    train = next(i for i, c in enumerate(clean.calls) if clean.codes[c[0]][2] == "train")
    n = len(clean.calls)
    hostile = clean._replace(
        codes=clean.codes + [("/x.py", 1, "f"), ("bad",), None, (JOB, "one", "g")],
        calls=clean.calls + [(99, 0, -1, 1, 0.1, 0.2), (0, 7, -1, 1, 0.1, 0.2), (1, 0, n + 2, 5, 0.1, 0.2),
                             (1, 0, n + 3, 5, 0.2, 0.3), (1, 0, 10 ** 9, 1, float("nan"), 0.3), "call", (1, 0)],
        wraps=clean.wraps + [(train, 1.0, 1.005, 10 ** 6, 5), (train, 1.0, 1.005, 4, 4), (-1, 0.0, 0.1, 9, 1),
                             (n + 99, 0.0, 0.1, 9, 1), (train, "t", 0.1, 9, 1)],
        lines=clean.lines + [(999, 3, 5), (0, 3, -7), ("0", 3, 1)],
        leaves=clean.leaves + [(999, 3, 5), (0, 3, -1)],
        markers=clean.markers + [("optimizer", n + 2, 1.0), ("optimizer", 555, 1.0), ("other", train, 1.0)],
        threads=clean.threads)
    want = find(clean, job.source_of)
    got = find(hostile, job.source_of)
    assert got.candidates == want.candidates and got.chosen == want.chosen == 0 and got.top == want.top
    assert got.why.replace("28 of 28", "") == want.why.replace("28 of 28", "")


def test_a_loop_of_parents_and_a_broken_watch_never_hang_or_raise():
    cycle = Watch(1, 0.005, 0.0, 1.0, 200, "time", ["MainThread"], [(JOB, 1, "f"), (MODULE[0], 10, MODULE[2])],
                  [(0, 0, 1, 3, 0.1, 0.2), (1, 0, 0, 3, 0.3, 0.4), (0, 0, 1, 3, 0.5, 0.6), (0, 0, 0, 3, 0.7, 0.8)],
                  [], [], [], [("optimizer", 0, 0.15), ("optimizer", 1, 0.35)], TORCH)
    found = find(cycle, lambda file: None)
    assert found.marker == "optimizer step" and found.candidates[0].qualname == "f"
    assert found.candidates[0].per_step == pytest.approx(2 / 3)  # both markers lead to f's call 0
    forwards = find(cycle._replace(markers=[]), lambda file: None)  # the forward's parent is f, f's the forward
    assert forwards.marker == "model forward" and forwards.candidates[0].per_step == pytest.approx(1 / 3)
    broken = Watch(1, float("nan"), 5.0, 1.0, -3, "time", None, None, None, None, None, None, None, None)
    assert find(broken, lambda file: None) == Found((), None, "no function or loop repeated 3 times in 0.0 s", "",
                                                    ())


def test_what_no_point_can_name_is_no_candidate_and_the_list_is_capped():
    """Functions that repeat longer than the rest, but no recipe point can name them, and 26 that repeat alike."""
    hidden = [(JOB, "make.<locals>.run.<locals>.inner"), (JOB, "<lambda>"), (JOB, "<genexpr>"), (JOB, "<listcomp>"),
              ("<string>", "compiled"), (TORCH + "/nn/functional.py", "linear")]
    codes = hidden + [(JOB, "make.<locals>.run")] + [(JOB, f"stage{i}") for i in range(26)]
    job = Job("".join(f"def f{i}():\n    pass  # @{i}\n\n\n" for i in range(len(codes))))
    with job.call("<module>"):
        for _ in range(6):
            for i, (file, name) in enumerate(codes):
                with job.call(name, where=(file, 4 * i + 1, name)):
                    job.run(str(i), 0.032 if i <= len(hidden) else 0.012)
    found = find(job.watch(), job.source_of)
    assert len(found.candidates) == 20 and found.chosen is None
    assert found.candidates[0].qualname == "make.<locals>.run" and found.candidates[0].code == "def f6():"
    assert {c.qualname for c in found.candidates[1:]} < {f"stage{i}" for i in range(26)}
    assert all(c.repeats in (5, 6) and c.period == pytest.approx(0.012 * 26 + 0.032 * 7, abs=0.006)
               for c in found.candidates)
    assert "(the best covers 6%, regularity 1.00)" in found.why


NESTED = '''\
def train(model, optimizer, loader, sampler, epochs, accum):
    for epoch in range(epochs):  # @epoch
        sampler.set_epoch(epoch)  # @shuffle
        for batch in loader:  # @batch
            loss = 0.0  # @zero
            for micro in chunks(batch, accum):  # @micro
                loss += micro_step(model, micro) / accum  # @call
            optimizer.step()  # @step
            log(loss)  # @log


def micro_step(model, micro):
    loss = model(micro[0]).sum()  # @fwd
    loss.backward()  # @bwd
    return loss.item()  # @item
'''


def nested(epochs: int = 3, batches: int = 6, accum: int = 2, shuffle: float = 0.0) -> Job:
    """tests/auto_nested_job.py's shape and times: a micro-batch (29 ms) is over a third of a step (82 ms), its
    optimizer step taking 20; the micro-batch loop's body is one statement, its header not seen (0.2 ms), so it is
    entered by a move forward from the batch loop's header, or by the batch loop turning back into it."""
    job = Job(NESTED)
    with job.call("train"):
        for _ in range(epochs):
            job.run("epoch", 0.0002)
            job.run("shuffle", shuffle)
            for _ in range(batches):
                job.load("batch", 0.003)
                job.run("zero", 0.0001)
                for _ in range(accum):
                    job.run("micro", 0.0002)
                    with job.call("micro_step", at="call"):
                        job.forward("fwd", 0.012)
                        job.run("bwd", 0.016)
                        job.run("item", 0.001)
                job.step("step", 0.020)
                job.run("log", 0.0005)
    return job


def test_a_micro_batch_loop_entered_by_a_move_forward_is_an_inner_candidate():
    job = nested()
    watch, tags = job.watch(), job.tags
    moves = [(a, b) for k, _, _, a, b in watch.wraps if watch.codes[watch.calls[k][0]][2] == "train"]
    assert (tags["batch"], tags["call"]) in moves  # from the batch loop's header: forward, into the micro loop
    found = find(watch, job.source_of)
    assert [(c.kind, c.line, c.role) for c in found.candidates] == [
        ("loop", tags["batch"], "step"), ("loop", tags["micro"], "inner"), ("function", 12, "inner")]
    best, micro, helper = found.candidates
    assert found.chosen == 0 and best.period == pytest.approx(0.082, abs=0.004)
    assert best.repeats == 3 * 6 - 1  # the epoch's turn is not seen (0.2 ms): the batch loop turns on across it
    assert (micro.per_step, micro.repeats) == (0.0, 18)  # each step: entered, turned once, left
    assert micro.period == pytest.approx(0.0292, abs=0.003) and best.period / micro.period > 2.6  # not 3 a step:
    # its turns are counted, 2 for each optimizer step
    assert micro.holds == helper.holds == "1/2 of an optimizer step (a micro-batch: 2 per step)"
    assert (helper.qualname, helper.repeats) == ("micro_step", 36)


def test_an_epoch_loop_seen_turning_is_an_outer_candidate():
    """Each epoch starts with the sampler's shuffle (20 ms, seen): from the last batch back to it, the epoch loop
    turned and the batch loop was left; on into the batch loop, it was entered."""
    job = nested(epochs=5, shuffle=0.020)
    found = find(job.watch(), job.source_of)
    tags = job.tags
    epoch = by(found, "loop", tags["epoch"])
    assert (epoch.role, epoch.holds, epoch.per_step, epoch.repeats) == ("outer", "6 optimizer steps (an epoch?)",
                                                                        6.0, 3)
    assert epoch.period == pytest.approx(6 * 0.082 + 0.020, abs=0.005) and epoch.share == 1.0
    batch = found.candidates[found.chosen]
    assert (batch.line, batch.role, batch.repeats) == (tags["batch"], "step", 5 * 5)  # each epoch's last: left
    assert [c.role for c in found.candidates] == ["step", "inner", "inner", "outer"]


def test_a_loop_entered_anew_for_each_of_its_turns_has_no_complete_one():
    """One micro-batch a step: each turn of the micro loop starts where it is entered, and it is left before the
    next: no complete turn, no candidate (its one turn is the step's)."""
    job = nested(accum=1)
    found = find(job.watch(), job.source_of)
    assert [(c.kind, c.line, c.role) for c in found.candidates] == [
        ("loop", job.tags["batch"], "step"), ("function", 12, "")]  # called once a step, the step after it
    assert found.chosen == 0 and found.candidates[0].repeats == 3 * 6 - 1


HOOKS = '''\
import torch


def call_hook(name, *args):
    prepare(name)  # @prepare
    return getattr(module, name)(*args)  # @dispatch


def optimizer_step(batch):
    out = model(batch)  # @fwd
    out.backward()  # @bwd
    opt.step()  # @ostep


def on_train_batch_start():
    log()  # @hook_body


for batch in loader:  # @loop
    call_hook("on_train_batch_start")  # @start
    call_hook("optimizer_step", batch)  # @hook
'''


@pytest.mark.parametrize("other_hooks_seen", [True, False])
def test_of_a_chain_of_calls_each_holding_the_step_the_innermost_is_chosen_not_the_dispatcher(other_hooks_seen):
    """Lightning's shape: a generic ``call_hook`` runs every hook, the optimizer's among them; each call of it that
    runs the optimizer's holds one step and covers a little more than that hook, but a recipe at its start would
    make every hook a step."""
    job = Job(HOOKS)
    with job.call("<module>"):
        for k in range(20):
            job.load("loop", 0.010)
            with job.call("call_hook", at="start"):
                job.run("prepare", 0.0001)
                with job.call("on_train_batch_start", at="dispatch"):  # seen once, or never
                    job.run("hook_body", 0.012 if other_hooks_seen and k == 7 else 0.0001)
            with job.call("call_hook", at="hook"):
                job.run("prepare", 0.0005)
                with job.call("optimizer_step", at="dispatch"):
                    job.forward("fwd", 0.020)
                    job.run("bwd", 0.030)
                    job.step("ostep")
    found = find(job.watch(), job.source_of)
    hook, step = by(found, "function", 4), by(found, "function", 9)
    assert hook.role == step.role == "step" and hook.share > step.share  # both hold one; the dispatcher is wider
    assert found.candidates[found.chosen] == step and found.chosen == 0, found.why
    assert found.why.startswith("each call of optimizer_step holds exactly one optimizer step")


def test_a_step_candidate_much_wider_than_an_inner_one_is_still_chosen():
    """The innermost wins only among those covering about as much: a loop's turn that loads its batch (a sixth of
    the step) over the step function it calls."""
    job = Job(STEP_LOOP)
    with job.call("<module>"), job.call("train", at="main"):
        train_steps(job)
    found = find(job.watch(), job.source_of)
    best = found.candidates[found.chosen]
    assert (best.kind, best.qualname) == ("loop", "train") and best.share - by(found, "function", 9).share > 0.1
    assert best.covers == 1.0  # a turn lasts until the next


STEP_LOOP = '''\
import torch


def train(loader):
    for batch in loader:  # @loop
        train_step(batch)  # @call


def train_step(batch):
    out = model(batch)  # @fwd
    out.backward()  # @bwd
    opt.step()  # @ostep


train(loader)  # @main
'''
