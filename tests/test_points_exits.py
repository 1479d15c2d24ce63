"""Whether the end of a function's (or a loop's) body is reached (patchkit.engine.points.exits), and what
``patchkit points`` and the engine make of it: a method that returns inside a ``with`` (the shape of a training
step of a well-known trainer, written here) is offered no ``method_end``, the engine refuses one, and the place
every way out reaches (``on_exit``) is offered and applies.  CPython's own compiler, which drops the code no path
reaches, is the judge on generated functions and on every function of the fixture trees."""

from __future__ import annotations

import ast
import dis
import random
import textwrap
import warnings
from pathlib import Path
from typing import Iterator, List

import libcst as cst
import pytest

from patchkit.authoring.spec import spell
from patchkit.core.model import Applied
from patchkit.engine.codemod import transform
from patchkit.engine.points.exits import leaving
from patchkit.engine.points.lookup import Missing
from patchkit.engine.points.outline import outline

from test_points_outline import recipe_for

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

STEP = textwrap.dedent('''\
    class Trainer:
        def training_step(self, model, inputs, num_items=None):
            model.train()
            inputs = self.prepare_inputs(inputs)
            with self.compute_loss_context():
                loss = self.compute_loss(model, inputs, num_items=num_items)
            del inputs
            if self.args.n_gpu > 1:
                loss = loss.mean()
            with self.accelerator.accumulate(model):
                self.accelerator.backward(loss)
                return loss.detach()

        def guarded_step(self, model, inputs):
            try:
                with self.autocast():
                    loss = self.compute_loss(model, inputs)
                return loss
            except RuntimeError as exc:
                raise ValueError(str(exc)) from exc
            finally:
                self.cleanup()

        def chosen_step(self, model, inputs):
            if self.mode == "eval":
                with self.no_grad():
                    return self.evaluate(model, inputs)
            else:
                with self.accelerator.accumulate(model):
                    return self.train_one(model, inputs)

        def polling_step(self, queue):
            while True:
                batch = queue.get()
                if batch is None:
                    return self.flush()
                self.consume(batch)

        def falls_through(self, model, inputs):
            with self.accelerator.accumulate(model):
                if inputs is None:
                    return None
                self.accelerator.backward(self.compute_loss(model, inputs))
            self.after_step()
    ''')


def end_of(qualname: str):
    return next(e for e in outline(STEP, qualname).entries if e.kind == "end")


@pytest.mark.parametrize("method, leaves", [
    ("training_step", "a return at line 12"), ("guarded_step", "a return or raise at lines 18 and 20"),
    ("chosen_step", "a return at lines 27 and 30"),
    ("polling_step", "a `while True:` loop that no break leaves at line 33")])
def test_a_step_that_returns_inside_a_block_is_offered_no_end_and_the_engine_refuses_one(tmp_path, method, leaves):
    end = end_of(f"Trainer.{method}")
    assert end.points == () and end.note == (
        f"no method_end: Trainer.{method} ends with {leaves}; the end of the method is never reached there (use "
        "`at: on_exit` to step on every way out)")
    scope = {"class": "Trainer", "method": method}
    refused = transform(STEP, recipe_for(tmp_path, scope, {"at": "method_end"}))
    assert not isinstance(refused, Applied) and f"ends with {leaves}" in refused.reason
    reached = transform(STEP, recipe_for(tmp_path, scope, {"at": "on_exit"}))  # the place every way out reaches
    assert isinstance(reached, Applied)
    assert "at: on_exit" in [spell(p) for e in outline(STEP, f"Trainer.{method}").entries if e.kind == "def"
                             for p in e.points]


def test_a_step_a_path_falls_through_keeps_its_end(tmp_path):
    end = end_of("Trainer.falls_through")
    assert end.points == ({"at": "method_end"},) and end.note == ""
    done = transform(STEP, recipe_for(tmp_path, {"class": "Trainer", "method": "falls_through"}, {"at": "method_end"}))
    assert isinstance(done, Applied)
    lines = done.text.splitlines()
    assert lines[lines.index("        self.after_step()") + 1].strip().startswith("_patchkit_runtime.step(")


def test_where_no_decorator_goes_either_the_end_says_why():
    source = "class A:\n    def rows(self, xs):\n        for x in xs:\n            yield x\n" \
             "        with self.lock():\n            return None\n"
    note = next(e for e in outline(source, "A.rows").entries if e.kind == "end").note
    assert note.startswith("no method_end: A.rows ends with a return at line 6")
    assert "; no on_exit either: A.rows is a generator (yield at line 4)" in note


# ---------------------------------------------------------------- CPython's compiler as the judge

MARK = "__patchkit_end_mark__"
START = "__patchkit_start_mark__"  # a loop no path reaches is not asked about


def compiler_reaches(tree: ast.Module, mark: str = MARK) -> bool:
    """Whether CPython keeps the call of ``mark``: its compiler drops the code no path reaches."""
    def codes(code) -> Iterator:
        yield code
        for const in code.co_consts:
            if hasattr(const, "co_code"):
                yield from codes(const)
    with warnings.catch_warnings():  # 3.14 warns of a return in a finally (PEP 765): generated ones have some
        warnings.simplefilter("ignore", SyntaxWarning)
        module = compile(tree, "<t>", "exec")
    return any(i.argval == mark for c in codes(module) for i in dis.get_instructions(c))


