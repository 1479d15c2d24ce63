"""The hand-written trees under fixtures/ keep the shape of the real targets.

patchkit's fast tests run recipes against the small trees in ``fixtures/``
instead of the released wheels.  Those trees are written from scratch, so
nothing stops them drifting away from what the recipes meet in the field.
This module pins them down: for every fixture it extracts, with ``ast``, the
structure that the selectors depend on (classes and bases, method signatures
and decorators, loop headers and what ends their bodies, the statement-level
anchor calls with the blocks that enclose them, return statements, nested
defs) and compares it with the same extraction from the real file of the
mirrored release (fetched by ``tests/realwheels.py``) and with the numbers
from the shared TARGETS.md reference.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import pytest
import yaml

import realwheels

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

# --------------------------------------------------------------------------
# Shape extraction
# --------------------------------------------------------------------------

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _children(node: ast.AST) -> Iterator[ast.AST]:
    """Descendants of ``node`` that belong to its own scope (no nested defs/classes/lambdas)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _SCOPES):
            continue
        yield child
        yield from _children(child)


def _header(node: ast.AST) -> str:
    """One-line, whitespace- and quote-style-independent text of a block header."""
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return "for %s in %s" % (ast.unparse(node.target).strip("()"), ast.unparse(node.iter))
    if isinstance(node, (ast.With, ast.AsyncWith)):
        # Only the managers' callees: the arguments are not part of the shape.
        names = []
        for item in node.items:
            expr = item.context_expr
            names.append(ast.unparse(expr.func) if isinstance(expr, ast.Call) else ast.unparse(expr))
        return "with " + ", ".join(names)
    if isinstance(node, ast.If):
        return "if"
    if isinstance(node, ast.While):
        return "while"
    if isinstance(node, ast.Try):
        return "try"
    return type(node).__name__.lower()


def _summary(stmt: ast.stmt) -> str:
    """What a statement is, for 'last statement of a body' / 'statement before the anchor'."""
    if isinstance(stmt, ast.If):
        return "if " + ast.unparse(stmt.test)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
        return "docstring"
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return "call " + ast.unparse(stmt.value.func)
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return "assign " + ", ".join(ast.unparse(t) for t in targets)
    if isinstance(stmt, ast.Return):
        return "return"
    return _header(stmt)


def _stmt_callee(stmt: ast.stmt) -> Optional[str]:
    """Dotted callee when a statement's value is a call (the anchor form patchkit selects)."""
    value = getattr(stmt, "value", None)
    if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return)):
        if isinstance(value, ast.Await):
            value = value.value
        if isinstance(value, ast.Call):
            return ast.unparse(value.func)
    return None


def _blocks(node: ast.AST) -> Iterator[Tuple[str, List[ast.stmt]]]:
    for field in ("body", "orelse", "finalbody"):
        body = getattr(node, field, None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            yield field, body
    for handler in getattr(node, "handlers", []) or []:
        yield "except", handler.body


class _Stmt(NamedTuple):
    node: ast.stmt
    chain: Tuple[str, ...]  # headers of the enclosing compound statements, outermost first
    prev: Optional[ast.stmt]  # previous statement of the same block


def _walk_stmts(body: Sequence[ast.stmt], chain: Tuple[str, ...] = ()) -> Iterator[_Stmt]:
    prev = None
    for stmt in body:
        yield _Stmt(stmt, chain, prev)
        prev = stmt
        if isinstance(stmt, _SCOPES):
            continue
        for _, block in _blocks(stmt):
            yield from _walk_stmts(block, chain + (_header(stmt),))


def _loop_level_jumps(loop: ast.AST) -> List[str]:
    """continue/break statements that act on ``loop`` itself."""
    out: List[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES + (ast.For, ast.AsyncFor, ast.While)):
                continue
            if isinstance(child, (ast.Continue, ast.Break)):
                out.append(type(child).__name__.lower())
            visit(child)

    for stmt in loop.body:  # type: ignore[attr-defined]
        if isinstance(stmt, (ast.Continue, ast.Break)):
            out.append(type(stmt).__name__.lower())
        elif not isinstance(stmt, _SCOPES + (ast.For, ast.AsyncFor, ast.While)):
            visit(stmt)
    return out


def _assigned_names(stmts: Sequence[ast.stmt]) -> set:
    names = set()
    for stmt in stmts:
        for node in [stmt, *_children(stmt)]:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


def _target_names(target: ast.AST) -> set:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _params(fn: ast.FunctionDef) -> List[str]:
    a = fn.args
    out = [p.arg for p in a.posonlyargs + a.args]
    if a.vararg:
        out.append("*" + a.vararg.arg)
    out += [p.arg for p in a.kwonlyargs]
    if a.kwarg:
        out.append("**" + a.kwarg.arg)
    return out


def parse_file(path: Path) -> ast.Module:
    return ast.parse(path.read_bytes(), filename=str(path))


def find_class(tree: ast.Module, name: str) -> ast.ClassDef:
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    assert len(found) == 1, "expected one top-level class %s, found %d" % (name, len(found))
    return found[0]


def find_method(cls: ast.ClassDef, name: str) -> Optional[ast.FunctionDef]:
    found = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    assert len(found) <= 1
    return found[0] if found else None


def method_shape(fn: ast.FunctionDef) -> Dict[str, object]:
    stmts = list(_walk_stmts(fn.body))
    returns = [s for s in stmts if isinstance(s.node, ast.Return)]
    return {
        "async": isinstance(fn, ast.AsyncFunctionDef),
        "generator": any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _children(fn)),
        "params": _params(fn),
        "decorators": [ast.unparse(d) for d in fn.decorator_list],
        "returns": len(returns),
        "return_chains": [s.chain for s in returns],
        "return_callees": [_stmt_callee(s.node) for s in returns],
        "raises": sum(isinstance(s.node, ast.Raise) for s in stmts),
        "last": _summary(fn.body[-1]),
        "nested_defs": {
            s.node.name: (_params(s.node), sum(isinstance(n, ast.Return) for n in _children(s.node)))
            for s in stmts
            if isinstance(s.node, (ast.FunctionDef, ast.AsyncFunctionDef))
        },
        "_stmts": stmts,
    }


