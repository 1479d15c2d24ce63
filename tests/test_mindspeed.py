"""The MindSpeed-RL recipes on real git checkouts shaped like each release.

MindSpeed-RL is not on the package registry: users clone it and run it from
the checkout.  Each test copies a tree from ``fixtures/mindspeed-rl-*``
(described in ``fixtures/mindspeed-rl.md``) into a temporary folder, makes it
a git repository with the release's tag or branch, and drives the command
line with ``--root`` at the checkout: diff, apply, placement (checked on the
syntax tree of the patched file), compile, a second apply, revert to the
exact bytes and a clean ``git status``.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import shutil
import subprocess
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchkit import runtime
from patchkit.cli.commands import main

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"

ACTOR = "mindspeed_rl/workers/actor_hybrid_worker.py"
ENGINE = "mindspeed_rl/models/base/base_training_engine.py"
INTEGRATED = "mindspeed_rl/workers/integrated_worker.py"
REF_OLD = "mindspeed_rl/workers/reference_woker.py"
REF_NEW = "mindspeed_rl/workers/reference_worker.py"

# How each checkout is made.  ``version`` is what patchkit must report; ``source`` must be
# named next to it (the tag, or the word "branch" for untagged branches).
RELEASES = {
    # the 2.0.0 preview exists only as a branch
    "2.0.0": dict(branch="2.0.0", tag=None, detach=False, version="2.0.0", source="branch", ref=REF_OLD),
    # `git clone -b v2.1.0` leaves a detached HEAD at the tag
    "2.1.0": dict(branch="main", tag="v2.1.0", detach=True, version="2.1.0", source="v2.1.0", ref=REF_OLD),
    # the tag sits on the release branch of the same name
    "2.2.0": dict(branch="2.2.0", tag="v2.2.0", detach=False, version="2.2.0", source="v2.2.0", ref=REF_NEW),
    # a local work branch made from the tag; setup.py says '2.1.0' (stale)
    "2.3.0": dict(branch="mywork", tag="v2.3.0", detach=False, version="2.3.0", source="v2.3.0", ref=REF_NEW),
    "master": dict(branch="master", tag=None, detach=False, version="master", source="branch", ref=REF_NEW),
}

CASES = {
    "update-mini": ("mindspeed-rl-update", ["granularity=mini"]),
    "update-default": ("mindspeed-rl-update", []),
    "update-micro": ("mindspeed-rl-update", ["granularity=micro"]),
    "logprob-actor": ("mindspeed-rl-logprob", ["role=actor"]),
    "logprob-ref": ("mindspeed-rl-logprob", ["role=ref"]),
    "generate": ("mindspeed-rl-generate", []),
}
RECIPES = ("mindspeed-rl-update", "mindspeed-rl-logprob", "mindspeed-rl-generate")

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "2026-01-12T00:00:00+00:00", "GIT_COMMITTER_DATE": "2026-01-12T00:00:00+00:00",
}


# ---------------------------------------------------------------------------
# helpers


def git(repo: Path, *args: str) -> str:
    env = dict(os.environ, **GIT_ENV)
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false",
                           "-c", "tag.gpgsign=false", "-c", "core.autocrlf=false", "-c", "core.hooksPath=/dev/null",
                           *args], cwd=str(repo), env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def make_checkout(tmp_path: Path, release: str) -> Path:
    """fixtures/mindspeed-rl-<release> as a git repository on the release's tag or branch."""
    spec = RELEASES[release]
    root = tmp_path / "checkout" / "MindSpeed-RL"
    shutil.copytree(FIXTURES / f"mindspeed-rl-{release}", root)
    git(root, "init", "-q", "-b", spec["branch"])
    git(root, "add", "-A")  # a fresh repository holding only the copied tree
    git(root, "commit", "-q", "-m", f"MindSpeed-RL {release}")
    if spec["tag"]:
        git(root, "tag", spec["tag"])
    if spec["detach"]:
        git(root, "checkout", "-q", "--detach", spec["tag"])
    assert git(root, "status", "--porcelain") == ""
    return root


