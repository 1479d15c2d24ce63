"""The quick read of the built-in recipes says what the full, validated load says."""

from __future__ import annotations

from patchkit.catalogue import entries
from patchkit.recipe import all_recipes


def test_entries_agree_with_the_validated_recipes():
    full = {s.id: s.recipe for s in all_recipes()}
    quick = {e.id: e for e in entries()}
    assert quick.keys() == full.keys()
    for rid, r in full.items():
        e = quick[rid]
        point_files = [f for p in r.points for f in p.files if f not in r.target.files]
        assert (e.description, e.package, e.distribution, e.versions) == \
            (r.description, r.target.package, r.target.distribution, r.target.versions), rid
        assert e.files == tuple(dict.fromkeys(list(r.target.files) + point_files)), rid
