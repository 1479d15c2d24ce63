"""The in-job watcher of ``attach --auto`` (patchkit/runtime/attach/watch.py), run in this process on a thread that
trains: what it notes of calls, moves (loops entered, turned, left) and optimizer steps, that it stops by itself
(on turns alone), takes its hook off, holds no frame of the job's at the end, and writes nothing when asked out."""

import threading
import time

import pytest

torch = pytest.importorskip("torch")

from patchkit.runtime.attach import watch  # noqa: E402


class Channel:
    def __init__(self):
        self.statuses, self.files, self.detach = [], {}, False

    def write(self, record):
        self.statuses.append(record)

    def put(self, name, record):
        self.files[name] = record

    def detach_asked(self):
        return self.detach


def one_step(model, batch):  # a function entered once per micro-batch
    time.sleep(0.012)
    loss = model(batch).pow(2).mean()
    loss.backward()
    return loss.item()


def train(stop, steps):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(4, 8)
    while not stop.is_set():
        for micro in data.chunk(2):
            one_step(model, micro)
        time.sleep(0.008)  # the rest of the step, on a line of train's own
        opt.step()
        opt.zero_grad()
        steps.append(time.perf_counter())


def line_of(fn, text):
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


def watched(seconds=20.0, detach_after=None, steps=None):
    stop, channel = threading.Event(), Channel()
    steps = [] if steps is None else steps
    job = threading.Thread(target=train, args=(stop, steps), name="trainer", daemon=True)
    job.start()
    try:
        while not steps:
            time.sleep(0.01)
        w = watch.start({"watch": {"seconds": seconds}}, channel, {"pid": 1})
        if detach_after is not None:
            time.sleep(detach_after)
            channel.detach = True
        deadline = time.time() + 60
        while channel.statuses[-1]["state"] != "watched" and time.time() < deadline:
            time.sleep(0.02)
    finally:
        stop.set()
        job.join()
    return w, channel


def test_it_sees_calls_turns_and_every_optimizer_step_then_stops_by_itself():
    steps = []
    w, channel = watched(steps=steps)
    data = channel.files[watch.WATCH]
    assert channel.statuses[0]["state"] == "watching" and channel.statuses[-1]["state"] == "watched"
    assert data["stopped"] == "repeated" and watch.MIN_SECONDS <= data["last"] < 20
    codes = {i: q for i, (f, n, q) in enumerate(data["codes"])}
    threads = data["threads"]
    step_calls = [c for c in data["calls"] if codes[c[0]] == "one_step" and threads[c[1]] == "trainer"]
    trains = [k for k, c in enumerate(data["calls"]) if codes[c[0]] == "train"]
    assert len(trains) == 1 and len(step_calls) >= 2 * watch.REPEATS  # two micro-batches a step, each a new call
    assert all(c[2] == trains[0] for c in step_calls)  # called from train's frame, at its line
    assert {c[3] for c in step_calls} == {line_of(train, "one_step(model, micro)")}
    moves = [(a, b) for k, _, _, a, b in data["wraps"] if k == trains[0]]
    micro, rest = line_of(train, "one_step(model, micro)"), line_of(train, "time.sleep(0.008)")
    assert (micro, micro) in moves  # the next micro-batch: a new call on one line, the loop turned
    assert (micro, rest) in moves and (rest, micro) in moves  # a loop left (forward), and back: entered
    assert all(a != b or a == micro for a, b in moves)  # on one line only under a new call of one function
    assert w.turns[trains[0]] == sum(b <= a for a, b in moves) < len(moves)  # it stops on turns alone
    markers = data["markers"]
    assert len(markers) > watch.REPEATS and all(m[0] == "optimizer" for m in markers)
    at = [w.t0 + m[2] for m in markers]  # exact: every step the job made while watched, none missed
    made = [t for t in steps if at[0] <= t <= at[-1] + 0.005]
    assert len(made) == len(markers) and all(0 <= t - m < 0.005 for t, m in zip(made, at))
    for kind, call, t in markers:  # each tied to torch's optimizer frame, called from train
        assert data["codes"][data["calls"][call][0]][0].startswith(data["cutoff"])
        assert data["calls"][call][2] == trains[0]
    assert data["cutoff"] and 0 < data["cost"] < 0.05 and data["interval"] >= watch.INTERVAL


def test_it_takes_its_hook_off_and_holds_no_frame_at_the_end():
    from torch.optim import optimizer

    w, _ = watched()
    assert w.hook is None and not optimizer._global_optimizer_post_hooks
    assert w.stacks == {} and w.known == {}


def test_asked_out_it_stops_and_writes_no_watch():
    w, channel = watched(seconds=60, detach_after=0.3)
    assert channel.statuses[-1]["state"] == "watched" and channel.statuses[-1]["stopped"] == "detached"
    assert watch.WATCH not in channel.files and w.hook is None


def test_the_time_limit_stops_it_when_nothing_repeats():
    channel = Channel()
    w = watch.start({"watch": {"seconds": 0.5}}, channel, {"pid": 1})  # only this thread, waiting below
    deadline = time.time() + 30
    while channel.statuses[-1]["state"] != "watched" and time.time() < deadline:
        time.sleep(0.02)
    data = channel.files[watch.WATCH]
    assert data["stopped"] == "time" and data["markers"] == [] and data["last"] >= 0.5
    assert w.hook is None


def test_one_costly_look_does_not_space_the_next_ones_out(monkeypatch):
    """A look that ran a garbage collection of the whole job is charged its time: the next looks are spaced by
    the median of the last few, and never more than LONGEST apart (else one such look put the next 18 s away)."""
    channel, slept, looks = Channel(), [], []
    w = watch.Watcher(channel, {"pid": 1}, 60, 10 ** 9)
    real_look = w.look

    def look(me):
        looks.append(me)
        if len(looks) == 3:
            end = time.thread_time() + 0.3  # 0.3 s of CPU: 30 s apart at 1%, were it counted alone
            while time.thread_time() < end:
                pass
        real_look(me)
        if len(looks) == 12:
            w.seconds = 0.0  # stop at the next check

    monkeypatch.setattr(w, "look", look)
    monkeypatch.setattr(watch.time, "sleep", lambda s: slept.append(s))
    w.run()
    assert len(looks) == 12 and len(slept) == 11
    assert max(slept) < 0.3 / watch.SHARE and max(slept) <= watch.LONGEST
