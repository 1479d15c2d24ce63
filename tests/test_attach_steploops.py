"""attach.steploops: a function's own loops read with ast (extent, header, body statements), which loops a move
entered, turned or left, markers put in a move's window, a call's complete turns, and which turn a marker fell in;
files that cannot be read have no loops."""

from __future__ import annotations

import ast
import sys

import pytest

from patchkit.attach.steploops import (Loop, Sources, function_at, loops_in, moved, turn_index, turned, turns,
                                      with_marks)

SOURCE = '''\
import torch


@torch.no_grad()
@trace
def train(loader, opt,
          epochs):
    for epoch in range(
            epochs):
        for batch in loader:
            with torch.autocast("cuda"):
                loss = step(batch)
                # a comment between statements

            if loss is None:
                continue
            opt.step()
        else:
            report(epoch)
        log = [x
               for x in range(3)]

        def helper():
            for i in range(3):
                pass
        while not done():
            wait()
    async def inner():
        async for item in stream():
            use(item)


class Trainer:
    def fit(self):
        for b in self.loader: self.step(b)
'''


def loops():
    return loops_in(function_at(ast.parse(SOURCE), 4, "train"))


def test_a_function_s_own_loops_by_lines():
    epoch, batch, wait = loops()
    assert epoch == Loop(8, 9, 27, ((10, 19), (20, 21), (23, 25), (26, 27)))  # the header on two lines
    assert batch == Loop(10, 10, 17, ((11, 12), (15, 16), (17, 17)))  # its `else` is not in its extent
    assert wait == Loop(26, 26, 27, ((27, 27),))
    assert [epoch.pos(n) for n in (8, 9, 10, 18, 19, 20, 24, 27, 28)] == [-1, -1, 0, 0, 0, 1, 2, 3, None]
    assert [batch.pos(n) for n in (10, 12, 13, 14, 16, 17, 18)] == [-1, 0, None, None, 1, 2, None]
    assert epoch.encloses(batch) and not batch.encloses(epoch) and not epoch.encloses(epoch)


def test_the_function_is_found_by_its_first_decorator_s_line():
    tree = ast.parse(SOURCE)
    assert function_at(tree, 4, "train").name == "train" and function_at(tree, 6, "train") is None
    assert function_at(tree, 28, "train.<locals>.inner").name == "inner"
    assert loops_in(function_at(tree, 28, "train.<locals>.inner")) == (Loop(29, 29, 30, ((30, 30),)),)
    assert loops_in(function_at(tree, 23, "train.<locals>.helper")) == (Loop(24, 24, 25, ((25, 25),)),)
    assert loops_in(function_at(tree, 34, "Trainer.fit")) == (Loop(35, 35, 35, ((35, 35),)),)


def test_which_loop_a_wrap_turned():
    found = loops()
    epoch, batch, wait = range(3)
    assert turned(found, 17, 10) == batch  # the end of the body back to the header
    assert turned(found, 17, 12) == batch  # the header not seen: back to the first statement
    assert turned(found, 16, 10) == batch  # continue
    assert turned(found, 20, 10) == epoch  # after the inner loop, back into it: the outer loop turned
    assert turned(found, 27, 8) == epoch and turned(found, 27, 26) == wait
    assert turned(found, 12, 11) is None  # a `with` ending goes back to its line: the same statement
    assert turned(found, 21, 20) is None  # a comprehension's own loop (inlined since 3.12)
    assert turned(found, 19, 18) is None  # the `else` of a loop is not its body
    assert turned(found, 12, 12) == batch and turned(found, 27, 27) == wait  # one line, a new call under it
    assert turned(found, 5, 5) is None and turned(found, 40, 3) is None and turned((), 3, 3) is None
    assert turned(found, 14, 12) is None  # from a line where no code runs


def test_which_loops_a_move_started_a_turn_of_and_which_it_broke():
    found = loops()
    epoch, batch, wait = range(3)
    assert moved(found, 10, 12) == ((), ())  # on from the header into the body: the turn began at the header
    assert moved(found, 9, 12) == ((batch,), ())  # into the batch loop from the epoch's header: entered
    assert moved(found, 20, 12) == ((epoch, batch), (batch, wait))  # the epoch loop turned, into the batch loop:
    # every loop inside it is broken (the batch loop's turn before this is no complete one: it was left)
    assert moved(found, 17, 10) == ((batch,), ()) and moved(found, 12, 12) == ((batch,), ())  # turned
    assert moved(found, 17, 20) == ((), (batch,))  # on past the batch loop: left
    assert moved(found, 27, 8) == ((epoch,), (batch, wait)) and moved(found, 27, 26) == ((wait,), ())
    assert moved(found, 5, 27) == ((epoch, wait), ()) and moved(found, 27, 30) == ((), (epoch, wait))
    assert moved(found, 12, 11) == ((), ()) and moved((), 3, 4) == ((), ())