def cli(*args: str, ok: bool = True):
    result = CliRunner().invoke(main, list(args))
    if ok:
        assert result.exit_code == 0, f"patchkit {' '.join(args)} exited {result.exit_code}:\n{result.output}"
    return result


def snapshot(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


def inserted_lines(before: str, after: str):
    """(line number in ``after``, text) of every added line; nothing may be changed or removed."""
    a, b = before.splitlines(), after.splitlines()
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        assert tag in ("equal", "insert"), f"existing lines changed ({tag}): {a[i1:i2]!r} -> {b[j1:j2]!r}"
        if tag == "insert":
            out.extend((j + 1, b[j]) for j in range(j1, j2))
    return out


def cls_def(tree: ast.Module, name: str) -> ast.ClassDef:
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    assert len(found) == 1, f"class {name}"
    return found[0]


def method(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef:
    found = [n for n in cls_def(tree, cls).body if isinstance(n, ast.FunctionDef) and n.name == name]
    assert len(found) == 1, f"{cls}.{name}"
    return found[0]


def nested(fn: ast.FunctionDef, name: str) -> ast.FunctionDef:
    found = [n for n in ast.walk(fn) if isinstance(n, ast.FunctionDef) and n.name == name and n is not fn]
    assert len(found) == 1, f"nested {name} in {fn.name}"
    return found[0]


def span(node) -> range:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return range(first, node.end_lineno + 1)


def bodies(node):
    """Every statement list directly under ``node`` (body, orelse, finalbody, handlers' bodies)."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    for h in getattr(node, "handlers", []) or []:
        yield h.body


def statement_after(fn: ast.AST, pred):
    """The statement right after the one statement in ``fn`` matching ``pred`` (same block)."""
    hits = []
    for node in ast.walk(fn):
        for block in bodies(node):
            for i, stmt in enumerate(block):
                if pred(stmt):
                    hits.append(block[i + 1] if i + 1 < len(block) else None)
    assert len(hits) == 1, f"expected one anchor statement, found {len(hits)}"
    return hits[0]


def enclosing_loops(fn: ast.AST, target: ast.stmt):
    """The loops of ``fn`` whose bodies contain ``target``."""
    return [n for n in ast.walk(fn) if isinstance(n, (ast.For, ast.While))
            and any(target is s for blk in bodies(n) for s in ast.walk(ast.Module(body=blk, type_ignores=[])))]


def src(node) -> str:
    return ast.unparse(node)


def is_assign_of_call(stmt, callee: str) -> bool:
    return isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and src(stmt.value.func) == callee


def parse_line(text: str) -> ast.AST:
    """One inserted line as its own piece of code (a decorator line as an expression)."""
    s = text.strip()
    if s.startswith("@"):
        return ast.parse(s[1:], mode="eval")
    return ast.parse(s)


MS_PROFILER_FUNCS = {"profiler_start", "profiler_step", "get_grpo_profiler"}


def _profiler_name(owner: ast.AST, name: str, reading: bool) -> bool:
    """``self.prof*`` (reading ``self.profiler_config`` is allowed) or ``*_profiler`` on anything."""
    if name.endswith("_profiler"):
        return True
    if isinstance(owner, ast.Name) and owner.id == "self" and name.startswith("prof"):
        return not (name == "profiler_config" and reading)
    return False


def touches_mindspeed_profiler(tree: ast.AST):
    """What in an inserted line assigns, calls or reads MindSpeed-RL's own profiler state."""
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if _profiler_name(node.value, node.attr, isinstance(node.ctx, ast.Load)) or node.attr in MS_PROFILER_FUNCS:
                bad.append(src(node))
        elif isinstance(node, ast.Name) and (node.id.endswith("_profiler") or node.id in MS_PROFILER_FUNCS):
            bad.append(node.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "setattr", "delattr", "getattr", "hasattr") and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and _profiler_name(
                    node.args[0], name.value, node.func.id in ("getattr", "hasattr")):
                bad.append(src(node))
    return bad


def test_the_profiler_touch_check_itself():
    def check(code):
        return touches_mindspeed_profiler(ast.parse(code))

    assert not check('if getattr(getattr(self, "profiler_config", None), "profile", False): pass')
    assert not check("x = self.profiler_config.profile")
    assert check("self.actor_profiler = None") and check("self.prof_iteration += 1")
    assert check("profiler_step(actor_update_profiler)") and check("self.actor_profiler.step()")
    assert check('setattr(self, "profiler_config", None)') and check("self.profiler_config = None")
    assert check('getattr(self, "prof_iteration", 0)') and check("utils.profiler_start(cfg, 'x')")


def within(line: int, *nodes) -> bool:
    return any(line in span(n) for n in nodes)


# ---------------------------------------------------------------------------
# the fixtures keep the shapes the recipes rely on


@pytest.mark.parametrize("release", list(RELEASES))
def test_fixture_tree_has_the_release_shape(release):
    root = FIXTURES / f"mindspeed-rl-{release}"
    spec = RELEASES[release]
    other_ref = REF_OLD if spec["ref"] == REF_NEW else REF_NEW
    assert (root / spec["ref"]).is_file() and not (root / other_ref).exists()
    assert not list(root.glob("*.dist-info")) and not list(root.rglob("*.egg-info"))
    setup = root / "setup.py"
    if release in ("2.3.0", "master"):
        assert "__version = '2.1.0'" in setup.read_text()
    else:
        assert not setup.exists()
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        ast.parse(text, feature_version=(3, 9))
        assert not re.search(r"_pk|patchkit|__PK", text), path

    actor = ast.parse((root / ACTOR).read_text())
    init = method(actor, "ActorHybridWorkerBase", "initialize")
    assert src(init.body[-2]) == "self.actor_profiler = profiler_start(self.profiler_config, self.profiler_config.role)"
    assert src(init.body[-1]) == "MsProbe.config_init(self.msprobe_config)"
    for name in ("update", "generate_sequences", "compute_log_prob"):
        fn = method(actor, "ActorHybridWorkerBase", name)
        assert [src(d) for d in fn.decorator_list] == ["mstx_timer_decorator"], name
        assert not [n for n in ast.walk(fn) if isinstance(n, ast.Return)], name
        loops = [n for n in ast.walk(fn) if isinstance(n, ast.While)]
        assert len(loops) == 1 and src(loops[0].test).startswith("self.all_consumed("), name
    update = method(actor, "ActorHybridWorkerBase", "update")
    assert src(update.body[-1]) == "profiler_step(self.actor_profiler)"
    gen = method(actor, "ActorHybridWorkerBase", "generate_sequences")
    header = src([n for n in ast.walk(gen) if isinstance(n, ast.While)][0].test)
    assert ("is_generate=True" in header) == (release not in ("2.0.0", "2.1.0"))
    vllm_calls = [n for n in ast.walk(gen) if isinstance(n, ast.Call) and src(n.func) == "self.actor_hybrid.generate_sequences"]
    assert len(vllm_calls) == (1 if release in ("2.0.0", "2.1.0") else 0)
    withs = [src(w.items[0].context_expr) for w in ast.walk(gen) if isinstance(w, ast.With)]
    assert withs == (["replace_torch_compile()"] if release == "2.1.0" else [])
    if release not in ("2.0.0", "2.1.0"):
        for helper, n_calls in (("sync_generate_process", 2), ("async_generate_process", 2)):
            fn = method(actor, "ActorHybridWorkerBase", helper)
            calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and src(n.func) == "self.actor_hybrid.generate_sequences"]
            assert len(calls) == n_calls, helper
        returns = [n for n in ast.walk(method(actor, "ActorHybridWorkerBase", "async_generate_process"))
                   if isinstance(n, ast.Return)]
        assert len(returns) == (1 if release == "master" else 0)
    logp = method(actor, "ActorHybridWorkerBase", "compute_log_prob")
    assert statement_after(logp, lambda s: is_assign_of_call(s, "self.actor_hybrid.compute_log_prob")) is not None

    ref = ast.parse((root / spec["ref"]).read_text())
    ref_fn = method(ref, "ReferenceWorkerBase", "compute_ref_log_prob")
    assert statement_after(ref_fn, lambda s: is_assign_of_call(s, "self.reference.compute_log_prob")) is not None

    integ = ast.parse((root / INTEGRATED).read_text())
    iw = cls_def(integ, "IntegratedWorker")
    assert [src(b) for b in iw.bases][:2] == ["ActorHybridWorkerBase", "ReferenceWorkerBase"]
    wrapper = method(integ, "IntegratedWorker", "compute_log_prob")
    assert src(wrapper).count("ActorHybridWorkerBase.compute_log_prob(self)") == 2
    ref_wrapper = method(integ, "IntegratedWorker", "compute_ref_log_prob")
    assert src(ref_wrapper).count("ReferenceWorkerBase.compute_ref_log_prob(self)") == (4 if release == "master" else 2)
    assert ("self.integrated_profiler = profiler_start" in src(iw)) == (release == "2.0.0")

    eng = ast.parse((root / ENGINE).read_text())
    init = method(eng, "BaseTrainingEngine", "__init__")
    assert "self.role = role" in src(init)
    fbb = method(eng, "BaseTrainingEngine", "_forward_backward_batch")
    assert [a.arg for a in fbb.args.args] == ["self", "batch", "forward_only"]
    defs = [n for n in ast.walk(fbb) if isinstance(n, ast.FunctionDef) and n is not fbb]
    assert [d.name for d in defs] == ["forward_step"]
    assert [a.arg for a in defs[0].args.args] == ["batch_iter", "model"]
    used = {n.id for n in ast.walk(defs[0]) if isinstance(n, ast.Name)}
    assert {"forward_only", "self"} <= used
    after_def = fbb.body[fbb.body.index(defs[0]) + 1]
    assert is_assign_of_call(after_def, "self.forward_backward_func")
    upd = method(eng, "BaseTrainingEngine", "update")
    loops = [n for n in ast.walk(upd) if isinstance(n, ast.For)]
    headers = [f"for {src(n.target)} in {src(n.iter)}" for n in loops]
    assert headers.count("for _ in range(self.epochs)") == 1 and headers.count("for mini_batch in mini_batches") == 1
    epochs, mini = loops[headers.index("for _ in range(self.epochs)")], loops[headers.index("for mini_batch in mini_batches")]
    assert epochs.body == [mini]
    assert not [n for n in ast.walk(mini) if isinstance(n, (ast.Continue, ast.Break))]
    body = [src(s) for s in mini.body]
    i = body.index("update_successful, grad_norm, num_zeros_in_grad = self.optimizer.step()")
    assert body[i - 2:i] == ["self.optimizer.zero_grad()", "metric_micro_batch = self._forward_backward_batch(mini_batch)"]
    assert "self.opt_param_scheduler.step(" in body[i + 1]
    fwd = method(eng, "BaseTrainingEngine", "forward")
    assert "self._forward_backward_batch(data, forward_only=True)" in src(fwd)
    names = [n.name for n in cls_def(eng, "BaseTrainingEngine").body if isinstance(n, ast.FunctionDef)]
    assert ("_compute_image_embeds" in names) == (release not in ("2.0.0", "2.1.0"))
    if "_compute_image_embeds" in names:
        nested(method(eng, "BaseTrainingEngine", "_compute_image_embeds"), "forward_step_vit_only")


# ---------------------------------------------------------------------------
# every recipe and option, on every release, through the command line


def expected_files(case: str, release: str):
    ref = RELEASES[release]["ref"]
    return {"update-mini": {ENGINE, ACTOR}, "update-default": {ENGINE, ACTOR}, "update-micro": {ENGINE, ACTOR},
            "logprob-actor": {ACTOR}, "logprob-ref": {ref, ACTOR}, "generate": {ACTOR}}[case]


def check_version_named(output: str, root: Path, release: str):
    """The version patchkit used, and the tag or branch it came from, on one line of the output."""
    spec = RELEASES[release]
    text = output.replace(str(root), "<root>").replace(str(root.resolve()), "<root>")
    bare = re.compile(r"(?<![\w.])" + re.escape(spec["version"]) + r"(?![\w])")
    lines = [ln for ln in text.splitlines() if bare.search(ln) and spec["source"] in ln]
    assert lines, (f"no line names version {spec['version']} together with {spec['source']!r} "
                   f"(git ref of the checkout):\n{text}")
    if release == "2.3.0":
        assert not any("2.1.0" in ln for ln in lines), "the stale setup.py version was reported"


def check_arming_line(tree: ast.Module, lines: dict, rid: str):
    """The end of ActorHybridWorkerBase.initialize turns the capture off while MindSpeed-RL's profiler is on."""
    init = method(tree, "ActorHybridWorkerBase", "initialize")
    tail = [s for s in init.body if s.lineno in lines]
    assert tail, "nothing inserted in ActorHybridWorkerBase.initialize"
    assert init.body[-len(tail):] == tail, "the inserted lines are not the last statements of initialize"
    before = init.body[-len(tail) - 1]
    assert src(before) == "MsProbe.config_init(self.msprobe_config)"
    text = " ".join(lines[s.lineno] for s in tail)
    assert "profiler_config" in text and re.search(r"\bprofile\b", text), text
    assert rid in text, text


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("release", list(RELEASES))
def test_recipe_on_release_checkout(tmp_path, release, case):
    rid, options = CASES[case]
    root = make_checkout(tmp_path, release)
    original = snapshot(root)

    # diff: names the version and where it came from, writes nothing
    shown = cli("diff", rid, *options, "--root", str(root))
    check_version_named(shown.output, root, release)
    assert snapshot(root) == original and git(root, "status", "--porcelain") == ""

    applied = cli("apply", rid, *options, "--root", str(root))
    check_version_named(applied.output, root, release)
    m = re.search(r"traces go to (\S+?);", applied.output)
    assert m, applied.output
    assert not re.match(r"^(\./)?profiler_data(/|$)", m.group(1)), m.group(1)

    status = sorted(git(root, "status", "--porcelain").splitlines())
    assert status == sorted(f" M {f}" for f in expected_files(case, release)), status
    patched = snapshot(root)

    trees, added = {}, {}
    for rel in expected_files(case, release):
        text = patched[rel].decode("utf-8")
        compile(text, rel, "exec", dont_inherit=True)
        trees[rel] = ast.parse(text)
        added[rel] = dict(inserted_lines(original[rel].decode("utf-8"), text))
        assert added[rel], f"nothing inserted in {rel}"
        first = min(no for no, line in added[rel].items() if not line[:1].isspace())
        header = range(first, next(no for no in range(first, first + 100) if no not in added[rel]))
        for no, line in added[rel].items():  # the module header is one block of lines; every other line stands alone
            assert line.rstrip().endswith(f"# patchkit:{rid}"), f"{rel}:{no}: {line}"
            if no not in header:
                piece = parse_line(line)
                assert not touches_mindspeed_profiler(piece), f"{rel}:{no} touches MindSpeed-RL's profiler: {line}"
        block = ast.parse("\n".join(added[rel][no] for no in header))
        assert not touches_mindspeed_profiler(block), f"{rel}: the module header touches MindSpeed-RL's profiler"

    def body_lines(rel):
        """Inserted lines that are not module-level header lines."""
        tree = trees[rel]
        header = {n for stmt in tree.body if not isinstance(stmt, (ast.ClassDef, ast.FunctionDef))
                  for n in range(stmt.lineno, stmt.end_lineno + 1)}
        return {no: t for no, t in added[rel].items() if no not in header}

    # every recipe arms the guard at the end of ActorHybridWorkerBase.initialize
    actor_tree = trees[ACTOR]
    actor_init = method(actor_tree, "ActorHybridWorkerBase", "initialize")
    check_arming_line(actor_tree, added[ACTOR], rid)

    if case in ("update-mini", "update-default", "update-micro"):
        eng = trees[ENGINE]
        upd = method(eng, "BaseTrainingEngine", "update")
        fbb = method(eng, "BaseTrainingEngine", "_forward_backward_batch")
        fstep = nested(fbb, "forward_step")
        lines = body_lines(ENGINE)
        if case == "update-micro":
            first = fstep.body[0]
            assert first.lineno in lines, "the first statement of forward_step is not an inserted line"
            text = lines[first.lineno]
            assert f'_patchkit_runtime.step("{rid}"' in text, text
            assert "forward_only" in text and "self.role" in text and "actor" in text, text
            assert all(within(no, fbb) for no in lines), "inserted outside _forward_backward_batch"
            assert not any(within(no, upd) for no in lines)
            if "_compute_image_embeds" in {n.name for n in cls_def(eng, "BaseTrainingEngine").body
                                           if isinstance(n, ast.FunctionDef)}:
                vit = nested(method(eng, "BaseTrainingEngine", "_compute_image_embeds"), "forward_step_vit_only")
                assert not any(within(no, vit) for no in lines)
        else:
            nxt = statement_after(upd, lambda s: src(s) == "update_successful, grad_norm, num_zeros_in_grad = self.optimizer.step()")
            assert nxt is not None and nxt.lineno in lines, "no line right after the optimizer step"
            text = lines[nxt.lineno]
            assert f'_patchkit_runtime.step("{rid}"' in text, text
            assert "self.role" in text and "actor" in text, text
            loops = enclosing_loops(upd, nxt)
            assert [f"for {src(n.target)} in {src(n.iter)}" for n in loops] == [
                "for _ in range(self.epochs)", "for mini_batch in mini_batches"]
            assert all(within(no, upd) for no in lines), "inserted outside BaseTrainingEngine.update"
        assert not body_lines(ACTOR).keys() - set(range(actor_init.lineno, actor_init.end_lineno + 1))

    elif case == "logprob-actor":
        fn = method(actor_tree, "ActorHybridWorkerBase", "compute_log_prob")
        nxt = statement_after(fn, lambda s: is_assign_of_call(s, "self.actor_hybrid.compute_log_prob"))
        lines = body_lines(ACTOR)
        assert nxt is not None and nxt.lineno in lines, "no line right after self.actor_hybrid.compute_log_prob"
        assert f'_patchkit_runtime.step("{rid}' in lines[nxt.lineno], lines[nxt.lineno]
        assert [type(n).__name__ for n in enclosing_loops(fn, nxt)] == ["While"]
        assert all(within(no, fn, actor_init) for no in lines), "inserted outside compute_log_prob / initialize"

    elif case == "logprob-ref":
        ref = RELEASES[release]["ref"]
        fn = method(trees[ref], "ReferenceWorkerBase", "compute_ref_log_prob")
        nxt = statement_after(fn, lambda s: is_assign_of_call(s, "self.reference.compute_log_prob"))
        lines = body_lines(ref)
        assert nxt is not None and nxt.lineno in lines, "no line right after self.reference.compute_log_prob"
        assert f'_patchkit_runtime.step("{rid}' in lines[nxt.lineno], lines[nxt.lineno]
        assert [type(n).__name__ for n in enclosing_loops(fn, nxt)] == ["While"]
        assert all(within(no, fn) for no in lines), "inserted outside ReferenceWorkerBase.compute_ref_log_prob"
        assert not body_lines(ACTOR).keys() - set(range(actor_init.lineno, actor_init.end_lineno + 1))

    elif case == "generate":
        fn = method(actor_tree, "ActorHybridWorkerBase", "generate_sequences")
        decos = fn.decorator_list
        assert len(decos) == 2 and src(decos[0]) == "mstx_timer_decorator", [src(d) for d in decos]
        exit_deco = decos[1]
        assert isinstance(exit_deco, ast.Call) and src(exit_deco.func) == "_patchkit_runtime.on_exit"
        assert isinstance(exit_deco.args[0], ast.Constant) and exit_deco.args[0].value.startswith(rid)
        assert exit_deco.lineno == fn.lineno - 1 and exit_deco.lineno in added[ACTOR]
        assert decos[0].lineno not in added[ACTOR]
        lines = body_lines(ACTOR)
        assert set(lines) - set(range(actor_init.lineno, actor_init.end_lineno + 1)) == {exit_deco.lineno}

    # a second apply changes nothing
    cli("apply", rid, *options, "--root", str(root))
    assert snapshot(root) == patched

    # revert: the exact bytes, and git sees a clean checkout
    cli("revert", rid)
    assert snapshot(root) == original
    assert git(root, "status", "--porcelain") == ""


def test_recipes_write_traces_outside_mindspeeds_profiler_data():
    for rid in RECIPES:
        out = cli("show", rid).output
        paths = re.findall(r"^\s*(?:profiler\.)?save_path:\s*(\S+)\s*$", out, flags=re.M)
        assert paths, out
        for p in paths:
            norm = os.path.normpath(p)
            assert norm != "profiler_data" and not norm.startswith("profiler_data" + os.sep), (rid, p)


# ---------------------------------------------------------------------------
# the runtime side of the guard




def patchkit_lines(capsys):
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("[patchkit]")]


