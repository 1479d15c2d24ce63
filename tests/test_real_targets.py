"""Every built-in recipe on the real target files of every release it supports.

The files come from the released wheels (tests/realwheels.py downloads them
once into a cache outside the repository).  For each pair: the recipe
applies, the lines land where they should, the file compiles, a second
apply changes nothing, and revert gives back the exact bytes.  Releases
outside a recipe's range are refused with the version, the range and,
where one exists, the recipe to use instead.
"""

from __future__ import annotations

import ast
import shutil

import pytest
from packaging.version import Version

import patchkit
from patchkit.core.errors import AnchorError, TargetError
from patchkit.recipe.versions import beyond, covers
from patchkit.state.ledger import Ledger

import realwheels
from conftest import snapshot

PAIRS = []  # the releases each recipe is proven on: the tests apply it there
OUTSIDE = []  # older than its range: refused
BEYOND = []  # newer than its range: patched where every point fits, else refused naming the recipe for it
for _s in patchkit.all_recipes():
    _t = _s.recipe.target
    for _rel in realwheels.releases():
        if _rel.dist.replace("_", "-") != _t.distribution:
            continue
        where = PAIRS if covers(_t.versions, _rel.version) else BEYOND if beyond(_t.versions, _rel.version) else OUTSIDE
        where.append((_s.id, _rel.dist, _rel.version))

# what each recipe's step line must follow or end, checked on the patched file's syntax tree
OPTIONS = {"verl-fsdp-update": ["granularity=mini", "granularity=micro"], "verl-fsdp-logprob": ["role=all", "role=ref"],
           "verl-fsdp-critic-update": ["granularity=mini", "granularity=micro"],
           "verl-megatron-logprob": ["role=all", "role=ref"],
           "verl-engine-update": ["granularity=mini", "granularity=micro", "granularity=mini role=all"]}


def _root(tmp_path, dist, version):
    dest = tmp_path / f"{dist}-{version}"
    shutil.copytree(realwheels.release_root(dist, version), dest)
    return dest


def _is_call(stmt):
    return isinstance(stmt, ast.Expr) and ast.unparse(stmt).startswith("_patchkit_runtime.")


def _is_guarded_call(stmt):
    """``_patchkit_runtime.step(key, lambda: GUARD)``: the guard is a lambda the runtime calls (false if it raises)."""
    return _is_call(stmt) and bool(stmt.value.args) and isinstance(stmt.value.args[-1], ast.Lambda)


def _guard(stmt):
    assert _is_guarded_call(stmt), ast.unparse(stmt)
    return stmt.value.args[-1].body


def _patchkit_calls(node):
    """(statement, its block, index, owner) for every inserted line in ``node``, in source order."""
    found = []
    for parent in ast.walk(node):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list):
                found += [(stmt, block, i, parent) for i, stmt in enumerate(block) if _is_call(stmt)]
    return sorted(found, key=lambda f: f[0].lineno)