def test_markers_in_a_move_s_window_are_where_the_frame_went():
    """Line 74 is ``opt.step()`` after a loop of one statement at line 72 (a new micro-batch call each turn)."""
    step = [(0.20, 74, 5, 0.20, 0.20), (0.29, 74, 9, 0.29, 0.29)]  # two steps between two looks, none seen
    assert with_marks([(0.16, 0.30, 72, 72)], step) == [(0.16, 0.20, 72, 74), (0.20, 0.29, 74, 74),
                                                        (0.29, 0.30, 74, 72)]
    assert with_marks([(0.16, 0.30, 72, 72)], []) == [(0.16, 0.30, 72, 72)]
    seen = [(0.20, 74, 5, 0.18, 0.20)]  # the step's call was seen at 0.18, on line 74: no move to it
    assert with_marks([(0.18, 0.22, 74, 72)], seen) == [(0.20, 0.22, 74, 72)]
    assert with_marks([(0.18, 0.22, 74, 74)], [(0.20, 74, 5, 0.18, 0.22)]) == []  # one call, seen at both looks
    assert with_marks([(0.18, 0.22, 74, 74)], [(0.20, 74, 5, 0.18, 0.20)]) == [(0.20, 0.22, 74, 74)]  # then anew
    at_look = [(0.22, 74, 5, 0.20, 0.20)]  # at the look's very time: its call, not seen then, ended before it
    assert with_marks([(0.20, 0.22, 74, 74)], at_look) == [(0.22, 0.22, 74, 74)]  # the new turn after it
    marks = [(0.05, 74, 1, 0.05, 0.05), (0.20, 74, 5, 0.20, 0.20), (0.40, 74, 7, 0.40, 0.40)]
    assert with_marks([(0.10, 0.15, 72, 72), (0.18, 0.22, 72, 72)], marks) == [
        (0.10, 0.15, 72, 72), (0.18, 0.20, 72, 74), (0.20, 0.22, 74, 72)]  # each marker in its own window only


def test_a_call_s_complete_turns_end_where_a_loop_around_it_turned():
    own = [(0.0, 0.1, 10), (0.2, 0.3, 10), (0.4, 0.5, 10), (1.0, 1.1, 10), (1.2, 1.3, 10)]
    assert turns(own, []) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert turns(own, [0.8]) == [(0, 1), (1, 2), (3, 4)]  # the outer loop turned between 0.5 and 1.1
    assert turns(own, [1.1]) == [(0, 1), (1, 2), (3, 4)] and turns(own[:1], []) == []
    assert turns(own, [0.5, 1.3, 0.05]) == [(0, 1), (2, 3)]  # at a start: the turn that ends there is broken


def test_a_marker_in_a_wrap_s_window_goes_by_its_line():
    body = Loop(2, 2, 5, ((3, 3), (4, 4), (5, 5)))  # 3: opt.step(); 4: forward; 5: backward
    own = [(0.10, 0.15, 4), (0.30, 0.35, 2), (0.50, 0.55, 5)]
    assert turn_index(body, own, 0.05, 3) == 0 and turn_index(body, own, 0.2, 3) == 1
    assert turn_index(body, own, 0.12, 3) == 1  # line 3 is before line 4, where the new turn was seen: in it
    assert turn_index(body, own, 0.15, 3) == 1  # at the window's end: by the line too
    assert turn_index(body, own, 0.12, 5) == 0  # line 5 is after line 4: the turn before
    assert turn_index(body, own, 0.32, 3) == 1  # the new turn was seen on its header: line 3 came after
    assert turn_index(body, own, 0.52, 4) == 3 and turn_index(body, own, 0.52, 7) == 2  # 7: no position
    assert turn_index(body, own, 9.0, 4) == 3


def test_files_are_read_once_and_what_is_not_python_has_no_loops():
    asked = []
    texts = {"/job/a.py": SOURCE, "/job/bad.py": "def f(:\n    for x in y: pass\n", "/job/nul.py": "x = 1\0\n"}

    def source_of(path):
        asked.append(path)
        return texts.get(path)
    sources = Sources(source_of)
    assert [loop.header for loop in sources.loops("/job/a.py", 4, "train")] == [8, 10, 26]
    assert sources.line("/job/a.py", 10) == "for batch in loader:" and sources.line("/job/a.py", 4) == "@torch.no_grad()"
    assert sources.loops("/job/a.py", 5, "train") == ()  # no function starts there
    assert sources.loops("/job/bad.py", 1, "f") == () and sources.line("/job/bad.py", 2) == "for x in y: pass"
    assert sources.loops("/job/nul.py", 1, "f") == () and sources.loops("/job/gone.py", 1, "f") == ()
    assert sources.line("/job/gone.py", 1) == "" and sources.line("/job/a.py", 0) == ""
    assert sources.line("/job/a.py", 10 ** 6) == ""
    assert sorted(asked) == ["/job/a.py", "/job/bad.py", "/job/gone.py", "/job/nul.py"]


@pytest.mark.skipif(sys.version_info < (3, 10), reason="`match` is Python 3.10's")
def test_a_loop_inside_a_match_case_is_the_function_s():
    tree = ast.parse("def f(cmd):\n    match cmd:\n        case 'go':\n            for x in cmd:\n                g(x)\n")
    assert loops_in(function_at(tree, 1, "f")) == (Loop(4, 4, 5, ((5, 5),)),)