def loop_shape(shape: Dict[str, object], header: str) -> List[Dict[str, object]]:
    out = []
    for s in shape["_stmts"]:  # type: ignore[union-attr]
        if isinstance(s.node, (ast.For, ast.AsyncFor)) and _header(s.node) == header:
            out.append({
                "chain": s.chain,
                "last": _summary(s.node.body[-1]),
                "jumps": _loop_level_jumps(s.node),
                "rebinds_target": bool(_assigned_names(s.node.body) & _target_names(s.node.target)),
            })
    return out


def anchor_shape(shape: Dict[str, object], callee: str) -> List[Dict[str, object]]:
    stmts = shape["_stmts"]
    returns = [s.node.lineno for s in stmts if isinstance(s.node, ast.Return)]  # type: ignore[union-attr]
    out = []
    for s in stmts:  # type: ignore[union-attr]
        if _stmt_callee(s.node) == callee:
            out.append({
                "chain": s.chain,
                "kind": type(s.node).__name__,
                "prev": _summary(s.prev) if s.prev is not None else None,
                "returns_after": sum(line > s.node.lineno for line in returns),
            })
    return out


def method_loops(shape: Dict[str, object]) -> List[str]:
    return [_header(s.node) for s in shape["_stmts"] if isinstance(s.node, (ast.For, ast.AsyncFor))]  # type: ignore[union-attr]


# --------------------------------------------------------------------------
# What each fixture mirrors
# --------------------------------------------------------------------------


class M(NamedTuple):
    """One target method and the parts of its shape that must match."""

    cls: str
    name: str
    returns: Optional[int] = None  # also checked against TARGETS.md
    loops: Tuple[str, ...] = ()  # loop headers compared (count, nesting, last statement, continue/break)
    anchors: Tuple[str, ...] = ()  # statement-level callees compared (count, nesting, previous statement, returns after)
    absent_calls: Tuple[str, ...] = ()  # callees that must not be statement-level calls
    nested: Tuple[str, ...] = ()  # nested defs compared (params, own returns)
    compare_last: bool = True  # compare the method's last statement
    raises: Optional[int] = None


class C(NamedTuple):
    name: str
    methods: Tuple[str, ...] = ()  # must exist (in addition to the M entries)
    absent: Tuple[str, ...] = ()  # must not exist in the class body


class Tree(NamedTuple):
    fixture: str
    dist: str
    version: str  # the release the fixture mirrors
    files: Dict[str, Tuple[object, ...]]  # relpath -> C and M entries
    absent_files: Tuple[str, ...] = ()
    crlf: Tuple[str, ...] = ()  # files deliberately written with CRLF line endings


_GPU_LOG_DP = "GPUMemoryLogger(role='dp actor', logger=logger)"

