"""Self time from events fed one at a time: the same as sorting every thread whole, in whatever order they come."""

from __future__ import annotations

import random
import re
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from patchkit.traces.selftime import BadEvent, Op, Step, Totals, totals


def reference(events):
    """The whole-trace algorithm patchkit used before it streamed: each thread's spans sorted, then nested."""
    threads = defaultdict(list)
    steps = {}
    for e in events:
        if e.get("ph") == "X":
            ts, dur = float(e["ts"]), max(float(e.get("dur", 0)), 0.0)
            threads[(str(e.get("pid")), str(e.get("tid")))].append((ts, dur, e))
            step = re.match(r"ProfilerStep#(\d+)$", str(e.get("name", "")))
            if step:
                steps.setdefault(int(step.group(1)), dur)
    calls, spent = defaultdict(int), defaultdict(float)

    def account(frame):
        _end, children, e, dur = frame
        name, kind = str(e.get("name", "")), str(e.get("cat", ""))
        if kind in ("Trace", "python_function", "fwdbwd", "ac2g", "overhead") or re.match(r"ProfilerStep#(\d+)$", name):
            return
        calls[(name, kind)] += 1
        spent[(name, kind)] += max(dur - children, 0.0)

    for spans in threads.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for ts, dur, e in spans:
            while stack and stack[-1][0] <= ts:
                account(stack.pop())
            if stack:
                stack[-1][1] += min(dur, stack[-1][0] - ts)
            stack.append([ts + dur, 0.0, e, dur])
        while stack:
            account(stack.pop())
    ops = [Op(n, k, calls[(n, k)], spent[(n, k)]) for n, k in calls]
    return tuple(Step(n, steps[n]) for n in sorted(steps)), tuple(sorted(ops, key=lambda o: (-o.self_us, o.name)))


def x(name, ts, dur, cat="cpu_op", tid=1, pid=7):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}


EVENT = st.builds(x, st.sampled_from(["aten::mm", "aten::add", "ProfilerStep#1", "ProfilerStep#2", "kernel_a"]),
                  st.integers(0, 60), st.integers(-2, 40), st.sampled_from(["cpu_op", "kernel", "python_function"]),
                  st.integers(1, 3))


@settings(max_examples=300, deadline=None)
@given(st.lists(EVENT, max_size=60), st.randoms(use_true_random=False), st.integers(1, 8))
def test_any_order_gives_what_sorting_each_thread_whole_gives(events, rng, window):
    rng.shuffle(events)
    got = totals(events, window)
    assert (got.step_list(), got.ops()) == reference(events)


def torch_like(steps=20, seed=4):
    """Operators sorted by start; launches at the end of the file, as kineto writes them; kernels a little shuffled."""
    rng = random.Random(seed)
    ops, launches, kernels = [], [], []
    for step in range(steps):
        base = step * 1000
        ops.append(x(f"ProfilerStep#{step}", base, 990, cat="user_annotation"))
        for i in range(30):
            ops += [x("aten::linear", base + 30 * i, 25), x("aten::addmm", base + 30 * i + 2, 20)]
            launches.append(x("cudaLaunchKernel", base + 30 * i + 15, 4, cat="cuda_runtime"))
            kernels.append(x("gemm", base + 30 * i + 20, 18, cat="kernel", pid=0, tid=7))
    order = {id(k): i + 8 * rng.random() for i, k in enumerate(kernels)}  # each moved by fewer than 8 places
    kernels.sort(key=lambda k: order[id(k)])
    return ops + launches + kernels


@pytest.mark.parametrize("window", [1, 4, 64, 100_000])
def test_torch_s_order_gives_what_sorting_each_thread_whole_gives(window):
    events = torch_like()
    result = totals(events, window)
    assert (result.step_list(), result.ops()) == reference(events)
    assert {o.name: o.self_us for o in result.ops()}["aten::addmm"] == 600 * 16.0  # 20 less the launch's 4


def test_a_thread_is_kept_as_a_few_sorted_runs_of_20_bytes_an_event():
    kept = Totals(window=16)
    kept.feed(torch_like())
    runs = {where: [len(run[0]) for run in t.runs] for where, t in kept.threads.items()}
    assert len(runs[(7, 1)]) == 2 and len(runs[(0, 7)]) == 1  # operators, then the launches; the kernels
    assert all(len(t.pending) < 32 for t in kept.threads.values())
    assert {run[0].itemsize + run[1].itemsize + run[2].itemsize for t in kept.threads.values() for run in t.runs} == {20}
    kept.finish()
    assert all(not t.runs for t in kept.threads.values()) and kept.held == 20 * 61 + 600 + 600


