"""The finder asks a point's kind: where its anchors are (by the kind's place), what refuses it (the kind's
refusals, formatted once for the codemod and for ``patchkit points``) and where its line goes (the kind's find).
A kind the finder has never seen, put in KINDS for one test, is applied, refused and offered like the others."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
import yaml

from patchkit.core.model import Applied, CannotApply, LoopSelector, Point
from patchkit.engine.codemod import transform
from patchkit.engine.points.finder import find, refusal, sites
from patchkit.engine.points.lookup import find_function
from patchkit.engine.points.outline import outline
from patchkit.engine.points.positions import Positions
from patchkit.engine.points.scan import NotFound, Scan
from patchkit.recipe import kinds
from patchkit.recipe.load import load_recipe
from patchkit.recipe.pointkind import LOOP, Example, PointKind, Refusal

SOURCE = textwrap.dedent('''\
    class A:
        def run(self, batches, queue):
            for b in batches:
                self.work(b)
            while queue.more():
                self.take(queue)
            else:
                self.done()
            return 1
    ''')


class AfterLoop(PointKind):
    """A kind no module of patchkit/recipe/kinds/ declares: the line after the loop, unless the loop has an else."""

    name = "after_loop"
    summary = "the line after the loop `loop:` selects"
    place = LOOP
    refusals = (Refusal(lambda scan, loop: [loop.node.orelse] if loop.node.orelse else [],
                        "the loop at line {line} of {qualname} has an else block {at}; the line after it would "
                        "follow the else ({scope}, {word})"),)
    VALID = (Example("s", {"at": "after_loop"}, after="t"),)
    INVALID = (Example("s", {"at": "after_loop"}, reason="r"),)

    def find(self, scan, loop):
        return [scan.after(loop)]


@pytest.fixture
def after_loop(monkeypatch):
    kind = AfterLoop()
    monkeypatch.setitem(kinds.KINDS, kind.name, kind)
    return kind


def scan_of(source: str) -> Scan:
    module = cst.parse_module(source)
    positions = Positions(module)
    func, _ = find_function(module, "A", "run", None, positions)
    return Scan(func, "A", "run", positions)


def settings(tmp_path, point):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"id": "t", "description": "t", "backend": "torch",
                                    "target": {"package": "pkg", "files": ["pkg/m.py"]},
                                    "points": [{"class": "A", "method": "run", **point}]}, sort_keys=False))
    return load_recipe(path)


def test_a_kind_put_in_kinds_is_validated_applied_and_refused_by_its_own_words(tmp_path, after_loop):
    done = transform(SOURCE, settings(tmp_path, {"at": "after_loop", "loop": {"iter": "batches"}}))
    assert isinstance(done, Applied)
    lines = done.text.splitlines()
    at = lines.index("            self.work(b)")
    assert lines[at + 1] == '        _patchkit_runtime.step("t")  # patchkit:t'
    refused = transform(SOURCE, settings(tmp_path, {"at": "after_loop", "loop": {"while": "queue.more"}}))
    assert isinstance(refused, CannotApply) and refused.line == 7
    assert refused.reason == ("the loop at line 5 of A.run has an else block at line 7; the line after it would "
                              f"follow the else (method, else), in the point at {tmp_path / 't.yaml'}:9:3")


def test_the_outline_offers_a_kind_where_it_goes_and_says_why_where_it_does_not(after_loop):
    rows = {(e.line, e.kind): e for e in outline(SOURCE, "A.run").entries}
    assert {"at": "after_loop", "loop": {"iter": "batches"}} in rows[3, "loop"].points
    assert "after_loop" not in str(rows[5, "loop"].points)
    assert "no after_loop: the loop at line 5 of A.run has an else block at line 7" in rows[5, "loop"].note


def test_a_refusal_is_formatted_once_with_the_lines_of_what_stops_it(after_loop):
    scan = scan_of(SOURCE)
    first, second = scan.loops
    assert refusal(scan, after_loop, first) is None
    refused = refusal(scan, after_loop, second)
    assert isinstance(refused, NotFound) and refused.line == 7 and "at line 7" in refused.reason
    with pytest.raises(NotFound) as info:
        sites(scan, after_loop, second)
    assert info.value.reason == refused.reason
    (site,) = sites(scan, after_loop, first)
    assert (site.block, site.index) == (first.block, first.index + 1)


def test_the_anchors_are_chosen_by_the_kind_s_place_and_counted(after_loop):
    scan = scan_of(SOURCE)
    assert len(find(scan, Point("A", "run", "method_start"))) == 1
    with pytest.raises(NotFound, match="no loop over nothing in A.run") as info:
        find(scan, Point("A", "run", "after_loop", loop=(LoopSelector(iter="nothing"),)))
    assert info.value.nothing_named
    with pytest.raises(NotFound, match="found 2 statements calling self.work"):
        find(scan_of(SOURCE.replace("self.take(queue)", "self.work(queue)")),
             Point("A", "run", "after_call", call="self.work"))


def test_a_site_in_a_one_line_block_is_refused_for_every_kind(tmp_path):
    source = "class A:\n    def run(self, xs):\n        for x in xs: self.work(x)\n"
    for point in ({"at": "loop_start", "loop": {"iter": "xs"}}, {"at": "after_call", "call": "self.work"}):
        refused = transform(source, settings(tmp_path, point))
        assert refused.reason.startswith("the block at line 3 in A.run is written on one line; patchkit only adds "
                                         "whole lines, in the point at "), point