TREES: Tuple[Tree, ...] = (
    Tree(
        "verl-0.4", "verl", "0.4.1",
        {
            "verl/workers/actor/dp_actor.py": (
                C("DataParallelPPOActor", methods=("_optimizer_step", "_forward_micro_batch")),
                M("DataParallelPPOActor", "compute_log_prob", returns=1,
                  loops=("for micro_batch in micro_batches",), nested=("_get_micro_batches",)),
                M("DataParallelPPOActor", "update_policy", returns=1,
                  loops=("for epoch in range(self.config.ppo_epochs)",
                         "for batch_idx, data in enumerate(dataloader)",
                         "for data in micro_batches"),
                  anchors=("self._optimizer_step", "loss.backward")),
            ),
            "verl/workers/actor/megatron_actor.py": (
                C("MegatronPPOActor"),
                M("MegatronPPOActor", "update_policy", returns=1, raises=1,
                  loops=("for data in dataloader",),
                  anchors=("self.prof.start", "self.prof.step", "self.prof.stop_and_save",
                           "self.actor_optimizer.step", "self.forward_backward_batch")),
                M("MegatronPPOActor", "forward_backward_batch", anchors=("forward_backward_func",),
                  nested=("forward_step",), compare_last=True),
            ),
        },
        absent_files=("verl/workers/engine/base.py",),
    ),
    Tree(
        "verl-0.6", "verl", "0.6.1",
        {
            "verl/workers/actor/dp_actor.py": (
                C("DataParallelPPOActor", methods=("_optimizer_step", "_forward_micro_batch")),
                M("DataParallelPPOActor", "compute_log_prob", returns=1,
                  loops=("for micro_batch in micro_batches",)),
                M("DataParallelPPOActor", "update_policy", returns=1,
                  loops=("for _ in range(self.config.ppo_epochs)",
                         "for batch_idx, mini_batch in enumerate(mini_batches)",
                         "for micro_batch in micro_batches"),
                  anchors=("self._optimizer_step", "loss.backward", "self.scaler.scale(loss).backward")),
            ),
            "verl/workers/actor/megatron_actor.py": (
                C("MegatronPPOActor"),
                M("MegatronPPOActor", "update_policy", returns=1, raises=1,
                  loops=("for data in dataloader",),
                  anchors=("self.prof.start", "self.prof.step", "self.prof.stop_and_save",
                           "self.actor_optimizer.step", "self.forward_backward_batch")),
                M("MegatronPPOActor", "forward_backward_batch", anchors=("forward_backward_func",),
                  nested=("forward_step",)),
            ),
            "verl/workers/engine/base.py": (
                C("BaseEngine", methods=("optimizer_step", "optimizer_zero_grad", "forward_backward_batch")),
                M("BaseEngine", "train_batch", returns=1,
                  anchors=("self.optimizer_step", "self.forward_backward_batch", "self.optimizer_zero_grad")),
                M("BaseEngine", "infer_batch", returns=1, anchors=("self.forward_backward_batch",)),
            ),
            "verl/workers/engine/fsdp/transformer_impl.py": (
                C("FSDPEngine"),
                M("FSDPEngine", "forward_backward_batch", returns=1,
                  loops=("for micro_batch in micro_batches",),
                  anchors=("self.forward_step", "loss.backward")),
            ),
        },
        absent_files=("verl/workers/engine_workers.py",),
    ),
    Tree(
        "verl-0.9", "verl", "0.9.1",
        {
            "verl/workers/engine/base.py": (
                C("BaseEngine", methods=("optimizer_step", "optimizer_zero_grad", "forward_backward_batch")),
                M("BaseEngine", "train_batch", returns=1,
                  anchors=("self.optimizer_step", "self.forward_backward_batch", "self.optimizer_zero_grad")),
                M("BaseEngine", "infer_batch", returns=1, anchors=("self.forward_backward_batch",)),
            ),
            "verl/workers/engine/fsdp/transformer_impl.py": (
                C("FSDPEngine"),
                M("FSDPEngine", "forward_backward_batch", returns=1,
                  loops=("for micro_batch_idx, micro_batch in enumerate(micro_batches)",),
                  anchors=("self.forward_step", "loss.backward", "scaler.scale(loss).backward")),
            ),
            "verl/workers/engine/megatron/transformer_impl.py": (
                C("MegatronEngine"),
                C("MegatronEngineWithLMHead"),
                M("MegatronEngine", "forward_backward_batch", returns=1,
                  loops=("for micro_batch in micro_batches",),
                  anchors=("forward_backward_func", "get_forward_backward_func")),
                M("MegatronEngineWithLMHead", "forward_step", returns=1, compare_last=False),
            ),
            "verl/workers/engine_workers.py": (
                C("TrainingWorker", methods=("train_batch",)),
                M("TrainingWorker", "train_mini_batch", returns=1,
                  loops=("for batch_idx, mini_batch_td in enumerate(dataloader)",),
                  anchors=("self.train_batch", "self.profiler.step")),
            ),
        },
        absent_files=("verl/workers/actor/dp_actor.py", "verl/workers/actor/megatron_actor.py"),
    ),
    Tree(
        "vllm-ascend-0.9.1", "vllm-ascend", "0.9.1",
        {
            "vllm_ascend/worker/worker_v1.py": (
                C("NPUWorker", methods=("init_device", "profile", "_init_profiler")),
                M("NPUWorker", "__init__", returns=0, anchors=("self._init_profiler",)),
                M("NPUWorker", "execute_model", returns=1, anchors=("self.model_runner.execute_model",)),
            ),
            "vllm_ascend/worker/worker.py": (
                C("NPUWorker", methods=("init_device",), absent=("execute_model",)),
                M("NPUWorker", "__init__", returns=0, compare_last=False),
            ),
        },
    ),
    Tree(
        "vllm-ascend-0.11", "vllm-ascend", "0.11.0",
        {
            "vllm_ascend/worker/worker_v1.py": (
                C("NPUWorker", methods=("init_device", "profile", "_init_profiler")),
                M("NPUWorker", "__init__", returns=0, anchors=("self._init_profiler",)),
                M("NPUWorker", "execute_model", returns=4,
                  anchors=("dp.step", "self.model_runner.execute_model")),
            ),
        },
        absent_files=("vllm_ascend/worker/worker.py",),
        crlf=("vllm_ascend/worker/worker_v1.py",),
    ),
    Tree(
        "vllm-ascend-0.23", "vllm-ascend", "0.23.0",
        {
            "vllm_ascend/worker/worker.py": (
                C("NPUWorker", methods=("init_device", "profile", "sample_tokens")),
                M("NPUWorker", "__init__", returns=0, nested=("signal_handler",)),
                M("NPUWorker", "execute_model", returns=4,
                  loops=("for handle in self._pp_send_work",),
                  anchors=("dp.step", "self.profiler.step", "self.model_runner.execute_model")),
            ),
        },
        absent_files=("vllm_ascend/worker/worker_v1.py",),
    ),
    Tree(
        "sglang-0.4.6", "sglang", "0.4.6",
        {
            "sglang/srt/model_executor/model_runner.py": (
                C("ModelRunner", methods=("initialize", "forward_decode", "forward_extend", "forward_idle"),
                  absent=("_forward_raw",)),
                M("ModelRunner", "__init__", returns=0, anchors=("self.initialize",)),
                M("ModelRunner", "forward", returns=4, raises=1,
                  anchors=("self.cuda_graph_runner.replay", "self.forward_decode",
                           "self.forward_extend", "self.forward_idle"),
                  absent_calls=("self._forward_raw",)),
            ),
        },
    ),
    Tree(
        "sglang-0.5.5", "sglang", "0.5.5",
        {
            "sglang/srt/model_executor/model_runner.py": (
                C("ModelRunner", methods=("initialize", "_forward_raw")),
                M("ModelRunner", "__init__", returns=0),
                M("ModelRunner", "forward", returns=1, raises=0,
                  anchors=("self._forward_raw", "self.eplb_manager.on_forward_pass_end")),
            ),
        },
    ),
    Tree(
        "vllm-0.15", "vllm", "0.15.0",
        {
            "vllm/v1/worker/gpu_worker.py": (
                C("Worker", methods=("init_device", "profile", "annotate_profile", "sample_tokens")),
                M("Worker", "__init__", returns=0),
                M("Worker", "execute_model", returns=2, anchors=("self.model_runner.execute_model",)),
            ),
        },
    ),
)

