"""node: what one Ray node does for a --ray command, run here in-process (only Ray's node identity is stood in for).

``on_node`` is the task every node runs: plain data in, a NodeResult as
plain data out, and it never raises, whatever goes wrong on the node.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

import patchkit
from patchkit.state.ledger import Ledger, sha256
from patchkit.cluster.node import NodeResult, NodeState, on_node
from patchkit.core.outcome import Outcome

from conftest import snapshot

DP = "verl/workers/actor/dp_actor.py"
R = "verl-fsdp-update"
NODE = "ab" * 28


@pytest.fixture(autouse=True)
def this_node(monkeypatch):
    """What a Ray worker would say about the node it runs on."""
    ray = SimpleNamespace(get_runtime_context=lambda: SimpleNamespace(get_node_id=lambda: NODE),
                          util=SimpleNamespace(get_node_ip_address=lambda: "10.0.0.7"))
    monkeypatch.setitem(sys.modules, "ray", ray)


def run(op, label=R, **kwargs) -> NodeResult:
    data = on_node(op, {"label": label, "kwargs": kwargs})
    assert isinstance(data, dict)  # what travels back to the driver
    return NodeResult(**data)


def recipe_args(root, *overrides, **more):
    return {"recipe": R, "overrides": list(overrides), "backend": None, "root": str(root), **more}


def test_plan_says_what_would_change_and_carries_the_patch(tree, patchkit_home):
    root = tree("verl-0.6")
    before = snapshot(root)
    r = run("plan", **recipe_args(root))
    assert (r.node_id, r.ip, r.node, r.ok, r.home) == (NODE, "10.0.0.7", f"{NODE[:12]} (10.0.0.7)", True, str(patchkit_home))
    assert r.state is NodeState.WOULD_CHANGE and r.recipe == R and r.root == str(root.resolve())
    assert r.message == f"1 file(s) would change, 0 already applied (verl 0.6.1 in {root.resolve()})"
    assert r.diff == patchkit.plan(patchkit.load(R), str(root)).diff()
    assert snapshot(root) == before


def test_apply_then_again_then_with_other_settings(tree):
    root = tree("verl-0.6")
    r = run("apply", **recipe_args(root))
    assert (r.state, r.changed, r.root, r.previous) == (NodeState.PATCHED, True, str(root.resolve()), {})
    assert r.message.startswith(f"{DP} (12 lines) in {root.resolve()}; traces go to ./outputs/patchkit/{R}")
    assert f"; warning: {root.resolve()} has no patchkit" in r.message
    r = run("apply", **recipe_args(root))
    assert (r.state, r.changed) == (NodeState.ALREADY_APPLIED, False)
    assert r.message == f"{DP} in {root.resolve()}; traces go to ./outputs/patchkit/{R}"
    r = run("apply", **recipe_args(root, "schedule.wait=3"))
    assert r.state is NodeState.UPDATED
    assert r.previous == {str((root / DP).resolve()): {"overrides": [], "recipe_path": patchkit.load(R).recipe.path}}


def test_rollback_puts_the_earlier_settings_back_or_reverts(tree):
    root = tree("verl-0.6")
    pristine = snapshot(root)
    run("apply", **recipe_args(root))
    applied = snapshot(root)
    r = run("apply", **recipe_args(root, "schedule.wait=3"))
    back = run("rollback", recipe=R, root=str(root.resolve()), previous=r.previous)
    assert back.state is NodeState.ROLLED_BACK and back.message == f"earlier settings of {R} put back in {root.resolve()}"
    assert snapshot(root) == applied
    back = run("rollback", recipe=R, root=str(root.resolve()), previous={})
    assert back.state is NodeState.ROLLED_BACK and back.message == f"{DP} (reverted; {R}) in {root.resolve()}"
    assert snapshot(root) == pristine


def test_revert_reports_the_files_state_or_that_nothing_is_there(tree):
    root = tree("verl-0.6")
    r = run("revert", recipes=[R], everything=False, root=str(root))
    assert (r.state, r.message) == (NodeState.NOTHING_TO_REVERT, f"not applied on this node under {root}")
    run("apply", **recipe_args(root))
    r = run("revert", recipes=[], everything=True, root=None)
    assert r.state == Outcome.REVERTED and r.recipe == "all"
    assert r.message == f"{(root / DP).resolve()} ({R})"
    r = run("revert", recipes=[], everything=True, root=None)
    assert (r.state, r.message) == (NodeState.NOTHING_TO_REVERT, "nothing was applied")


def test_status_sends_the_rows_status_json_writes(tree):
    root = tree("verl-0.6")
    r = run("status", label="", root=None)
    assert (r.state, r.files, r.message, r.recipe) == (NodeState.NOTHING_APPLIED, [], "", "")
    run("apply", **recipe_args(root))
    r = run("status", label="", root=None)
    assert r.files == [row.to_json() for row in patchkit.status()]
    assert (r.state, r.message, r.recipe) == ("applied", "1 file(s)", R)


def test_a_failure_on_the_node_comes_back_as_data(tree, tmp_path):
    r = run("plan", **recipe_args(tmp_path / "nothing-here"))
    assert (r.ok, r.state) == (False, NodeState.FAILED)
    assert r.message.startswith(f"{tmp_path / 'nothing-here'}") and "hint:" in r.message
    r = run("plan", recipe=R, unexpected=1)  # a driver newer than this node: anything at all is reported
    assert (r.ok, r.state) == (False, NodeState.FAILED) and r.message.startswith("TypeError: ")


def test_a_change_put_back_after_a_killed_run_is_said(tree, patchkit_home):
    root = tree("verl-0.6")
    original = (root / DP).read_bytes()
    settings = patchkit.load(R)
    [f] = patchkit.plan(settings, str(root)).files
    led = Ledger()
    with led.locked():  # a run killed after its journal was saved and the file written
        led.pending = {"files": [{"path": str(f.path), "old": led.backup(original), "new": sha256(f.new_bytes())}],
                       "records": {}}
        led.save()
    (root / DP).write_bytes(f.new_bytes())
    r = run("status", label="", root=None)  # a read reports it and writes nothing
    assert r.ok and r.state == "interrupted" and r.files[0]["path"] == str(f.path)
    assert (root / DP).read_bytes() == f.new_bytes()
    r = run("revert", label="", recipes=[], everything=True, root=None)
    assert r.message.startswith(f"note: put back {f.path} (an earlier patchkit run stopped half-way)")
    assert (root / DP).read_bytes() == original
