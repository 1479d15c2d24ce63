"""cli_cluster: what diff, apply, revert and status say with --ray, given what each node answered.

The cluster layer is replaced by canned NodeResults (tests/test_cluster_ray.py
checks it; tests/test_ray.py runs all of it on a real cluster).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from patchkit.cluster import ray as cluster
import patchkit
from patchkit.cli.commands import main
from patchkit.cluster.node import NodeResult, NodeState

from progress_helpers import Terminal, drive

A, B, C = "a" * 56, "b" * 56, "c" * 56
R = "verl-fsdp-update"
DIFF = "--- a/x.py\n+++ b/x.py\n@@ -1 +1,2 @@\n x = 1\n+y()  # patchkit:verl-fsdp-update\n"


def node(node_id, state, message="", **more) -> NodeResult:
    return NodeResult(node_id, "10.0.0." + ("1" if node_id == A else "2"), more.pop("recipe", R), state, message, **more)


@pytest.fixture
def answers(monkeypatch):
    """``answers(op, [NodeResult, ...])``: what cluster.<op> returns; the calls are recorded."""
    calls = []

    def give(op, results):
        def fake(*args, progress=None, **kwargs):
            calls.append((op, args))
            drive(progress, len(results), f"{op} on {len(results)} node(s)")  # as cluster.ray tells it
            return results
        monkeypatch.setattr(cluster, op, fake)
        return calls

    return give


def run(*args, code=0):
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result


def test_apply_prints_a_line_per_node_then_the_summary_and_notes(answers):
    answers("apply", [node(A, NodeState.PATCHED, "x.py (9 lines) in /site", changed=True),
                      node(B, NodeState.ALREADY_APPLIED, "x.py in /site", version_skipped="verl 0.9.1 is installed")])
    result = run("apply", R, "--ray", "head:6379")
    assert result.stdout.splitlines() == [
        f"{A[:12]} (10.0.0.1)  {R}  patched: x.py (9 lines) in /site",
        f"{B[:12]} (10.0.0.2)  {R}  already applied: x.py in /site; version check skipped (--skip-version-check): "
        "verl 0.9.1 is installed"]
    lines = result.stderr.splitlines()
    assert lines[0] == f"{R}: applied on 2 node(s) (1 changed); undo with `patchkit revert --ray head:6379 {R}`"
    assert lines[1:] == [f"note: {n}" for n in patchkit.load(R).recipe.notes]


@pytest.mark.parametrize("a_state,what", [
    (NodeState.ROLLED_BACK, "(no node keeps a change from this command)"),
    (NodeState.ROLLBACK_FAILED, "(and putting back the nodes it changed; see `patchkit status --ray auto`)"),
])
def test_apply_failing_on_a_node_names_it_and_exits_1_without_notes(answers, a_state, what):
    answers("apply", [node(A, a_state, "put back", ok=a_state is NodeState.ROLLED_BACK),
                      node(B, NodeState.FAILED, "/site/x.py:3: no anchor\n  hint: adapt the recipe", ok=False)])
    result = run("apply", R, "--ray", "auto", code=1)
    assert f"{B[:12]} (10.0.0.2)  {R}  failed: /site/x.py:3: no anchor; hint: adapt the recipe" in result.stdout
    assert f"error: apply {R} {what} failed on " in result.stderr
    assert f"node {B} (10.0.0.2): /site/x.py:3: no anchor" in result.stderr
    assert "hint: fix that node's environment" in result.stderr and "note:" not in result.stderr


def test_a_bad_override_fails_before_the_cluster_is_asked(answers):
    calls = answers("apply", [])
    result = run("apply", R, "nope.key=1", "--ray", "auto", code=1)
    assert "nope.key" in result.stderr and calls == []


def test_diff_shows_a_patch_shared_by_nodes_once(answers, tmp_path):
    other = DIFF.replace("x.py", "z.py")
    answers("plan", [node(A, NodeState.WOULD_CHANGE, "1 file(s) would change", diff=DIFF),
                     node(B, NodeState.WOULD_CHANGE, "1 file(s) would change", diff=DIFF)])
    result = run("diff", R, "--ray", "auto")
    assert result.stdout == f"# node(s) {A[:12]} (10.0.0.1), {B[:12]} (10.0.0.2)\n" + DIFF
    assert result.stderr.splitlines() == [f"{n[:12]} (10.0.0.{i})  {R}  would change: 1 file(s) would change"
                                          for i, n in ((1, A), (2, B))]
    answers("plan", [node(A, NodeState.WOULD_CHANGE, diff=DIFF), node(B, NodeState.WOULD_CHANGE, diff=other)])
    stat = run("diff", R, "--ray", "auto", "--stat").stdout
    assert stat == (f"# node(s) {A[:12]} (10.0.0.1)\n x.py |   1 +\n 1 file changed, 1 insertions(+), 0 deletions(-)\n"
                    f"# node(s) {B[:12]} (10.0.0.2)\n z.py |   1 +\n 1 file changed, 1 insertions(+), 0 deletions(-)\n")
    out = tmp_path / "all.patch"
    result = run("diff", R, "--ray", "auto", "-o", str(out))
    assert out.read_text() == f"# node(s) {A[:12]} (10.0.0.1)\n{DIFF}# node(s) {B[:12]} (10.0.0.2)\n{other}"
    assert result.stdout == "" and f"wrote {out}" in result.stderr


def test_revert_prints_each_node(answers):
    answers("revert", [node(A, "reverted", "/site/x.py (r)", recipe="all"),
                       node(B, NodeState.NOTHING_TO_REVERT, "nothing was applied", recipe="all")])
    assert run("revert", "--all", "--ray", "auto").stdout.splitlines() == [
        f"{A[:12]} (10.0.0.1)  all  reverted: /site/x.py (r)",
        f"{B[:12]} (10.0.0.2)  all  nothing to revert: nothing was applied"]


def test_status_prints_the_rows_status_json_writes(answers, tree, tmp_path):
    """The nodes send FileStatus.to_json() rows: the one place the status JSON is built."""
    from patchkit.state.ledger import Ledger

    root = tree("verl-0.6")
    patchkit.apply(patchkit.load(R), str(root))
    recorded = [row.to_json() for row in patchkit.status()]
    unrecorded = [row.to_json() for row in patchkit.status(ledger=Ledger(tmp_path / "empty-home"), root=str(root))]
    assert recorded[0]["backup"] == "ok" and unrecorded[0]["backup"] is None
    missing = dict(recorded[0], backup="missing or corrupted", state="edited since apply")
    answers("status", [node(A, "applied", "1 file(s)", files=recorded, home="/h/a"),
                       node(B, NodeState.NOTHING_APPLIED, recipe="", home="/h/b"),
                       node(C, "applied (no record), edited since apply", "2 file(s)",
                            files=unrecorded + [missing])])
    path = recorded[0]["path"]
    assert run("status", "--ray", "auto").stdout.splitlines() == [
        f"{A[:12]} (10.0.0.1)  {R}  applied: {path} (verl 0.6.1)",
        f"{B[:12]} (10.0.0.2)  -  nothing applied",
        f"{C[:12]} (10.0.0.2)  {R}  applied (no record): {path} (verl 0.6.1)  [no record: no backup]",
        f"{C[:12]} (10.0.0.2)  {R}  edited since apply: {path} (verl 0.6.1)  [backup missing or corrupted]"]
    data = json.loads(run("status", "--ray", "auto", "--json").stdout)
    assert [list(n) for n in data["nodes"]] == [["node_id", "ip", "ok", "home", "state", "message", "files"]] * 3
    assert data["nodes"][0]["files"] == recorded and data["nodes"][1]["state"] == "nothing applied"
    assert data["nodes"][0]["home"] == "/h/a"


def test_status_failing_on_a_node_exits_1(answers):
    answers("status", [node(A, NodeState.FAILED, "PermissionError: /h/a", ok=False, recipe="")])
    result = run("status", "--ray", "auto", code=1)
    assert result.stdout == f"{A[:12]} (10.0.0.1)  -  failed: PermissionError: /h/a\n"
    assert "error: status failed on 1 of 1 node(s)" in result.stderr


@pytest.mark.parametrize("op,args", [("apply", ["apply", R]), ("plan", ["diff", R]), ("revert", ["revert", R]),
                                     ("status", ["status"])])
def test_on_a_terminal_a_bar_counts_the_nodes_on_stderr_and_stdout_stays_the_same(answers, monkeypatch, op, args):
    from patchkit.cli import progress

    answers(op, [node(A, NodeState.PATCHED, "x.py in /site", diff=DIFF), node(B, NodeState.ALREADY_APPLIED, diff=DIFF)])
    piped = run(*args, "--ray", "auto")
    assert "node(s)  [" not in piped.stderr and "%" not in piped.stderr
    real = progress.stream
    monkeypatch.setattr(progress, "stream", lambda: Terminal(real()))
    shown = run(*args, "--ray", "auto")
    assert shown.stdout == piped.stdout
    assert f"{op} on 2 node(s)" in shown.stderr and "2/2" in shown.stderr and "100%" in shown.stderr
    assert shown.stderr.endswith(piped.stderr)  # the bar's line is finished before the command's own lines
    if op == "status":
        as_json = run("status", "--ray", "auto", "--json")
        assert as_json.stderr == "" and json.loads(as_json.stdout)["nodes"]