def _method(tree, cls, name):
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _check_placement(recipe_id, option, tree):
    calls = lambda m: _patchkit_calls(m)  # noqa: E731
    if recipe_id == "vllm-ascend-decode":
        m = _method(tree, "NPUWorker", "execute_model")
        (start, b1, i1, _), (step, b2, i2, _) = calls(m)
        assert "start" in ast.unparse(start) and b1 is b2 and i2 == i1 + 2
        assert "self.model_runner.execute_model" in ast.unparse(b1[i1 + 1])
    elif recipe_id == "sglang-forward":
        m = _method(tree, "ModelRunner", "forward")
        deco = ast.unparse(m.decorator_list[-1])
        assert deco.startswith("_patchkit_runtime.on_exit('sglang-forward'") and "not self.is_draft_worker" in deco
        assert calls(m) == []
    elif recipe_id == "verl-fsdp-logprob":
        m = _method(tree, "DataParallelPPOActor", "compute_log_prob")
        (start, b1, i1, _), (step, b2, i2, loop) = calls(m)
        assert isinstance(b1[i1 + 1], ast.For) and b1[i1 + 1] is loop
        assert ast.unparse(loop.iter) == "micro_batches" and b2 is loop.body and i2 == len(loop.body) - 1
        if option == "role=ref":
            assert ast.unparse(_guard(step)) == "self.actor_optimizer is None"
    elif recipe_id == "verl-fsdp-update":
        m = _method(tree, "DataParallelPPOActor", "update_policy")
        (start, b1, i1, owner), (step, b2, i2, loop) = calls(m)
        assert owner is m and i1 in (0, 1)
        if option == "granularity=mini":
            assert ast.unparse(b2[i2 - 1]).endswith("self._optimizer_step()")
        else:
            assert ast.unparse(loop.iter) == "micro_batches" and i2 == len(loop.body) - 1
    elif recipe_id == "verl-megatron-update":
        m = _method(tree, "MegatronPPOActor", "update_policy")
        (start, b1, i1, owner), (step, b2, i2, loop) = calls(m)
        assert owner is m and ast.unparse(loop.iter) == "dataloader" and i2 == len(loop.body) - 1
    elif recipe_id == "verl-engine-update":
        if option.startswith("granularity=mini"):
            m = _method(tree, "BaseEngine", "train_batch")
            (start, b1, i1, owner), (step, b2, i2, _) = calls(m)
            assert owner is m and ast.unparse(b2[i2 - 1]).endswith("self.optimizer_step()")
            assert ("verl-engine-update/critic" in ast.unparse(step)) == ("role=all" in option)
        else:
            m = _method(tree, "FSDPEngine", "forward_backward_batch")
            (start, b1, i1, _), (step, b2, i2, loop) = calls(m)
            assert b1[i1 + 1] is loop and "micro_batches" in ast.unparse(loop.iter) and i2 == len(loop.body) - 1
            assert ast.unparse(_guard(step)).startswith("not forward_only and")
    elif recipe_id == "verl-fsdp-critic-update":
        m = _method(tree, "DataParallelPPOCritic", "update_critic")
        (start, b1, i1, owner), (step, b2, i2, loop) = calls(m)
        assert owner is m and i1 == 0
        if option == "granularity=mini":
            assert ast.unparse(b2[i2 - 1]).endswith("self._optimizer_step()")
        else:
            assert ast.unparse(loop.iter) == "micro_batches" and i2 == len(loop.body) - 1
            assert any("backward()" in ast.unparse(stmt) for stmt in loop.body)
    elif recipe_id == "verl-reward-model":
        m = _method(tree, "RewardModelWorker", "compute_rm_score")
        (start, b1, i1, _), (step, b2, i2, loop) = calls(m)
        assert b1[i1 + 1] is loop and ast.unparse(loop.iter) == "micro_batches" and i2 == len(loop.body) - 1
        assert "self._forward_micro_batch(micro_batch)" in ast.unparse(loop.body[0])
    elif recipe_id == "verl-megatron-logprob":
        m = _method(tree, "MegatronPPOActor", "compute_log_prob")
        (start, b1, i1, _), (step, b2, i2, _) = calls(m)
        assert b1 is b2 and i2 == i1 + 2
        call = ast.unparse(b1[i1 + 1])
        assert call.startswith("output = self.forward_backward_batch(") and "forward_only=True" in call
        if option == "role=ref":
            assert ast.unparse(_guard(step)) == "self.actor_optimizer is None"
    elif recipe_id == "vllm-decode":
        m = _method(tree, "Worker", "execute_model")
        (start, b1, i1, _), (step, b2, i2, _) = calls(m)
        assert b1 is b2 and i2 == i1 + 2 and "self.model_runner.execute_model" in ast.unparse(b1[i1 + 1])
    else:  # a recipe added without a placement check here
        raise AssertionError(f"add a placement check for {recipe_id}")


