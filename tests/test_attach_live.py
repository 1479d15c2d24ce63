"""runtime.attach.live: a call already running on the main thread (a loop that never returns) takes the recipe's
statements from a line trace on its frame alone: once per turn of its loop (not per turn of a loop inside the
statement), in its own namespace; taken off at its next line when asked from another thread; never over a trace
function of the job's own."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from patchkit.runtime.attach import live

SPACE = {"hits": []}


def run_loop(turns, install, at_turn=1):
    """A function with a loop (its body starts with an inner loop); at turn ``at_turn`` it calls ``install``, as
    attach's lines run inside whatever the main thread is doing.  Its source lines are found by text."""
    seen = []
    for turn in range(turns):
        for inner in range(3):  # TRIGGER: each turn's first statement, a loop of its own
            seen.append((turn, inner))
        if turn == at_turn:
            install(sys._getframe())
        time.sleep(0.001)
    return seen


def line_of(text):
    import inspect

    lines, first = inspect.getsourcelines(run_loop)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


def trigger():
    first = line_of("# TRIGGER")
    return [(first, first + 1, "hits.append(turn)\n")]


def test_the_statements_run_once_per_turn_from_the_next_turn_in_the_frame_s_namespace():
    SPACE["hits"] = []
    made = []

    def install(frame):
        made.append(live.Live("run_loop", [frame], trigger(), SPACE))
        made[0].apply()

    run_loop(6, install)
    assert SPACE["hits"] == [2, 3, 4, 5]  # the inner loop's turns do not fire it again
    assert not made[0].installed() and made[0].restored() and sys.gettrace() is None  # off when the call returned


def test_asked_out_from_another_thread_it_takes_its_trace_off_at_the_next_line():
    SPACE["hits"] = []
    made = []

    def install(frame):
        made.append(live.Live("run_loop", [frame], trigger(), SPACE))
        made[0].apply()
        threading.Thread(target=made[0].undo).start()

    run_loop(200, install)
    assert not made[0].installed() and sys.gettrace() is None
    assert len(SPACE["hits"]) < 50  # stopped long before the loop's end


def test_a_trace_function_of_the_job_s_own_is_never_replaced():
    def mine(frame, event, arg):
        return None

    sys.settrace(mine)
    try:
        assert live.traced()
        made = live.Live("x", [sys._getframe()], trigger(), SPACE)
        with pytest.raises(RuntimeError, match="trace function of its own"):
            made.apply()
        assert sys.gettrace() is mine
    finally:
        sys.settrace(None)


def test_statements_that_raise_never_reach_the_job():
    made = []

    def install(frame):
        made.append(live.Live("run_loop", [frame], [(trigger()[0][0], trigger()[0][1], "1 / 0\n")], SPACE))
        made[0].apply()

    assert len(run_loop(4, install)) == 12 and sys.gettrace() is None


def test_running_finds_this_thread_s_frames_of_a_code():
    def inner():
        return live.running(outer.__code__)

    def outer():
        return inner()

    (frame,) = outer()
    assert frame.f_code is outer.__code__


def test_in_a_child_forked_from_the_main_thread_the_trace_is_off_at_once():
    import os

    SPACE["hits"] = []
    made, said = [], []

    def install(frame):
        made.append(live.Live("run_loop", [frame], trigger(), SPACE))
        made[0].apply()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: what attach's fork guard does, then whether anything still traces it
            made[0].undo()
            os.write(write, b"%d %d" % (sys.gettrace() is None, made[0].installed()))
            os._exit(0)
        os.waitpid(pid, 0)
        said.append(os.read(read, 10))

    run_loop(3, install)
    assert said == [b"1 0"] and sys.gettrace() is None


def test_in_a_child_forked_from_another_thread_nothing_waits_for_the_main_thread():
    import os

    made, said = [], []

    def install(frame):
        made.append(live.Live("run_loop", [frame], trigger(), SPACE))
        made[0].apply()

        def fork():
            pid = os.fork()
            if pid == 0:  # (waiting for the main thread, undo would give up after live.WAIT still installed)
                made[0].undo()
                os._exit(1 if made[0].installed() else 0)
            said.append(os.waitpid(pid, 0)[1])

        thread = threading.Thread(target=fork)
        thread.start()
        thread.join()

    run_loop(3, install)
    assert said == [0]
