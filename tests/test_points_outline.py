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
    log = [e for e in found.entries if e.points and e.points[0].get("call") == "self.log"]
    assert [e.line for e in log] == [13, 16] and log[0].points[0]["count"] == 2
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
    assert "body on its header's line" in by_line[3, "loop_end"].note
    assert not by_line[5, "call"].points and "self.f is called in a one-line block at line 3" in by_line[5, "call"].note
    assert [spell(p) for p in by_line[6, "call"].points][:1] == ["at: after_call call: self.g count: 2"]
    assert not by_line[7, "call"].points and "line 7" in by_line[7, "call"].note


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
