"""`--ray`: apply, diff, status and revert on every node of a real two-node Ray cluster on this machine.

Each node is a raylet started by ``ray.cluster_utils.Cluster`` with its own
``PATCHKIT_ROOT`` (a copy of fixtures/verl-0.6) and ``PATCHKIT_HOME`` in its
``env_vars``; Ray's worker processes inherit them, so every node resolves its
own targets and keeps its own ledger, as separate machines would.
"""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from click.testing import CliRunner

from patchkit.cli.commands import main

from conftest import FIXTURES, snapshot
from raycluster import two_nodes

DP = "verl/workers/actor/dp_actor.py"
RECIPE = "verl-fsdp-update"
MARK = f"# patchkit:{RECIPE}"


class Node:
    def __init__(self, name, base):
        self.name = name
        self.root = base / f"{name}-site-packages"
        self.home = base / f"{name}-patchkit-home"
        shutil.copytree(FIXTURES / "verl-0.6", self.root)
        self.home.mkdir()
        self.id = ""

    @property
    def env(self):
        return {"PATCHKIT_ROOT": str(self.root), "PATCHKIT_HOME": str(self.home)}

    @property
    def target(self):
        return self.root / DP

    def reset(self):
        shutil.rmtree(self.root)
        shutil.copytree(FIXTURES / "verl-0.6", self.root)
        shutil.rmtree(self.home)
        self.home.mkdir()

    def recorded(self):
        path = self.home / "ledger.json"
        return json.loads(path.read_text())["files"] if path.exists() else {}


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("ray-nodes")
    a, b = Node("a", base), Node("b", base)
    with two_nodes(a, b) as address:
        yield address, a, b


@pytest.fixture(autouse=True)
def bounded_wait(monkeypatch):
    """A node that does not answer fails its command in a minute, naming the node, instead of hanging the suite."""
    monkeypatch.setenv("PATCHKIT_RAY_TIMEOUT", "60")


@pytest.fixture
def nodes(ray_cluster):
    address, a, b = ray_cluster
    a.reset()
    b.reset()
    return address, a, b


def run(*args, code=0):
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result


def node_lines(output, node):
    return [ln for ln in output.splitlines() if ln.startswith(node.id[:12])]


def test_apply_status_revert_on_both_nodes(nodes, patchkit_home):
    address, a, b = nodes
    before = {n.name: snapshot(n.root) for n in (a, b)}

    out = run("apply", RECIPE, "schedule.active=2", "--ray", address).stdout
    for n in (a, b):
        assert MARK in n.target.read_text(), n.name
        assert "active=2" in n.target.read_text()
        [line] = node_lines(out, n)
        assert RECIPE in line and "patched" in line and str(n.root) in line
        # the node's root is a site-packages without patchkit: the job there would run unprofiled
        assert f"warning: {n.root} has no patchkit" in line and "patchkit-profiler" in line
        assert [f["root"] for f in n.recorded().values()] == [str(n.root)]  # each node its own ledger
    assert not (patchkit_home / "ledger.json").exists()  # nothing recorded on the driver's side

    status = run("status", "--ray", address).stdout
    for n in (a, b):
        [line] = node_lines(status, n)
        assert RECIPE in line and "applied" in line and str(n.target) in line
    data = json.loads(run("status", "--ray", address, "--json").stdout)
    assert {(d["node_id"], d["home"], d["files"][0]["path"], d["files"][0]["state"]) for d in data["nodes"]} == {
        (n.id, str(n.home), str(n.target), "applied") for n in (a, b)}

    again = run("apply", RECIPE, "schedule.active=2", "--ray", address).stdout
    assert all("already applied" in node_lines(again, n)[0] for n in (a, b))

    out = run("revert", "--ray", address, "--all").stdout
    for n in (a, b):
        assert "reverted" in node_lines(out, n)[0]
        assert snapshot(n.root) == before[n.name], n.name  # byte for byte
        assert n.recorded() == {}
    status = run("status", "--ray", address).stdout
    assert all("nothing applied" in node_lines(status, n)[0] for n in (a, b))