def _applies_in_place_and_reverts(tmp_path, recipe_id, dist, version, **checks):
    for option in OPTIONS.get(recipe_id, [""]):
        root = _root(tmp_path / option.replace("=", "-").replace(" ", "_") if option else tmp_path, dist, version)
        before = snapshot(root)
        ledger = Ledger(tmp_path / "state")
        settings = patchkit.load(recipe_id, option.split())
        outcomes = patchkit.apply(settings, str(root), ledger=ledger, **checks)
        assert [o.state for o in outcomes] == ["patched"]
        path = outcomes[0].path
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        compile(text, str(path), "exec")
        added = set(text.splitlines()) - set(before[outcomes[0].relpath].decode().splitlines())
        assert added and all(f"# patchkit:{recipe_id}" in line for line in added)
        _check_placement(recipe_id, option, tree)
        assert [o.state for o in patchkit.apply(settings, str(root), ledger=ledger, **checks)] == ["already applied"]
        patchkit.revert([recipe_id], ledger=ledger)
        assert snapshot(root) == before


@pytest.mark.parametrize("recipe_id,dist,version", PAIRS, ids=[f"{r}@{v}" for r, d, v in PAIRS])
def test_recipe_applies_in_place_and_reverts_exactly(tmp_path, recipe_id, dist, version):
    _applies_in_place_and_reverts(tmp_path, recipe_id, dist, version)


@pytest.mark.parametrize("recipe_id,dist,version", OUTSIDE, ids=[f"{r}@{v}" for r, d, v in OUTSIDE])
def test_recipe_refuses_releases_older_than_its_range(tmp_path, recipe_id, dist, version):
    root = _root(tmp_path, dist, version)
    settings = patchkit.load(recipe_id)
    with pytest.raises(TargetError) as info:
        patchkit.plan(settings, str(root))
    message = info.value.render()
    assert f"{settings.recipe.target.distribution} {version} is installed" in message
    assert settings.recipe.target.versions in message
    # the hint offers exactly the built-in recipes for this distribution whose range takes the version
    taking = {s.id for s in patchkit.all_recipes() if s.id != recipe_id and s.recipe.target.distribution ==
              settings.recipe.target.distribution and covers(s.recipe.target.versions, version)}
    offered = {s.id for s in patchkit.all_recipes() if f"{s.id} ({settings.recipe.target.distribution} " in info.value.hint}
    assert offered == taking, (offered, taking)
    instead = settings.recipe.target.instead
    if instead in taking:
        assert f"use {instead} (" in info.value.hint
    if not taking:
        assert f"no built-in recipe covers {settings.recipe.target.distribution} {version}" in info.value.hint
    assert "--skip-version-check" in info.value.hint and "no release tag" not in message
    # not the version alone: what the structure gives there, the point that does not resolve or that all do
    assert ("; nor does its structure fit: " in message) != (f"every point of {recipe_id} resolves" in info.value.hint)


