"""attach.stepwatch: a watch's rows as the step finder reads them (each checked, none raising), what a step is
judged by, and where each marker was in each call of its chain."""

from __future__ import annotations

from types import SimpleNamespace

from patchkit.attach.stepwatch import Checked, markers, marks

TORCH = "/envs/job/lib/python3.12/site-packages/torch"
JOB = "/home/someone/job/train.py"
CODES = [(JOB, 1, "<module>"), (JOB, 5, "train"), (JOB, 20, "micro_step"),
         (TORCH + "/nn/modules/module.py", 1771, "Module._wrapped_call_impl"),
         (TORCH + "/optim/optimizer.py", 478, "Optimizer.profile_hook_step.<locals>.wrapper")]
CALLS = [(0, 0, -1, 0, 0.0, 2.0),  # 0 the module
         (1, 0, 0, 30, 0.0, 2.0),  # 1 train, called at line 30
         (2, 0, 1, 9, 0.10, 0.14),  # 2 micro_step from train's line 9
         (3, 0, 2, 21, 0.10, 0.12),  # 3 a forward in it
         (3, 0, 3, 1800, 0.11, 0.11),  # 4 a module called inside that forward: not an outermost one
         (4, 0, 1, 11, 0.16, 0.16),  # 5 the optimizer step, from train's line 11
         (2, 0, 1, 9, 0.18, 0.22),  # 6 the next micro_step
         (3, 0, 6, 21, 0.18, 0.20)]  # 7 its forward


def watch(**changed):
    fields = dict(pid=7, interval=0.005, first=0.0, last=2.0, samples=400, stopped="time", threads=["MainThread"],
                  codes=CODES, calls=CALLS, wraps=[(1, 0.14, 0.15, 9, 11), (1, 0.17, 0.18, 11, 9)],
                  lines=[(1, 9, 30)], leaves=[(2, 21, 20)], markers=[("optimizer", 5, 0.165)], cutoff=TORCH + "/")
    fields.update(changed)
    return SimpleNamespace(**fields)


def test_rows_are_kept_typed_and_those_that_are_not_one_dropped():
    w = Checked(watch(
        codes=CODES + [("x.py", "one", "f"), None],
        calls=CALLS + [(99, 0, -1, 0, 0.1, 0.2), (1, 5, -1, 0, 0.1, 0.2), (1, 0, 0, 3, float("nan"), 0.3), "call"],
        wraps=[(1, 0.14, 0.15, 9, 11), (8, 0.1, 0.2, 3, 1), (99, 0.1, 0.2, 3, 1), (1, "t", 0.2, 3, 1), (1, 0.1)],
        markers=[("optimizer", 5, 0.165), ("optimizer", 8, 0.1), ("optimizer", 12, 0.1), ("x", True, 0.1)],
        lines=[(1, 9, 30), (1, 9, 0), (99, 1, 1)], cutoff=TORCH))
    assert w.codes[5:] == [None, None] and w.calls[:8] == CALLS and w.calls[8:] == [None] * 4
    assert w.wraps == [(1, 0.14, 0.15, 9, 11)] and w.markers == [("optimizer", 5, 0.165)]
    assert w.lines == [(1, 9, 30)] and w.cutoff == TORCH + "/" and w.span == 2.0
    assert w.chain(4) == [4, 3, 2, 1, 0] and w.chain(-1) == [] and w.chain(8) == []
    assert [w.nameable(c) for c in range(5)] == [False, True, True, False, False]  # the module's code; torch's


def test_a_loop_of_parents_ends_and_a_broken_watch_is_empty():
    w = Checked(watch(calls=[(1, 0, 1, 3, 0.1, 0.2), (1, 0, 0, 3, 0.3, 0.4)]))
    assert w.chain(0) == [0, 1] and w.chain(1) == [1, 0]
    broken = Checked(watch(interval=float("nan"), first="x", last=-1.0, samples=None, threads=None, codes=None,
                           calls=None, wraps=None, lines=None, leaves=None, markers=None, cutoff=None))
    assert (broken.interval, broken.span, broken.samples, broken.threads, broken.calls) == (0.0, 0.0, 0, [], [])


def test_the_optimizer_steps_are_the_markers_else_the_outermost_forwards():
    assert markers(Checked(watch())) == ("optimizer step", [(5, 0.165)])
    assert markers(Checked(watch(markers=[]))) == ("model forward", [(3, 0.10), (7, 0.18)])
    assert markers(Checked(watch(markers=[], codes=CODES[:3] + [(JOB, 40, "f")] + CODES[4:]))) == ("", [])


def test_each_marker_is_where_each_call_of_its_chain_was():
    w = Checked(watch())
    at = marks(w, [(5, 0.165), (4, 0.11)])
    assert at[1] == [(0.11, 9, 2, 0.10, 0.14), (0.165, 11, 5, 0.16, 0.16)]  # train: its line, the call under it
    assert at[0] == [(0.11, 30, 1, 0.0, 2.0), (0.165, 30, 1, 0.0, 2.0)] and at[3] == [(0.11, 1800, 4, 0.11, 0.11)]
    assert 5 not in at and 4 not in at  # the deepest call of a chain has no call under it