_IDS = [t.fixture for t in TREES]


def _real_file(tree: Tree, relpath: str) -> Path:
    return realwheels.target_path(tree.dist, tree.version, relpath)


def _methods(tree: Tree) -> Iterator[Tuple[str, M]]:
    for relpath, entries in tree.files.items():
        for e in entries:
            if isinstance(e, M):
                yield relpath, e


def _method_params() -> List[object]:
    out = []
    for t in TREES:
        for relpath, m in _methods(t):
            out.append(pytest.param(t, relpath, m, id="%s:%s.%s" % (t.fixture, m.cls, m.name)))
    return out


# --------------------------------------------------------------------------
# The trees themselves
# --------------------------------------------------------------------------


def test_every_fixture_dir_is_described():
    # mindspeed-rl-* are git-checkout trees, not site-packages: fixtures/mindspeed-rl.md
    # describes them and tests/test_mindspeed.py checks them.
    on_disk = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and not p.name.startswith("mindspeed-rl-"))
    assert on_disk == sorted(_IDS)
    checkouts = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and p.name.startswith("mindspeed-rl-"))
    notes = (FIXTURES / "mindspeed-rl.md").read_text()
    for name in checkouts:
        assert name + "/" in notes, "fixtures/mindspeed-rl.md does not describe %s" % name
    readme = (FIXTURES / "README.md").read_text()
    for name in _IDS:
        assert name in readme, "fixtures/README.md does not describe %s" % name