def _block(rng: random.Random, depth: int, in_loop: bool, pad: str) -> List[str]:
    out: List[str] = []
    for _ in range(rng.randint(1, 3)):
        kinds = ["call", "call", "return", "raise"] + (["break", "continue"] if in_loop else [])
        kinds += ["if", "if", "try", "while", "for", "match"] if depth else []
        kind = rng.choice(kinds)
        inner = pad + "    "
        if kind == "call":
            out.append(f"{pad}f()")
        elif kind in ("return", "raise", "break", "continue"):
            out.append(pad + {"return": "return 1", "raise": "raise E"}.get(kind, kind))
        elif kind == "if":
            out += [f"{pad}if c():"] + _block(rng, depth - 1, in_loop, inner)
            if rng.random() < 0.4:
                out += [f"{pad}elif d():"] + _block(rng, depth - 1, in_loop, inner)
            if rng.random() < 0.6:
                out += [f"{pad}else:"] + _block(rng, depth - 1, in_loop, inner)
        elif kind == "try":
            out += [f"{pad}try:"] + _block(rng, depth - 1, in_loop, inner)
            handlers = rng.randint(0, 2)
            for _ in range(handlers):
                out += [f"{pad}except E:"] + _block(rng, depth - 1, in_loop, inner)
            if handlers and rng.random() < 0.3:
                out += [f"{pad}else:"] + _block(rng, depth - 1, in_loop, inner)
            if not handlers or rng.random() < 0.3:
                out += [f"{pad}finally:"] + _block(rng, depth - 1, False, inner)  # no break in a finally
        elif kind == "while":
            out += [f"{pad}while {rng.choice(['True', '1', 'c()'])}:"] + _block(rng, depth - 1, True, inner)
        elif kind == "for":
            out += [f"{pad}for y in x:"] + _block(rng, depth - 1, True, inner)
            if rng.random() < 0.4:
                out += [f"{pad}else:"] + _block(rng, depth - 1, in_loop, inner)
        else:
            out += [f"{pad}match x:", f"{inner}case 1:"] + _block(rng, depth - 1, in_loop, inner + "    ")
            if rng.random() < 0.6:
                out += [f"{inner}case {rng.choice(['_', 'z'])}:"] + _block(rng, depth - 1, in_loop, inner + "    ")
    return out


def _generated(count: int = 1000) -> Iterator[str]:
    rng = random.Random(38)
    for _ in range(count):
        yield "\n".join(["def g(x):"] + _block(rng, 3, False, "    ")) + "\n"


def _marked(source: str, loop: bool) -> ast.Module:
    """The function with the mark after its body's last statement (``loop``: after the last statement of the loop on
    the first line, and START before its first)."""
    tree = ast.parse(source)
    body = tree.body[0].body
    if loop:
        body = min((n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))), key=lambda n: n.lineno).body
        body.insert(0, ast.Expr(ast.Call(ast.Name(START, ast.Load()), [], [])))
    body.append(ast.Expr(ast.Call(ast.Name(MARK, ast.Load()), [], [])))
    return ast.fix_missing_locations(tree)


def test_the_end_of_a_function_is_reached_exactly_where_the_compiler_keeps_it():
    disagree = []
    for source in _generated():
        func = cst.parse_module(source).body[0]
        ours = not leaving(func.body)
        if ours != compiler_reaches(_marked(source, loop=False)):
            disagree.append(source)
    assert not disagree, disagree[:3]


def test_the_end_of_a_loop_s_body_is_reached_exactly_where_the_compiler_keeps_it():
    checked, disagree = 0, []
    for source in _generated(1500):
        module = cst.parse_module(source)
        loops = [n for n in _statements(module) if isinstance(n, (cst.For, cst.While))]
        if not loops:
            continue
        checked += 1
        marked = _marked(source, loop=True)
        if not compiler_reaches(marked, START):
            continue
        ours = not leaving(loops[0].body, ("return", "raise", "break", "continue"))
        if ours != compiler_reaches(marked):
            disagree.append(source)
    assert checked > 100 and not disagree, disagree[:3]


def _statements(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every statement, in the order of the source (the first loop is the one on the first line)."""
    yield node
    for child in node.children:
        if not isinstance(child, cst.BaseExpression):
            yield from _statements(child)


def test_a_return_inside_a_with_counts_though_the_compiler_keeps_the_end_for_a_swallowing_manager():
    """The one place the answer leans to "never reached": only a context manager that swallows an exception
    raised in its block would carry on past it."""
    source = "def g(x):\n    with m():\n        return x.detach()\n"
    assert compiler_reaches(_marked(source, loop=False))
    assert [type(n).__name__ for n in leaving(cst.parse_module(source).body[0].body)] == ["Return"]


def _functions() -> Iterator[tuple]:
    for path in sorted(FIXTURES.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        for top in tree.body:
            owner = top.name if isinstance(top, ast.ClassDef) else None
            for node in top.body if owner else [top]:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield path, source, f"{owner}.{node.name}" if owner else node.name, node


def test_every_function_of_the_fixture_trees_is_offered_its_end_only_where_a_path_reaches_it():
    offered = refused = 0
    for path, source, qualname, node in _functions():
        try:
            end = next(e for e in outline(source, qualname).entries if e.kind == "end")
        except Missing:  # a name defined twice in the file (a property's setter): the outline refuses it
            continue
        tree = ast.parse(source)
        target = next(n for n in ast.walk(tree) if isinstance(n, type(node)) and n.lineno == node.lineno)
        target.body.append(ast.Expr(ast.Call(ast.Name(MARK, ast.Load()), [], [])))
        reaches = compiler_reaches(ast.fix_missing_locations(tree))
        if end.points:
            offered += 1
            assert reaches, f"{path}: {qualname} is offered method_end, which no path reaches"
        elif "never reached" in end.note:
            refused += 1
            assert not reaches or "with" in ast.unparse(node), (path, qualname, end.note)
    assert offered > 100 and refused > 50, (offered, refused)  # 119 and 75 when written