@pytest.mark.parametrize("recipe_id,dist,version", BEYOND, ids=[f"{r}@{v}" for r, d, v in BEYOND])
def test_a_release_past_the_range_is_patched_by_its_structure_or_refused_naming_the_recipe_for_it(tmp_path, recipe_id,
                                                                                                  dist, version):
    """What the recipe's own range does not prove: the same lines as with the check skipped and a note, or the
    release's layout refused naming a recipe that is proven there and names none back."""
    root = _root(tmp_path, dist, version)
    settings = patchkit.load(recipe_id)
    try:
        plan = patchkit.plan(settings, str(root))
    except AnchorError as exc:  # a point does not fit: refused where it is, saying the version is past the range
        assert exc.where.path.startswith(str(root.resolve()))
        assert f"({dist} {version}; {recipe_id} is proven on {settings.recipe.target.versions})" in exc.message
        return
    except TargetError as exc:
        target = settings.recipe.target
        if target.excluded and covers(target.excluded, version):
            assert exc.message.startswith(f"{recipe_id} excludes {dist} {target.excluded}")
            assert target.excluded_reason in exc.message
            return
        assert "none of the recipe's files is in" in exc.message and f"({dist} {version})" in exc.message
        if not target.instead:  # no built-in recipe covers what replaced it (verl's reward loop)
            return
        assert exc.hint.startswith(f"use {target.instead} (")
        other = patchkit.plan(patchkit.load(target.instead), str(root))  # proven there: no note, no hint back
        assert other.version_note == "" and other.files and not patchkit.load(target.instead).recipe.target.instead
        return
    skipped = patchkit.plan(settings, str(root), skip_version_check=True, strict_versions=True)
    assert plan.diff() == skipped.diff() and plan.diff()
    assert plan.version_note.startswith(f"{dist} {version} is newer than the releases {recipe_id} is proven on")
    _applies_in_place_and_reverts(tmp_path / "placed", recipe_id, dist, version)  # where the proven releases have them


def _newest_proven():
    """Each recipe with the newest release it is proven on, and the range it had the day before that release."""
    out = []
    for s in patchkit.all_recipes():
        mine = sorted((v for r, d, v in PAIRS if r == s.id), key=Version)
        if mine:
            earlier = [v for v in mine if Version(v) < Version(mine[-1])]
            low = s.recipe.target.versions.split(",")[0]
            out.append((s.id, mine[-1], f"{low},<={earlier[-1]}" if earlier else f"{low},<{mine[-1]}"))
    return out


@pytest.mark.parametrize("recipe_id,version,day_before", _newest_proven(), ids=[r for r, v, d in _newest_proven()])
def test_the_release_that_came_out_this_morning_is_patched_as_with_the_check_skipped_and_says_so(
        tmp_path, recipe_id, version, day_before):
    """Every recipe on the newest release of its target, with the range it had before that release was proven: the
    diff exits 0, says once that the version is past the range, and inserts the lines --skip-version-check did."""
    from click.testing import CliRunner

    from patchkit.cli.commands import main

    dist = patchkit.load(recipe_id).recipe.target.distribution
    root = _root(tmp_path, dist, version)
    mine = _narrowed(tmp_path, recipe_id, day_before)
    before = snapshot(root)
    shown = CliRunner().invoke(main, ["diff", str(mine), "--root", str(root)])
    assert shown.exit_code == 0, shown.output
    said = f"note: {dist} {version} is newer than the releases {recipe_id} is proven on ({day_before}"
    assert shown.stderr.count(said) == 1, shown.stderr
    skipped = CliRunner().invoke(main, ["diff", str(mine), "--root", str(root), "--skip-version-check",
                                        "--strict-versions"])
    assert skipped.exit_code == 0 and shown.stdout == skipped.stdout and "+++ b/" in shown.stdout
    strict = CliRunner().invoke(main, ["diff", str(mine), "--root", str(root), "--strict-versions"])
    assert strict.exit_code == 1 and "only releases it is proven on" in strict.stderr
    assert snapshot(root) == before


def _narrowed(tmp_path, recipe_id, versions, files=None):
    """A copy of a built-in recipe with another range (and candidate files), as a user would adapt one."""
    text = (patchkit.recipe_path(recipe_id)).read_text()
    old = patchkit.load(recipe_id).recipe.target.versions
    text = text.replace(f'versions: "{old}"', f'versions: "{versions}"')
    if files:
        head, sep, rest = text.partition("  files:\n")
        rest = rest[rest.index("backend:"):]
        text = head + sep + "".join(f"    - {f}\n" for f in files) + rest
    path = tmp_path / "mine" / f"{recipe_id}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    assert patchkit.load(str(path)).recipe.target.versions == versions
    return path