@pytest.mark.parametrize("tree", TREES, ids=_IDS)
def test_tree_is_site_packages_shaped(tree: Tree):
    root = FIXTURES / tree.fixture
    infos = sorted(root.glob("*.dist-info"))
    assert [p.name for p in infos] == [
        "%s-%s.dist-info" % (re.sub(r"[-_.]+", "_", tree.dist), tree.version)
    ]
    meta = (infos[0] / "METADATA").read_text()
    fields = dict(line.split(": ", 1) for line in meta.splitlines() if ": " in line)
    assert fields.get("Metadata-Version") == "2.1"
    assert fields.get("Name") == tree.dist
    assert fields.get("Version") == tree.version

    for relpath in tree.files:
        assert (root / relpath).is_file(), relpath
        parts = Path(relpath).parts
        for i in range(1, len(parts)):
            init = root.joinpath(*parts[:i], "__init__.py")
            assert init.is_file(), "missing %s" % init.relative_to(root)
    for relpath in tree.absent_files:
        assert not (root / relpath).exists(), relpath


@pytest.mark.parametrize("tree", TREES, ids=_IDS)
def test_tree_sources_compile_and_keep_the_text_traps(tree: Tree):
    root = FIXTURES / tree.fixture
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        raw = path.read_bytes()
        compile(raw, rel, "exec", dont_inherit=True)
        ast.parse(raw, filename=rel, feature_version=(3, 9))  # rejects syntax newer than 3.9
        text = raw.decode("utf-8")
        if rel in tree.crlf:
            assert "\r\n" in text and "\n" not in text.replace("\r\n", ""), "%s must be CRLF throughout" % rel
        else:
            assert "\r" not in text, "%s must use LF line endings" % rel
        assert not any(line.startswith("\t") for line in text.splitlines()), (
            "%s is indented with tabs; real targets use spaces" % rel
        )
        # The generated code uses these prefixes; neither the real targets nor fixtures contain them.
        assert not re.search(r"_pk|patchkit|__PK", text), rel


def test_only_one_fixture_file_is_crlf():
    crlf = [t.fixture + "/" + f for t in TREES for f in t.crlf]
    assert crlf == ["vllm-ascend-0.11/vllm_ascend/worker/worker_v1.py"]


# --------------------------------------------------------------------------
# Fixture against the real file
# --------------------------------------------------------------------------


@pytest.mark.parametrize("tree", TREES, ids=_IDS)
def test_classes_match_real(tree: Tree):
    root = FIXTURES / tree.fixture
    for relpath, entries in tree.files.items():
        fix = parse_file(root / relpath)
        real = parse_file(_real_file(tree, relpath))
        for c in (e for e in entries if isinstance(e, C)):
            fc, rc = find_class(fix, c.name), find_class(real, c.name)
            assert [ast.unparse(b) for b in fc.bases] == [ast.unparse(b) for b in rc.bases], c.name
            wanted = set(c.methods) | {m.name for m in entries if isinstance(m, M) and m.cls == c.name}
            for name in sorted(wanted):
                assert find_method(rc, name) is not None, "real %s.%s missing" % (c.name, name)
                assert find_method(fc, name) is not None, "fixture %s.%s missing" % (c.name, name)
            for name in c.absent:
                assert find_method(rc, name) is None, "real %s.%s exists" % (c.name, name)
                assert find_method(fc, name) is None, "fixture %s.%s exists" % (c.name, name)
    for relpath in tree.absent_files:
        assert not (realwheels.release_root(tree.dist, tree.version) / relpath).exists()


