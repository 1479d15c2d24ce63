"""Named states: Enum members in code, today's exact text wherever they are printed or written as JSON."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from patchkit.cluster.node import NodeState
from patchkit.core.outcome import FileOutcome, Outcome, Status

# What users' scripts read: `patchkit apply/revert` lines and `status --json` "state" values.
PRINTED = {
    Outcome: ["patched", "updated", "already applied", "not written", "reverted", "reverted, edits kept",
              "reverted, edits discarded (--force)", "reverted (backup missing: marked lines taken out)",
              "reverted, edits kept (backup missing: marked lines taken out)",
              "reverted without a backup (no record; marked lines taken out)",
              "left alone (its marked lines are not patchkit's)", "already original", "replaced",
              "missing"],
    Status: ["applied", "edited since apply", "replaced (reinstalled?)", "reverted outside patchkit", "missing",
             "not read (a link on the way, not a plain file, or too large)", "applied (no record)", "interrupted"],
    NodeState: ["would change", "already applied", "patched", "updated", "not applied", "rolled back",
                "rollback failed", "left as it was", "reverted", "nothing to revert", "nothing applied", "failed"],
}


@pytest.mark.parametrize("kind", list(PRINTED), ids=lambda k: k.__name__)
def test_every_state_keeps_its_text(kind):
    assert [m.value for m in kind] == PRINTED[kind]


@pytest.mark.parametrize("member", [m for kind in PRINTED for m in kind], ids=repr)
def test_a_state_reads_as_its_text_everywhere(member):
    text = member.value
    assert str(member) == f"{member}" == text
    assert f"{member:10s}" == f"{text:10s}"  # status pads its first column
    assert json.dumps(member) == json.dumps(text)
    assert json.dumps({"state": member}, indent=2) == json.dumps({"state": text}, indent=2)
    assert member == text and hash(member) == hash(text)
    assert pickle.loads(pickle.dumps(member)) is member  # what travels to and from Ray nodes


def test_states_of_different_kinds_are_told_apart_by_identity_not_text():
    assert Outcome.MISSING == Status.MISSING  # the same word...
    assert Outcome.MISSING is not Status.MISSING  # ...but code compares members
    assert Outcome("patched") is Outcome.PATCHED
    with pytest.raises(ValueError):
        Outcome("Patched")


def test_written_means_apply_wrote_the_file():
    assert {m for m in Outcome if m.written} == {Outcome.PATCHED, Outcome.UPDATED}


def test_label_adds_the_line_force_kept():
    o = FileOutcome(Path("/x/a.py"), "a.py", Outcome.REVERTED_NO_RECORD, "r1")
    assert o.label == "reverted without a backup (no record; marked lines taken out)"
    kept = o._replace(kept_line=118)
    assert kept.label == "reverted without a backup (no record; marked lines taken out); line 118 kept (--force)"
    assert kept.state is Outcome.REVERTED_NO_RECORD  # the state stays a member


def test_a_marked_line_revert_kept_is_in_the_label_and_its_note_says_what_to_do():
    o = FileOutcome(Path("/site/pkg/m.py"), "pkg/m.py", Outcome.REVERTED_EDITS_KEPT, "r", foreign=((12, "mine"),))
    assert o.label == ("reverted, edits kept; line 12 kept: it ends in `# patchkit:mine`, but patchkit did not "
                       "write it")
    (note,) = o.kept_notes()
    assert note.startswith("/site/pkg/m.py:12: kept: it ends in `# patchkit:mine`, but patchkit did not write it")
    assert "change the comment (e.g. to `# patchkit mine`)" in note
    assert FileOutcome(Path("/x"), "x", Outcome.REVERTED).kept_notes() == []
