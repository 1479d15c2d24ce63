"""patchkit/_api.py: the calls behind the public names, one per command, each returning data."""

from __future__ import annotations

import json

import pytest

from patchkit import _api
from patchkit.core.errors import TargetError

from conftest import snapshot

DP = "verl/workers/actor/dp_actor.py"


def test_apply_report_says_each_file_the_version_and_its_note_as_json(tree):
    root = tree("verl-0.6")
    report = _api.apply_recipe("verl-fsdp-update", ["backend=torch"], root=str(root))
    data = json.loads(json.dumps(report.to_json()))
    assert (data["recipe"], data["distribution"], data["version"], data["version_note"]) == \
        ("verl-fsdp-update", "verl", "0.6.1", "")
    assert [f["outcome"] for f in data["files"]] == ["patched"] and data["files"][0]["path"].endswith(DP)
    assert report.written and report.changed == 1


def test_a_review_that_declines_writes_nothing(tree):
    root = tree("verl-0.6")
    before = snapshot(root)
    seen = []
    report = _api.apply_recipe("verl-fsdp-update", root=str(root), review=lambda plan: seen.append(plan) or False)
    assert not report.written and report.changed == 0 and snapshot(root) == before
    assert seen and seen[0].files[0].changes


def test_plan_recipe_and_diff_take_the_version_rules(tree):
    root = tree("verl-0.9")  # no dp_actor.py: refused by its files past the range, by its number when strict
    with pytest.raises(TargetError, match="none of the recipe's files"):
        _api.plan_recipe("verl-fsdp-update", root=str(root))
    with pytest.raises(TargetError, match="only releases it is proven on"):
        _api.plan_recipe("verl-fsdp-update", root=str(root), strict_versions=True)
    six = tree("verl-0.6")
    assert _api.diff(_api.load("verl-fsdp-update"), str(six)) == _api.plan_recipe("verl-fsdp-update",
                                                                                    root=str(six)).diff()