@pytest.mark.parametrize("tree,relpath,m", _method_params())
def test_method_shape_matches_real(tree: Tree, relpath: str, m: M):
    fix_fn = find_method(find_class(parse_file(FIXTURES / tree.fixture / relpath), m.cls), m.name)
    real_fn = find_method(find_class(parse_file(_real_file(tree, relpath)), m.cls), m.name)
    assert fix_fn is not None and real_fn is not None
    fix, real = method_shape(fix_fn), method_shape(real_fn)

    for key in ("async", "generator", "params", "decorators", "returns", "return_chains", "return_callees"):
        assert fix[key] == real[key], key
    if m.returns is not None:
        assert real["returns"] == m.returns, "real file disagrees with TARGETS.md"
    if m.raises is not None:
        assert fix["raises"] == real["raises"] == m.raises
    if m.compare_last:
        assert fix["last"] == real["last"]
    for name in m.nested:
        assert name in real["nested_defs"], name
        assert fix["nested_defs"].get(name) == real["nested_defs"][name], name  # type: ignore[union-attr]

    for header in m.loops:
        real_loops = loop_shape(real, header)
        assert real_loops, "real %s.%s has no loop %r" % (m.cls, m.name, header)
        assert loop_shape(fix, header) == real_loops, header
    # Loops the fixture has must appear in the real method in the same order.
    real_order = method_loops(real)
    fix_order = [h for h in method_loops(fix) if h in real_order]
    it = iter(real_order)
    assert all(h in it for h in fix_order), (fix_order, real_order)

    for callee in m.anchors:
        real_anchor = anchor_shape(real, callee)
        assert real_anchor, "real %s.%s has no statement calling %s" % (m.cls, m.name, callee)
        assert anchor_shape(fix, callee) == real_anchor, callee
    for callee in m.absent_calls:
        assert anchor_shape(real, callee) == anchor_shape(fix, callee) == []


# --------------------------------------------------------------------------
# The traps named in TARGETS.md, stated once more in plain terms
# --------------------------------------------------------------------------


def _shape(tree_name: str, relpath: str, cls: str, meth: str, real: bool = False) -> Dict[str, object]:
    tree = next(t for t in TREES if t.fixture == tree_name)
    path = _real_file(tree, relpath) if real else FIXTURES / tree_name / relpath
    fn = find_method(find_class(parse_file(path), cls), meth)
    assert fn is not None
    return method_shape(fn)


@pytest.mark.parametrize("real", [False, True], ids=["fixture", "real"])
def test_traps(real: bool):
    # verl 0.4.1: both update_policy loops are named `data` and rebind it.
    s = _shape("verl-0.4", "verl/workers/actor/dp_actor.py", "DataParallelPPOActor", "update_policy", real)
    assert [x["rebinds_target"] for x in loop_shape(s, "for data in micro_batches")] == [True]
    assert loop_shape(s, "for micro_batch in micro_batches") == []
    # verl 0.4.1 compute_log_prob: the nested helper has its own 4 returns.
    s = _shape("verl-0.4", "verl/workers/actor/dp_actor.py", "DataParallelPPOActor", "compute_log_prob", real)
    assert s["returns"] == 1 and s["nested_defs"]["_get_micro_batches"][1] == 4  # type: ignore[index]
    assert loop_shape(s, "for micro_batch in micro_batches")[0]["last"] == "if calculate_entropy"
    # megatron actor: the built-in profiler already steps at the end of the loop body.
    s = _shape("verl-0.4", "verl/workers/actor/megatron_actor.py", "MegatronPPOActor", "update_policy", real)
    assert loop_shape(s, "for data in dataloader")[0]["last"] == "call self.prof.step"
    s = _shape("verl-0.6", "verl/workers/actor/megatron_actor.py", "MegatronPPOActor", "update_policy", real)
    assert loop_shape(s, "for data in dataloader")[0]["last"] == "if self.use_torch_profiler and self.prof and self.prof.enable"
    # verl 0.9.1: the MegatronEngine micro loop only tags metadata; compute is in forward_backward_func.
    s = _shape("verl-0.9", "verl/workers/engine/megatron/transformer_impl.py", "MegatronEngine", "forward_backward_batch", real)
    assert anchor_shape(s, "forward_backward_func")[0]["chain"] == ()
    # verl 0.9.1 train_mini_batch already steps a profiler right after train_batch.
    s = _shape("verl-0.9", "verl/workers/engine_workers.py", "TrainingWorker", "train_mini_batch", real)
    assert anchor_shape(s, "self.profiler.step")[0]["prev"] == "with torch.profiler.record_function"
    # vllm-ascend 0.11: the anchor comes before all 4 returns; msMonitor's dp.step() is at the top.
    s = _shape("vllm-ascend-0.11", "vllm_ascend/worker/worker_v1.py", "NPUWorker", "execute_model", real)
    assert anchor_shape(s, "self.model_runner.execute_model")[0]["returns_after"] == 4
    assert anchor_shape(s, "dp.step")[0]["chain"] == ("if",)
    # vllm-ascend 0.23: an existing profiler step right before the anchor.
    s = _shape("vllm-ascend-0.23", "vllm_ascend/worker/worker.py", "NPUWorker", "execute_model", real)
    assert anchor_shape(s, "self.model_runner.execute_model")[0]["prev"] == "if self.profiler is not None"
    # ... and __init__ ends in an `if` holding a nested def that raises SystemExit.
    s = _shape("vllm-ascend-0.23", "vllm_ascend/worker/worker.py", "NPUWorker", "__init__", real)
    assert str(s["last"]).startswith("if ") and "signal_handler" in s["nested_defs"]  # type: ignore[operator]
    # sglang 0.4.6: the work happens inside the 4 return expressions, then a raise.
    s = _shape("sglang-0.4.6", "sglang/srt/model_executor/model_runner.py", "ModelRunner", "forward", real)
    assert s["return_callees"] == ["self.cuda_graph_runner.replay", "self.forward_decode", "self.forward_extend", "self.forward_idle"]
    # sglang 0.5.5: a single `return output`, _forward_raw inside a with block.
    s = _shape("sglang-0.5.5", "sglang/srt/model_executor/model_runner.py", "ModelRunner", "forward", real)
    assert s["return_callees"] == [None] and s["last"] == "return"
    assert anchor_shape(s, "self._forward_raw")[0]["chain"] == ("with get_global_expert_distribution_recorder().with_forward_pass",)
    # vLLM 0.15: the anchor is nested in annotate_profile, with one of the 2 returns inside it.
    s = _shape("vllm-0.15", "vllm/v1/worker/gpu_worker.py", "Worker", "execute_model", real)
    assert anchor_shape(s, "self.model_runner.execute_model")[0]["chain"] == ("with self.annotate_profile",)
    assert s["return_chains"] == [("with self.annotate_profile", "if"), ()]
    assert s["decorators"] == ["torch.inference_mode()"]