def test_instead_is_offered_only_when_its_range_takes_the_version(tmp_path):
    """verl 0.4.1 is too old for verl-engine-update (0.6 and later): a recipe naming it as `instead` must not offer it."""
    root = _root(tmp_path, "verl", "0.4.1")
    mine = _narrowed(tmp_path, "verl-fsdp-update", ">=0.5,<0.8")
    assert patchkit.load(str(mine)).recipe.target.instead == "verl-engine-update"
    with pytest.raises(TargetError) as info:
        patchkit.plan(patchkit.load(str(mine)), str(root))
    hint = info.value.hint
    assert "verl-engine-update" not in hint
    assert ("built-in recipes for verl 0.4.1: verl-fsdp-critic-update (verl >=0.3,<=0.7.1), verl-fsdp-logprob (verl "
            ">=0.4,<=0.7.1), verl-megatron-logprob (verl >=0.4,<=0.7.1), verl-megatron-update") in hint
    root = _root(tmp_path / "new", "verl", "0.8.0")  # and where it does take the version, it comes first
    with pytest.raises(TargetError) as info:
        patchkit.plan(patchkit.load(str(mine)), str(root))
    assert info.value.hint.startswith("use verl-engine-update (verl >=0.6,<=0.9.1) for this version")


def test_skip_version_check_patches_a_real_release_outside_the_range_whose_points_match(tmp_path):
    from click.testing import CliRunner

    from patchkit.cli.commands import main

    root = _root(tmp_path, "vllm-ascend", "0.23.0")
    mine = _narrowed(tmp_path, "vllm-ascend-decode", ">=0.23.1")
    before = snapshot(root)
    refused = CliRunner().invoke(main, ["diff", str(mine), "--root", str(root)])
    assert refused.exit_code == 1 and "vllm-ascend 0.23.0 is installed" in refused.stderr
    shown = CliRunner().invoke(main, ["diff", str(mine), "--root", str(root), "--skip-version-check"])
    assert shown.exit_code == 0, shown.output
    assert "+++ b/vllm_ascend/worker/worker.py" in shown.stdout
    assert ("warning: version check skipped (--skip-version-check): vllm-ascend 0.23.0 is installed "
            f"(vllm-ascend metadata in {root.resolve()}); vllm-ascend-decode is proven on vllm-ascend >=0.23.1") \
        in shown.stderr
    applied = CliRunner().invoke(main, ["apply", str(mine), "--root", str(root), "--skip-version-check"])
    assert applied.exit_code == 0, applied.output
    assert "warning: version check skipped" in applied.stderr and "1 file(s) patched" in applied.stderr
    assert "_patchkit_runtime" in (root / "vllm_ascend/worker/worker.py").read_text()
    assert CliRunner().invoke(main, ["revert", "--all"]).exit_code == 0
    assert snapshot(root) == before
    quiet = CliRunner().invoke(main, ["diff", "vllm-ascend-decode", "--root", str(root), "--skip-version-check"])
    assert quiet.exit_code == 0 and "version check skipped" not in quiet.stderr  # in range: nothing to say


def test_skip_version_check_still_refuses_real_releases_whose_points_do_not_match(tmp_path):
    from click.testing import CliRunner

    from patchkit.cli.commands import main

    root = _root(tmp_path, "verl", "0.8.0")  # no actor/ folder any more
    before = snapshot(root)
    result = CliRunner().invoke(main, ["apply", "verl-fsdp-update", "--root", str(root), "--skip-version-check"])
    assert result.exit_code == 1 and "none of the recipe's files is in" in result.stderr
    assert snapshot(root) == before
    root = _root(tmp_path, "vllm-ascend", "0.9.1")  # worker.py is the V0 worker there: no NPUWorker.execute_model
    mine = _narrowed(tmp_path, "vllm-ascend-decode", "<0.9", files=["vllm_ascend/worker/worker.py"])
    before = snapshot(root)
    result = CliRunner().invoke(main, ["apply", str(mine), "--root", str(root), "--skip-version-check",
                                       "--strict-versions"])
    assert result.exit_code == 1, result.output
    assert f"error: {root.resolve() / 'vllm_ascend/worker/worker.py'}" in result.stderr
    assert "execute_model" in result.stderr and "warning: version check skipped" in result.stderr
    assert snapshot(root) == before


