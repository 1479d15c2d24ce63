"""patchkit.runtime.schedule: the same actions as torch.profiler.schedule, step by step, and the windows they record."""

from __future__ import annotations

import itertools

from patchkit.runtime.schedule import describe_schedule, schedule_action, schedule_end, windows


def test_every_action_is_torch_profiler_schedule_s():
    import torch

    for wait, warmup, active, repeat, skip_first in itertools.product((0, 2), (0, 1), (1, 3), (0, 2), (0, 1)):
        theirs = torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
        for step in range(40):
            assert schedule_action(step, wait, warmup, active, repeat, skip_first) == theirs(step).value, \
                (wait, warmup, active, repeat, skip_first, step)


def test_the_end_and_the_windows():
    s = {"wait": 1, "warmup": 1, "active": 2, "repeat": 2, "skip_first": 3}
    assert schedule_end(1, 1, 2, 2, 3) == 11 and schedule_end(1, 1, 2, 0, 3) is None
    assert windows(s) == [(5, 6), (9, 10)]
    assert windows(dict(s, repeat=0), cycles=3) == [(5, 6), (9, 10), (13, 14)]
    assert describe_schedule(s) == ("wait=1 warmup=1 active=2 repeat=2 skip_first=3: records steps 5-6, steps 9-10; "
                                    "the schedule is over at step 11")
    assert describe_schedule(dict(s, repeat=0, active=1)).endswith(
        "records step 5, step 8, ... (every 3 steps until the process exits)")
