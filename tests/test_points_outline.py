"""The outline of a function: every place it offers takes the point it spells, on sources of our own and on
the real target files of released verl and vLLM."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from patchkit.core.model import Applied
from patchkit.engine.codemod import transform
from patchkit.engine.points.lookup import Missing
from patchkit.engine.points.outline import outline, scope_of
from patchkit.recipe.load import load_recipe
from patchkit.authoring.spec import spell

import realwheels

SOURCE = textwrap.dedent('''\
    class Trainer:
        def fit(self, batches):
            """Train."""
            self.model.train()
            for step, batch in enumerate(batches):
                if not batch:
                    continue
                loss = self.forward(batch)
                loss.backward()
            for epoch in range(3):
                with self.timer():
                    self.optimizer.step()
                self.log(epoch)
            def helper():
                return self.forward(None)
            self.log(0)


    def train(model, data):
        while model.wants_more():
            model.fit(data)
        return model.done()
    ''')


def recipe_for(tmp_path, scope, point, name="t"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"id": name, "description": "t", "backend": "torch",
                                    "target": {"package": "pkg", "files": ["pkg/mod.py"]},
                                    "points": [{**scope, **point}]}, sort_keys=False))
    return load_recipe(path)


def every_point(tmp_path, source, qualname):
    """(entry, point, result) for every point the outline offers."""
    found = outline(source, qualname)
    out = []
    for entry in found.entries:
        for point in entry.points:
            out.append((entry, point, transform(source, recipe_for(tmp_path, found.scope, point))))
    return found, out


def test_the_outline_of_a_method_names_its_places_with_the_file_s_lines():
    found = outline(SOURCE, "Trainer.fit")
    assert found.scope == {"class": "Trainer", "method": "fit"}
    rows = [(e.line, e.kind, e.code, [spell(p) for p in e.points][:1], e.note[:20]) for e in found.entries]
    assert rows[:6] == [
        (2, "def", "def fit(self, batches):", ["at: method_start"], ""),
        (4, "call", "    self.model.train()", ["at: after_call call: self.model.train"], ""),
        (5, "loop", "    for step, batch in enumerate(batches):", ["at: before_loop loop: {iter: batches}"], ""),
        (6, "block", "        if not batch:", [], ""),
        (8, "call", "        loss = self.forward(batch)", ["at: after_call call: self.forward"], ""),
        (9, "call", "        loss.backward()", ["at: after_call call: loss.backward"], ""),
    ]
    end_of_first = next(e for e in found.entries if e.code == "(end of the loop at line 5)")
    assert end_of_first.line == 9 and not end_of_first.points and "continue at line 7" in end_of_first.note
    second = next(e for e in found.entries if e.line == 10 and e.kind == "loop")
    assert [spell(p) for p in second.points] == ["at: before_loop loop: {target: epoch}",
                                                 "at: loop_start loop: {target: epoch}"]
    helper = next(e for e in found.entries if e.kind == "nested")
    assert helper.line == 14 and "`nested: helper`" in helper.note
    assert not any(e.line == 15 for e in found.entries)  # a nested function's statements are its own
    log = [e for e in found.entries if e.kind == "call" and "self.log(" in e.code]
    assert [(e.line, e.points) for e in log] == [(13, ()), (16, ())]  # no point picks one of the two alone
    assert log[0].note == log[1].note == ("no point picks this one alone: 2 statements call self.log, at lines 13 "
                                          "and 16; `count: 2` takes them all")
    assert found.entries[-1].kind == "end" and found.entries[-1].points == ({"at": "method_end"},)


def test_a_function_and_its_while_loop_and_its_return():
    found = outline(SOURCE, "train")
    assert found.scope == {"function": "train"}
    loop = next(e for e in found.entries if e.kind == "loop")
    assert spell(loop.points[0]) == "at: before_loop loop: {while: model.wants_more}"
    assert [e.kind for e in found.entries][-2:] == ["return", "end"]
    assert "on_exit" in found.entries[-1].note and not found.entries[-1].points


def test_every_point_offered_resolves_where_it_says(tmp_path):
    for qualname in ("Trainer.fit", "train", "Trainer.fit.helper"):
        found, results = every_point(tmp_path, SOURCE, qualname)
        assert results
        for entry, point, result in results:
            assert isinstance(result, Applied), (qualname, entry, point, result)
            lines = result.text.splitlines()
            if point["at"] in ("after_call", "before_call", "before_loop", "around_call"):
                assert any("patchkit" in ln for ln in lines), point


ONE_LINE = textwrap.dedent('''\
    class C:
        def m(self, data, rows):
            for w in data: self.f(w)
            for r in rows:
                self.f(r)
                self.g(r)
            if data: self.h()
            self.g(data)
    ''')


def test_a_one_line_block_takes_no_point_and_says_why(tmp_path):
    found, results = every_point(tmp_path, ONE_LINE, "C.m")
    for entry, point, result in results:  # every point offered resolves, none is offered into a one-line block
        assert isinstance(result, Applied), (entry, point, result)
    by_line = {(e.line, e.kind): e for e in found.entries}
    assert [spell(p) for p in by_line[3, "loop"].points] == ["at: before_loop loop: {iter: data}"]
    one_line = "the block at line 3 in C.m is written on one line; patchkit only adds whole lines"
    assert by_line[3, "loop"].note == f"no loop_start: {one_line}"  # the finder's own words
    assert by_line[3, "loop_end"].note == f"no loop_end: {one_line}"
    assert not by_line[5, "call"].points and "2 statements call self.f, at lines 3 and 5" in by_line[5, "call"].note
    assert not by_line[6, "call"].points and "self.g, at lines 6 and 8; `count: 2`" in by_line[6, "call"].note
    assert not by_line[7, "call"].points and by_line[7, "call"].note == (
        "no after_call, before_call or around_call: the block at line 7 in C.m is written on one line; "
        "patchkit only adds whole lines")


REPEATED = textwrap.dedent('''\
    class Loop:
        def run(self, batches):
            self.log("start")
            for b in batches:
                self.step(b)
            self.log("middle")
            for b in batches:
                self.step(b)
            self.log("end")
            self.flush()
    ''')


def _own_lines(result) -> list:
    """The insertions of the points (the module header's lines left out)."""
    return [i for i in result.insertions if "_patchkit_runtime." in i.text and not any(
        word in i.text for word in ("import patchkit", ".require(", ".configure(", "_patchkit_runtime = "))]


def test_a_call_made_three_times_offers_no_point_that_takes_all_three_for_one(tmp_path):
    found, results = every_point(tmp_path, REPEATED, "Loop.run")
    logs = [e for e in found.entries if "self.log(" in e.code]
    assert [e.line for e in logs] == [3, 6, 9] and not any(e.points for e in logs)
    assert logs[1].note == ("no point picks this one alone: 3 statements call self.log, at lines 3, 6 and 9; "
                            "`count: 3` takes them all")
    loops = [e for e in found.entries if e.kind == "loop"]
    assert [e.points for e in loops] == [(), ()] and "selects 2 loops, at lines 4 and 7" in loops[0].note
    flush = [spell(p) for e in found.entries if e.line == 10 for p in e.points]
    assert flush[:1] == ["at: after_call call: self.flush"]


@pytest.mark.parametrize("source, qualname", [(SOURCE, "Trainer.fit"), (SOURCE, "train"), (REPEATED, "Loop.run"),
                                              (ONE_LINE, "C.m")], ids=["method", "function", "repeated", "one-line"])
def test_each_point_offered_selects_exactly_the_line_it_is_offered_on(tmp_path, source, qualname):
    """One anchor, so one line (two for a range around a statement), next to the entry's line (a line before a
    statement, the decorator above the def, or after it: within a line of it)."""
    found, results = every_point(tmp_path, source, qualname)
    for entry, point, result in results:
        own = _own_lines(result)
        assert len(own) == (2 if point["at"] == "around_call" else 1), (entry, point, own)
        assert all(entry.line - 1 <= i.index <= entry.line + 1 for i in own), (entry, point, own)


def test_a_refusal_is_said_in_the_outline_in_the_finder_s_own_words(tmp_path):
    source = "class A:\n    async def run(self):\n        await self.work()\n        return 1\n"
    found = outline(source, "A.run")
    for point in ({"at": "on_exit"}, {"at": "method", "action": "range", "name": "run"}, {"at": "method_end"}):
        result = transform(source, recipe_for(tmp_path, found.scope, point))
        reason = result.reason.split(", in the point at ")[0]
        assert f"no {point['at']}: {reason}" in " ".join(e.note for e in found.entries), point


def test_a_misspelt_class_suggests_the_nearest_method_and_says_what_to_type():
    with pytest.raises(Missing) as info:
        outline(SOURCE, "Trainr.fit")
    assert info.value.reason == "no class or function Trainr at the top level of the file"
    assert info.value.hint == ("did you mean `Trainer.fit` (line 2)? write it in the target in place of "
                               "`Trainr.fit`")
    with pytest.raises(Missing) as info:
        outline(SOURCE, "Trainer.fitt")
    assert info.value.hint == "did you mean `Trainer.fit` (line 2)? write it in the target in place of `Trainer.fitt`"
    with pytest.raises(Missing) as info:
        outline(SOURCE, "Trainer.fit.helpr")
    assert info.value.hint.startswith("did you mean `Trainer.fit.helper` (line 14)?")
    with pytest.raises(Missing) as info:
        outline(SOURCE, "evaluate")
    assert info.value.hint == ("the functions here: `Trainer.fit` (line 2), `Trainer.fit.helper` (line 14), `train` "
                               "(line 19); write one of them in the target in place of `evaluate`")
    assert "recipe" not in info.value.hint


def test_the_code_shown_is_the_line_python_counts_form_feeds_and_all():
    source = "import os\n\x0c\nclass D:\n    def m(self):\n        s = 'a\u2028b'\n        self.run()\n"
    rows = [(e.line, e.code) for e in outline(source, "D.m").entries]
    assert rows[:2] == [(4, "def m(self):"), (6, "    self.run()")]


def test_the_qualname_picks_class_function_or_nested():
    import libcst as cst

    module = cst.parse_module(SOURCE)
    assert scope_of(module, "Trainer.fit") == ("Trainer", "fit", None)
    assert scope_of(module, "train.inner") == (None, "train", "inner")
    assert scope_of(module, "Trainer.fit.helper") == ("Trainer", "fit", "helper")
    with pytest.raises(Missing, match="no method fitt"):
        outline(SOURCE, "Trainer.fitt")


REAL = [("verl", "0.7.1", "verl/workers/actor/dp_actor.py", "DataParallelPPOActor.compute_log_prob"),
        ("verl", "0.7.1", "verl/workers/actor/dp_actor.py", "DataParallelPPOActor.update_policy"),
        ("vllm", "0.33.0", "vllm/v1/worker/gpu_worker.py", "Worker.execute_model"),
        ("sglang", "0.5.23", "sglang/srt/model_executor/model_runner.py", "ModelRunner.forward")]


@pytest.mark.parametrize("dist, version, relpath, qualname", REAL, ids=lambda v: str(v))
def test_on_real_releases_every_point_offered_applies(tmp_path, dist, version, relpath, qualname):
    """All the points offered, in one recipe: one transform of the real file (each alone: test above)."""
    source = (realwheels.release_root(dist, version) / relpath).read_text(encoding="utf-8")
    found = outline(source, qualname)
    offered = [p for e in found.entries for p in e.points]
    assert len(offered) > 10
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump({"id": "all", "description": "t", "backend": "torch",
                                    "target": {"package": "pkg", "files": ["pkg/mod.py"]},
                                    "points": [{**found.scope, **p} for p in offered]}, sort_keys=False))
    result = transform(source, load_recipe(path))
    assert isinstance(result, Applied), result
    assert len(result.insertions) > len(offered)
