"""engine/points/loops.py: which loops a recipe's `loop:` selects, and the selector that picks one loop alone."""

from __future__ import annotations

import libcst as cst

from patchkit.core.model import LoopSelector
from patchkit.engine.points.loops import iterables, loop_selector, loop_targets, select, selected

from test_scan import scan_of

SOURCE = '''\
class A:
    def run(self, data):
        for epoch in range(self.epochs):
            for micro in data.split(4):
                loss = self.forward(micro)
                loss.backward()
            for micro in data.split(4):
                self.log(micro)
        while self.pending():
            self.drain()
'''


def test_a_loop_is_known_by_what_it_iterates_and_the_names_it_binds():
    loop = cst.parse_statement("for i, (a, b) in enumerate(self.pairs):\n    pass\n")
    assert iterables(loop) == ["self.pairs"] and loop_targets(loop) == ["i", "a", "b"]
    zipped = cst.parse_statement("for a, b in zip(xs, self.ys):\n    pass\n")
    assert iterables(zipped) == ["xs", "self.ys"]
    assert iterables(cst.parse_statement("for m in data.split(4):\n    pass\n")) == []  # a call names no iterable


def test_each_selector_narrows_the_loops():
    scan = scan_of(SOURCE)
    line = lambda found: [scan.line(lp.node) for lp in found]  # noqa: E731
    assert line(select(scan, LoopSelector(target="micro"))) == [4, 7]
    assert line(select(scan, LoopSelector(target="micro", calls="loss.backward"))) == [4]
    assert line(select(scan, LoopSelector(while_="self.pending"))) == [9]
    assert line(selected(scan, {"target": "epoch"})) == [3]


def test_the_selector_offered_for_a_loop_picks_it_alone_or_says_how_many_it_takes():
    scan = scan_of(SOURCE)
    for loop in scan.loops:
        spec, count = loop_selector(scan, loop)
        found = selected(scan, spec)
        assert loop.node in [f.node for f in found] and count == len(found)
    first, second = scan.loops[1], scan.loops[2]
    assert loop_selector(scan, first) == ({"calls": "self.forward"}, 1)  # `target: micro` takes both: not offered
    assert loop_selector(scan, second) == ({"calls": "self.log"}, 1)