def test_past_the_bound_on_events_held_it_is_an_error_not_a_machine_out_of_memory(monkeypatch):
    import patchkit.traces.selftime as selftime

    monkeypatch.setattr(selftime, "MAX_HELD", 1000)
    with pytest.raises(BadEvent, match="more than 1,000 complete events"):
        totals(x("op", i, 1) for i in range(5000))
    monkeypatch.setattr(selftime, "MAX_THREADS", 100)
    with pytest.raises(BadEvent, match="on more than 100 threads and streams"):
        totals(x("op", i, 1, tid=i) for i in range(500))


def test_a_tie_is_nested_in_the_order_of_the_file():
    first, second = x("wrapper", 0, 10), x("aten::empty", 0, 10)
    assert totals([first, second]).ops() == (Op("aten::empty", "cpu_op", 1, 10.0), Op("wrapper", "cpu_op", 1, 0.0))
    assert totals([second, first]).ops() == (Op("wrapper", "cpu_op", 1, 10.0), Op("aten::empty", "cpu_op", 1, 0.0))


def test_odd_events_are_skipped_or_read_as_torch_means_them():
    events = [x("a", "5", "2"), x("b", None, 1), {"ph": "X", "name": "c"}, "not an event", [1, 2],
              x("d", 1, 1, pid=[1], tid={"a": 1}), x(7, 0, 1, cat=None)]
    ops = totals(events).ops()
    assert {(o.name, o.kind): o.calls for o in ops} == {("a", "cpu_op"): 1, ("d", "cpu_op"): 1, ("7", "None"): 1}


@pytest.mark.parametrize("event, says", [
    (x("ProfilerStep#" + "9" * 5000, 0, 1), "numbered with 5000 digits"),
    (x("op", float("inf"), 1), "ts inf"),
    (x("op", 1, "nan"), "dur nan"),
    (x("op", "1e400", 1), "ts inf"),
])
def test_what_no_profiler_writes_is_refused_with_text_to_find_it_by(event, says):
    with pytest.raises(BadEvent) as caught:
        totals([x("fine", 0, 1), event])
    assert says in caught.value.message and caught.value.needle and caught.value.needle in str(event["name"])


def test_a_step_number_up_to_eighteen_digits_is_a_step():
    big = 10 ** 17 + 3
    result = totals([x(f"ProfilerStep#{big}", 0, 5), x("ProfilerStep#2", 9, 4), x("ProfilerStep#2", 20, 1)])
    assert result.step_list() == (Step(2, 4.0), Step(big, 5.0)) and result.ops() == ()


def test_distinct_names_past_the_bounds_are_added_up_as_other_and_counted():
    from patchkit.traces.selftime import OTHER, Names

    names = Names(count=3, chars=29 + 16 + 16)  # "ProfilerStep#1" "user_annotation", then two names "cpu_op"
    events = [x("ProfilerStep#1", 0, 100, cat="user_annotation"), x("a" * 10, 1, 10), x("b" * 10, 20, 10),
              x("c" * 30, 40, 10), x("d", 60, 10), x("a" * 10, 80, 5)]
    result = totals(events, names=names)  # ProfilerStep#1 and the two of ten characters fill the three names
    assert result.ops() == (Op(OTHER[0], OTHER[1], 2, 20.0), Op("a" * 10, "cpu_op", 2, 15.0),
                            Op("b" * 10, "cpu_op", 1, 10.0))
    assert result.step_list() == (Step(1, 100.0),) and names.cut == 2
    again = totals([x("b" * 10, 0, 3), x("e", 5, 1)], names=names)  # shared: a name kept before is kept again
    assert again.ops() == (Op("b" * 10, "cpu_op", 1, 3.0), Op(OTHER[0], OTHER[1], 1, 1.0)) and names.cut == 3
    assert "1 event(s) have names past patchkit's bound" in Names.note(1) and Names.note(0) == ""


def test_a_name_longer_than_what_is_left_is_not_kept_and_shorter_ones_still_are():
    from patchkit.traces.selftime import OTHER, Names

    names = Names(count=10, chars=20)
    result = totals([x("x" * 1000, 0, 1), x("short", 2, 1)], names=names)
    assert {o.name for o in result.ops()} == {OTHER[0], "short"} and names.cut == 1 and names.chars == 20 - 11
