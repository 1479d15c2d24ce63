"""patchkit.versions agrees with packaging.specifiers (pre-releases allowed) on generated cases."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet

from patchkit.versions import contains

release = st.lists(st.integers(0, 12), min_size=1, max_size=3).map(lambda xs: ".".join(map(str, xs)))
suffix = st.sampled_from(["", "rc1", "a2", "b1", ".post1", ".dev0", "rc1.post2", "+local.7", ".post2+abc"])
version = st.builds(lambda e, r, s: (f"{e}!" if e else "") + r + s, st.sampled_from([0, 0, 0, 1]), release, suffix)
op = st.sampled_from(["<", "<=", ">", ">=", "==", "!=", "~="])
clause = st.builds(lambda o, r, s: f"{o}{r}{'' if o == '~=' and '.' not in r else s}",
                   op, release, st.sampled_from(["", "", "rc1", "a1", ".*"]))


def _valid(spec: str) -> bool:
    try:
        SpecifierSet(spec)
        return True
    except Exception:
        return False


@settings(max_examples=3000, deadline=None, derandomize=True)
@given(st.lists(clause, min_size=1, max_size=3).map(",".join), version)
def test_agrees_with_packaging(spec, candidate):
    if not _valid(spec):
        return
    assert contains(spec, candidate) == SpecifierSet(spec).contains(candidate, prereleases=True), (spec, candidate)


def test_post_dev_and_local_bounds_are_refused_rather_than_guessed():
    import pytest

    for spec in ("<1.0.post1", ">=1.0.dev0", "<=1.0+local"):
        with pytest.raises(ValueError):
            contains(spec, "1.0")


def test_the_built_in_ranges_on_the_released_versions():
    cases = {
        "<1,>0": {"0.0.post1": False, "0.5": True, "1.0rc1": False},
        ">=0.4,<0.8": {"0.4.1": True, "0.7.1": True, "0.8.0": False, "0.8.0rc1": False, "0.3.9": False},
        ">=0.9.1,<0.24": {"0.9.1": True, "0.11.0rc1": True, "0.23.0": True, "0.24.0rc1": False},
        ">=0.6.1,<0.10": {"0.6.1": True, "0.9.1": True, "0.10.0": False, "0.6.0": False},
        "==1.2.*": {"1.2": True, "1.2.9rc1": True, "1.3.0": False},
    }
    for spec, table in cases.items():
        for candidate, expected in table.items():
            assert contains(spec, candidate) is expected, (spec, candidate)
            assert SpecifierSet(spec).contains(candidate, prereleases=True) is expected