# --------------------------------------------------------------------------
# The fixtures hold structure, not the projects' code
# --------------------------------------------------------------------------
#
# A fixture keeps the shape the selectors see and nothing else; its bodies are
# placeholders.  So, of its lines, only these may be the same text as a line of
# the real file: signatures (decorators to colon), loop headers, lines calling
# an anchor (a ``call``/``calls`` of a recipe point, or a callee the shape test
# above pins with ``M.anchors``), and the statements that test compares by
# text (a method's or a listed loop's last statement, the statement before a
# listed anchor, a ``with`` around one).  Lines under 25 characters (``else:``,
# ``return output``, ``metrics = {}``) say too little to count.
#
# Beyond those, today's fixture files share no line with their real files but
# two in verl 0.6's megatron_actor.py (the profiler guard that the shape test
# pins at the end of the loop is also written, unpinned, around
# ``self.prof.start()`` and ``self.prof.stop_and_save()``).  MAX_VERBATIM
# leaves room for that and for an idiom any author could write the same way
# (``super().__init__(config)``, a common guard); MAX_RUN keeps out a copied
# block of three lines or more, whatever else the file holds.

RECIPES = Path(__file__).resolve().parent.parent / "recipes"
SHORT = 25
MAX_VERBATIM = 3
MAX_RUN = 2


def _recipe_calls() -> set:
    """The callees recipes select on: ``call`` of a point and ``calls`` of its loop."""
    out = set()
    for path in sorted(RECIPES.glob("*.yaml")):
        for point in yaml.safe_load(path.read_text()).get("points") or []:
            if point.get("call"):
                out.add(point["call"])
            loop = point.get("loop") or []
            for part in loop if isinstance(loop, list) else [loop]:
                if part.get("calls"):
                    out.add(part["calls"])
    return out


def _anchor_calls() -> set:
    return _recipe_calls() | {a for t in TREES for _, m in _methods(t) for a in m.anchors}