def test_refuse_keeps_a_recipe_from_starting_and_says_why_once(clean_runtime, capsys):
    reason = "MindSpeed-RL's own profiler is on (profiler_config.profile: true)"
    runtime.refuse("mindspeed-rl-update", reason)
    for _ in range(3):
        runtime.start("mindspeed-rl-update")
        runtime.step("mindspeed-rl-update")
    assert runtime.report() == []
    said = patchkit_lines(capsys)
    assert len(said) == 1 and reason in said[0], said


def split_header(added):
    """``(module header as one block, the other lines stripped)`` from ``inserted_lines``' pairs."""
    lines = dict(added)
    first = min(no for no, t in added if not t.startswith((" ", "\t")))
    header = []
    while first in lines:  # the header's lines are consecutive, and only its first and last start a line
        header.append(lines.pop(first))
        first += 1
    return ["\n".join(header)], [t.strip() for t in lines.values()]


def test_inserted_lines_stay_off_while_mindspeeds_own_profiler_is_on(tmp_path, clean_runtime, capsys):
    """Run the very lines apply wrote (the patched modules import Megatron, so they cannot be imported here)."""
    pytest.importorskip("torch")
    root = make_checkout(tmp_path, "2.3.0")
    before = {rel: (root / rel).read_text() for rel in (ACTOR, ENGINE)}
    traces = tmp_path / "traces"
    cli("apply", "mindspeed-rl-update", "--root", str(root), "--backend", "torch", "profiler.contents=[cpu]",
        "profiler.level=level0", f"profiler.save_path={traces}")
    added = {rel: inserted_lines(before[rel], (root / rel).read_text()) for rel in (ACTOR, ENGINE)}
    cli("revert", "--all")
    capsys.readouterr()

    header, steps = split_header(added[ENGINE])
    _, arming = split_header(added[ACTOR])
    assert header and arming and steps, added

    def run(lines, ns):
        for line in lines:
            exec(compile(line, "<inserted>", "exec"), ns)

    worker = types.SimpleNamespace(profiler_config=types.SimpleNamespace(profile=True, role="integrated"))
    engine = types.SimpleNamespace(role="actor")
    ns = {}
    run(header, ns)
    run(arming, dict(ns, self=worker))
    for _ in range(3):
        run(steps, dict(ns, self=engine))
    assert runtime.report() == []
    said = patchkit_lines(capsys)
    assert len(said) == 1 and "profile" in said[0], said

    # the guard tolerates the separate-worker path (profiler_config None or absent), and a profile that is off
    for cfg in (None, types.SimpleNamespace(profile=False, role="integrated")):
        runtime.reset()
        ns = {}
        run(header, ns)
        run(arming, dict(ns, self=types.SimpleNamespace(profiler_config=cfg)))
        run(arming, dict(ns, self=types.SimpleNamespace()))
        run(steps, dict(ns, self=types.SimpleNamespace(role="critic")))
        assert runtime.report() == [], "a critic engine started the actor's capture"
        run(steps, dict(ns, self=engine))
        rows = runtime.report()
        assert [r["key"] for r in rows] == ["mindspeed-rl-update"] and not rows[0]["error"], rows