def test_vllm_ascend_main_shaped_checkout_with_the_real_worker(tmp_path):
    """The real 0.23.0 worker.py on a history shaped like vLLM-Ascend's main of August 2026: read as 0.25.1rc1 or
    later (not as 0.19.1rc1), patched with a note that it may be past the proven range; refused when strict."""
    from click.testing import CliRunner

    from patchkit.cli.commands import main
    from test_checkout_versions import ascend_repo

    repo = ascend_repo(tmp_path / "vllm-ascend")
    real = realwheels.release_root("vllm-ascend", "0.23.0") / "vllm_ascend/worker/worker.py"
    shutil.copyfile(real, repo.top / "vllm_ascend/worker/worker.py")
    repo.commit(1)
    before = snapshot(repo.top)
    refused = CliRunner().invoke(main, ["apply", "vllm-ascend-decode", "--root", str(repo.top), "--strict-versions"])
    assert refused.exit_code == 1 and "vllm-ascend 0.25.1rc1 or later is installed" in refused.stderr
    applied = CliRunner().invoke(main, ["apply", "vllm-ascend-decode", "--root", str(repo.top)])
    assert applied.exit_code == 0, applied.output
    assert "tracked in the git work tree" in applied.stderr and "note: vllm-ascend 0.25.1rc1 or later may be past" \
        in applied.stderr
    assert CliRunner().invoke(main, ["revert", "--all"]).exit_code == 0
    assert snapshot(repo.top) == before and repo.git("status", "--porcelain") == ""


def test_vllm_ascend_0_9_1_patches_the_v1_worker_not_the_v0_one(tmp_path):
    root = _root(tmp_path, "vllm-ascend", "0.9.1")
    plan = patchkit.plan(patchkit.load("vllm-ascend-decode"), str(root))
    assert [f.relpath for f in plan.files] == ["vllm_ascend/worker/worker_v1.py"]


RANGE_POINTS = [
    {"class": "DataParallelPPOActor", "method": "update_policy", "at": "around_call", "call": "self._forward_micro_batch",
     "action": "range", "name": "forward_micro_batch"},
    {"class": "DataParallelPPOActor", "method": "_optimizer_step", "at": "method", "action": "range",
     "name": "optimizer_step"},
    {"class": "DataParallelPPOActor", "method": "update_policy", "at": "loop_start", "loop": {"iter": "micro_batches"},
     "action": "mark", "name": "micro_batch"},
]


@pytest.mark.parametrize("version", [v for r, d, v in PAIRS if r == "verl-fsdp-update"])
def test_the_readme_s_ranges_and_marks_apply_on_every_release_of_the_fsdp_actor(tmp_path, version):
    """The README's ranges-and-marks example (verl-fsdp-update plus three labelled points) on each real release."""
    import yaml

    data = yaml.safe_load(patchkit.recipe_path("verl-fsdp-update").read_text())
    data.update(id="my-update", points=data["points"] + RANGE_POINTS)
    data.pop("examples")
    mine = tmp_path / "my-update.yaml"
    mine.write_text(yaml.safe_dump(data, sort_keys=False))
    root = _root(tmp_path, "verl", version)
    plan = patchkit.plan(patchkit.load(str(mine), ["profiler.mstx=true"]), str(root))
    (f,) = plan.files
    text = f.result.text
    compile(text, str(f.path), "exec")
    for call in ('range_start("my-update", "forward_micro_batch")', 'range_end("my-update", "forward_micro_batch")',
                 '@_patchkit_runtime.ranged("my-update", "optimizer_step")', 'mark("my-update", "micro_batch")'):
        assert text.count(call) == 1, (version, call)