def _header_lines(node: ast.AST) -> range:
    """The lines of a statement before its body (decorators and signature, a loop or ``if`` header).

    For a statement without a body, its first line.
    """
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])  # type: ignore[attr-defined]
    body = getattr(node, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
        return range(first, body[0].lineno)
    return range(first, node.lineno + 1)  # type: ignore[attr-defined]


def _walk_nodes(
    body: Sequence[ast.stmt], outer: Tuple[ast.stmt, ...] = ()
) -> Iterator[Tuple[ast.stmt, Tuple[ast.stmt, ...], Optional[ast.stmt]]]:
    """(statement, enclosing compound statements, previous statement of its block), in one scope."""
    prev = None
    for stmt in body:
        yield stmt, outer, prev
        prev = stmt
        if not isinstance(stmt, _SCOPES):
            for _, block in _blocks(stmt):
                yield from _walk_nodes(block, outer + (stmt,))


def _pinned_lines(tree: ast.Module, entries: Sequence[object]) -> set:
    """Lines of the statements the shape test compares by text with the real file."""
    out: set = set()
    for m in entries:
        if not isinstance(m, M):
            continue
        fn = find_method(find_class(tree, m.cls), m.name)
        assert fn is not None
        pinned = [fn.body[-1]] if m.compare_last else []
        for stmt, outer, prev in _walk_nodes(fn.body):
            if isinstance(stmt, (ast.For, ast.AsyncFor)) and _header(stmt) in m.loops:
                pinned.append(stmt.body[-1])
            if _stmt_callee(stmt) in m.anchors:
                pinned += [prev] if prev is not None else []
                pinned += [n for n in outer if isinstance(n, (ast.With, ast.AsyncWith))]
        for node in pinned:
            out.update(_header_lines(node))
    return out


class Verbatim(NamedTuple):
    lines: List[Tuple[int, str]]  # (line number in the fixture, stripped text) of each counted line
    longest_run: int  # most counted lines in a row (blank and comment lines between them do not break a run)


def verbatim_lines(fixture: str, real: str, anchors: set, pinned: set = frozenset()) -> Verbatim:
    """The lines of ``fixture`` that are lines of ``real`` word for word, beyond the structure it exists to keep."""
    real_lines = {line.strip() for line in real.splitlines()}
    tree = ast.parse(fixture)
    kept = set(pinned)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor, ast.While)):
            kept.update(_header_lines(node))
    found, run, longest = [], 0, 0
    for number, line in enumerate(fixture.splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if (len(text) >= SHORT and text in real_lines and number not in kept
                and not any(callee + "(" in text for callee in anchors)):
            found.append((number, text))
            run += 1
            longest = max(longest, run)
        else:
            run = 0
    return Verbatim(found, longest)


def test_verbatim_lines_counts_copied_lines_and_leaves_structure_alone():
    real = (
        "class Worker(Base):\n"
        "    @decorate(role='worker')\n"
        "    def run(self, data, forward_only=False):\n"
        "        batches = self.split_into_batches(data, size=self.batch_size)\n"
        "        for batch in batches:\n"
        "            output = self.model_runner.execute_model(batch)\n"
        "            self.collect_outputs_for_later(output, keep=True)\n"
        "        return self.finish_everything_up(batches)\n"
    )
    fixture = (
        "class Worker(Base):\n"
        "    @decorate(role='worker')\n"
        "    def run(self, data, forward_only=False):\n"
        "        # batches = self.split_into_batches(data, size=self.batch_size)\n"
        "        batches = self.split_into_batches(data, size=self.batch_size)\n"
        "\n"
        "        for batch in batches:\n"
        "            output = self.model_runner.execute_model(batch)\n"
        "            self.collect_outputs_for_later(output, keep=True)\n"
        "        return self.finish_everything_up(batches)\n"
    )
    found = verbatim_lines(fixture, real, {"self.model_runner.execute_model"})
    assert [n for n, _ in found.lines] == [5, 9, 10] and found.longest_run == 2
    assert verbatim_lines(fixture, real, set(), pinned={10}).lines[-1][0] == 9
    written = fixture.replace("self.collect_outputs_for_later(output, keep=True)", "self.placeholder(output)")
    assert [n for n, _ in verbatim_lines(written, real, {"self.model_runner.execute_model"}).lines] == [5, 10]


def _fixture_sources(tree: Tree) -> Iterator[Tuple[str, Path, Path]]:
    """(relpath, fixture file, real file) for each fixture source whose file the release ships."""
    root, real_root = FIXTURES / tree.fixture, realwheels.release_root(tree.dist, tree.version)
    for path in sorted(root.rglob("*.py")):
        relpath = path.relative_to(root).as_posix()
        if (real_root / relpath).is_file():
            yield relpath, path, real_root / relpath


@pytest.mark.parametrize("tree", TREES, ids=_IDS)
def test_fixture_lines_are_not_the_real_files_lines(tree: Tree):
    anchors = _anchor_calls()
    checked = []
    for relpath, path, real in _fixture_sources(tree):
        text = path.read_bytes().decode("utf-8").replace("\r\n", "\n")
        pinned = _pinned_lines(ast.parse(text), tree.files.get(relpath, ()))
        found = verbatim_lines(text, real.read_bytes().decode("utf-8"), anchors, pinned)
        assert len(found.lines) <= MAX_VERBATIM and found.longest_run <= MAX_RUN, (
            "%s/%s has %d lines of the real file beyond its structure (longest run %d); write them in "
            "your own words:\n%s" % (tree.fixture, relpath, len(found.lines), found.longest_run,
                                     "\n".join("  %d: %s" % line for line in found.lines)))
        checked.append(relpath)
    assert set(tree.files) <= set(checked), "every target file is compared"
