"""state: status rows, and the one place their JSON (``status --json``, and each node's with --ray) is built."""

from __future__ import annotations

from patchkit.state import status as state
from patchkit.state.ledger import Ledger
from patchkit.core.outcome import Status
from patchkit.recipe.load import load
from patchkit.state.transaction import apply

DP = "verl/workers/actor/dp_actor.py"
R = "verl-fsdp-update"
KEYS = ["path", "relpath", "root", "state", "backup", "distribution", "version", "recipes"]


def test_a_recorded_row_and_its_json(tree):
    root = tree("verl-0.6")
    apply(load(R, ["granularity=micro"]), str(root))
    [row] = state.status()
    assert row.state is Status.APPLIED and row.backup_ok and row.found is None
    assert (row.path, row.recipes) == (str((root / DP).resolve()), (R,))
    data = row.to_json()
    assert list(data) == KEYS
    assert (data["state"], data["backup"], data["relpath"], data["root"], data["version"]) == (
        "applied", "ok", DP, str(root.resolve()), "0.6.1")
    assert type(data["state"]) is str  # plain JSON, whatever reads it
    assert data["recipes"] == {R: {"choices": {"granularity": "micro"}, "overrides": ["granularity=micro"],
                                   "backend": "npu", "git": None}}


def test_a_row_without_a_record_and_its_json(tree, tmp_path):
    root = tree("verl-0.6")
    apply(load(R), str(root), ledger=Ledger(tmp_path / "another-home"))
    assert state.status() == []  # not under --root, not in this environment
    [row] = state.status(root=str(root))
    assert (row.state, row.record, row.backup_ok, row.recipes) == (Status.NO_RECORD, None, None, (R,))
    data = row.to_json()
    assert list(data) == KEYS and (data["state"], data["backup"]) == ("applied (no record)", None)
    assert data["recipes"] == {R: {"choices": None, "overrides": None, "backend": None, "git": None}}


def test_root_keeps_the_records_under_it(tree, tmp_path):
    one = tree("verl-0.6")
    apply(load(R), str(one))
    assert [r.path for r in state.status(root=str(one))] == [str((one / DP).resolve())]
    (tmp_path / "elsewhere").mkdir()
    assert state.status(root=str(tmp_path / "elsewhere")) == []