def test_diff_shows_each_nodes_patch_and_writes_nothing(nodes):
    address, a, b = nodes
    before = {n.name: snapshot(n.root) for n in (a, b)}
    result = run("diff", RECIPE, "--ray", address)
    assert result.stdout.count(f"--- a/{DP}\n+++ b/{DP}\n") == 1  # the same patch on both nodes, shown once
    assert a.id[:12] in result.stdout.splitlines()[0] and b.id[:12] in result.stdout.splitlines()[0]
    for n in (a, b):
        assert "1 file(s) would change" in node_lines(result.stderr, n)[0]
        assert snapshot(n.root) == before[n.name]
        assert n.recorded() == {}


def test_a_node_without_the_anchor_fails_the_apply_and_the_other_stays_unpatched(nodes):
    address, a, b = nodes
    b.target.write_text(b.target.read_text().replace("self._optimizer_step()", "self._optimizer_stepped()"))
    before = {n.name: snapshot(n.root) for n in (a, b)}

    result = run("apply", RECIPE, "--ray", address, code=1)
    assert f"node {b.id} " in result.stderr and "no statement calling self._optimizer_step" in result.stderr
    assert f"node {a.id}" not in result.stderr
    assert "note:" not in result.stderr  # the recipe's notes only after a success
    assert "failed" in node_lines(result.stdout, b)[0] and str(b.target) in node_lines(result.stdout, b)[0]
    assert "not applied" in node_lines(result.stdout, a)[0]
    for n in (a, b):
        assert snapshot(n.root) == before[n.name], n.name
        assert n.recorded() == {}

    out = run("revert", RECIPE, "--ray", address).stdout  # nothing applied anywhere: not an error
    assert all("nothing to revert" in node_lines(out, n)[0] for n in (a, b))


def test_a_node_that_fails_while_applying_rolls_the_others_back(nodes):
    """Plans pass everywhere, then node b cannot write its ledger: node a is put back as it was."""
    address, a, b = nodes
    pristine = snapshot(a.root)
    run("apply", RECIPE, "--ray", address)
    applied_a = snapshot(a.root)
    shutil.rmtree(b.home)
    b.home.write_text("not a folder")  # b's PATCHKIT_HOME is broken after its plan would pass
    try:
        result = run("apply", RECIPE, "schedule.wait=5", "--ray", address, code=1)
        assert f"node {b.id} " in result.stderr
        assert "rolled back" in node_lines(result.stdout, a)[0]
        assert snapshot(a.root) == applied_a  # a's earlier settings are back, not the new ones
        assert "wait=5" not in a.target.read_text()

        run("revert", "--ray", address, "--all", "--root", str(a.root), code=1)  # b still broken: reported
        assert snapshot(a.root) == pristine
        result = run("apply", RECIPE, "--ray", address, code=1)  # a fresh patch on a is reverted entirely
        assert "rolled back" in node_lines(result.stdout, a)[0]
        assert snapshot(a.root) == pristine and a.recorded() == {}
    finally:
        b.home.unlink()
        b.home.mkdir()


def test_an_unreachable_address_fails_fast(ray_cluster):
    result = run("status", "--ray", "127.0.0.1:1", code=1)
    assert "cannot connect to the Ray cluster at 127.0.0.1:1" in result.stderr


def test_ray_flag_without_ray_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if Ray were not installed
    for args in (["apply", RECIPE], ["diff", RECIPE], ["revert", "--all"], ["status"]):
        result = run(*args, "--ray", "auto", code=1)
        assert "needs Ray" in result.stderr and 'pip install "patchkit-profiler[ray]"' in result.stderr


