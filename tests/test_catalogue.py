"""The quick read of the built-in recipes says what the full, validated load says."""

from __future__ import annotations

from patchkit.recipe.catalogue import entries
from patchkit.recipe.load import all_recipes


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


def test_a_second_read_comes_from_the_cache_and_a_changed_recipe_is_read_again(tmp_path, monkeypatch, patchkit_home):
    import shutil

    from patchkit.recipe import catalogue

    folder = tmp_path / "recipes"
    shutil.copytree(catalogue.builtin_dir(), folder)
    monkeypatch.setattr(catalogue, "builtin_dir", lambda: folder)
    first = catalogue.entries()
    assert (patchkit_home / "catalogue.json").is_file()
    read = catalogue._read
    monkeypatch.setattr(catalogue, "_read", lambda p: (_ for _ in ()).throw(AssertionError("parsed again")))
    assert catalogue.entries() == first
    monkeypatch.setattr(catalogue, "_read", read)
    path = folder / "vllm-decode.yaml"
    path.write_text(path.read_text().replace("package: vllm\n", "package: vllm\n  tags: []\n", 1) + "\n")
    again = {e.id: e for e in catalogue.entries()}
    assert again["vllm-decode"] == {e.id: e for e in first}["vllm-decode"]  # re-read, same content
    (patchkit_home / "catalogue.json").write_text("{broken")
    assert catalogue.entries() == list(again.values())


def test_a_planted_cache_is_never_believed(patchkit_home):
    """A cache that is not private, or names files outside the package, would steer status and revert."""
    import json
    import os

    from patchkit.recipe import catalogue

    fresh = catalogue.entries()
    cache = patchkit_home / "catalogue.json"
    kept = json.loads(cache.read_text())
    assert oct(cache.stat().st_mode & 0o777) == oct(0o600)
    kept["entries"] = [e[:5] + [["../../../etc/passwd"]] for e in kept["entries"]]
    cache.write_text(json.dumps(kept))
    assert catalogue.entries() == fresh  # outside the package: read the recipes again
    kept["entries"] = [e[:5] + [["verl/evil.py"]] for e in kept["entries"]]
    cache.write_text(json.dumps(kept))
    cache.chmod(0o666)  # writable by others: not read
    assert catalogue.entries() == fresh
    if os.geteuid() == 0:
        cache.write_text(json.dumps(kept))
        cache.chmod(0o600)
        os.chown(cache, 65534, 65534)  # another user's: not read
        assert catalogue.entries() == fresh