def test_status_and_revert_find_lines_no_nodes_record_explains_and_root_reaches_every_node(nodes, patchkit_home):
    """Patched from the driver under its own PATCHKIT_HOME: no node has a record of it, each still sees it."""
    import patchkit

    address, a, b = nodes
    before = snapshot(a.root)
    patchkit.apply(patchkit.load(RECIPE), str(a.root))  # the driver's ledger, not a node's
    data = {d["node_id"]: d for d in json.loads(run("status", "--ray", address, "--json").stdout)["nodes"]}
    assert [(f["path"], f["state"], f["backup"]) for f in data[a.id]["files"]] == [(str(a.target), "applied (no record)", None)]
    assert data[b.id]["files"] == []  # b looks in its own PATCHKIT_ROOT
    out = run("status", "--ray", address, "--root", str(a.root)).stdout
    for n in (a, b):  # --root names the same folder on every node
        [line] = node_lines(out, n)
        assert RECIPE in line and "applied (no record)" in line and str(a.target) in line and "no backup" in line

    out = run("revert", "--ray", address, "--all").stdout
    assert "reverted without a backup" in node_lines(out, a)[0] and "nothing" in node_lines(out, b)[0]
    assert snapshot(a.root) == before and a.recorded() == {}


def test_skip_version_check_reaches_every_node(nodes, tmp_path):
    """Both nodes hold verl 0.6.1; a copy of the recipe made for >=0.7 is refused there unless the check is skipped."""
    address, a, b = nodes
    from conftest import RECIPES

    mine = tmp_path / "mine" / f"{RECIPE}.yaml"
    mine.parent.mkdir()
    mine.write_text((RECIPES / f"{RECIPE}.yaml").read_text().replace('versions: ">=0.3,<=0.7.1"', 'versions: ">=0.7,<0.8"'))
    before = {n.name: snapshot(n.root) for n in (a, b)}
    refused = run("diff", str(mine), "--ray", address, code=1)
    assert all("verl 0.6.1 is installed" in node_lines(refused.stderr, n)[0] for n in (a, b))

    shown = run("diff", str(mine), "--ray", address, "--skip-version-check")
    for n in (a, b):
        [line] = node_lines(shown.stderr, n)
        assert "1 file(s) would change" in line and "version check skipped (--skip-version-check): verl 0.6.1" in line
    applied = run("apply", str(mine), "--ray", address, "--skip-version-check").stdout
    for n in (a, b):
        [line] = node_lines(applied, n)
        assert "patched" in line and "version check skipped" in line
        assert MARK in n.target.read_text()
    run("revert", "--ray", address, "--all")
    assert {n.name: snapshot(n.root) for n in (a, b)} == before


def test_a_version_past_the_range_is_patched_on_every_node_with_its_note_unless_strict(nodes, tmp_path):
    """Both nodes hold verl 0.6.1; a copy of the recipe proven up to 0.5 patches it, each node saying so; strict
    (the flag, or the driver's PATCHKIT_STRICT_VERSIONS) refuses it on every node."""
    address, a, b = nodes
    from conftest import RECIPES

    mine = tmp_path / "mine" / f"{RECIPE}.yaml"
    mine.parent.mkdir()
    mine.write_text((RECIPES / f"{RECIPE}.yaml").read_text().replace('versions: ">=0.3,<=0.7.1"', 'versions: ">=0.4,<=0.5.0"'))
    before = {n.name: snapshot(n.root) for n in (a, b)}
    shown = run("diff", str(mine), "--ray", address)
    for n in (a, b):
        [line] = node_lines(shown.stderr, n)
        assert "1 file(s) would change" in line and "note: verl 0.6.1 is newer than the releases" in line
    refused = run("diff", str(mine), "--ray", address, "--strict-versions", code=1)
    assert all("only releases it is proven on" in node_lines(refused.stderr, n)[0] for n in (a, b))
    refused = CliRunner().invoke(main, ["apply", str(mine), "--ray", address], env={"PATCHKIT_STRICT_VERSIONS": "1"})
    assert refused.exit_code == 1 and all("only releases it is proven on" in node_lines(refused.output, n)[0]
                                          for n in (a, b))
    assert {n.name: snapshot(n.root) for n in (a, b)} == before
