"""patchkit.recipe.versions: packaging's PEP 440, read as release lines (covers), and the range check's messages."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from packaging.specifiers import SpecifierSet

from patchkit.recipe.versions import check, covers, has_upper_bound

# -- covers: what a recipe's range means -------------------------------------

COVERS = {
    ">=0.6.1,<0.10": {"0.9.1rc1": True, "0.6.1rc1": True, "0.6.1.dev0": True, "0.10.0rc1": False, "0.10.0.dev": False,
                      "0.6.1": True, "0.9.1": True, "0.10.0": False, "0.6.0": False},
    "<0.8": {"0.8.0.dev": False, "0.8.0rc1": False, "0.7.9.dev3": True},
    ">=0.4,<0.8": {"0.4.0.dev": True, "0.7.0.dev": True, "0.3.1.dev": False, "0.8.0.dev": False, "0.4.1": True,
                   "0.8.0": False},
    ">=0.9.1,<0.24": {"0.19.1rc2.dev1637": True, "0.24.0rc1": False, "0.9.1rc1": True, "0.23.0": True},
    # a bound that is itself a pre-release of the same release compares pre-releases one by one
    ">=0.11.0rc2": {"0.11.0rc1": False, "0.11.0rc2": True, "0.11.0.dev0": False, "0.12.0.dev0": True},
    "==0.9.1": {"0.9.1rc1": True, "0.9.1": True, "0.9.2rc1": False, "0.9.1+cpu": True},
    "!=0.9.1": {"0.9.1rc1": False},
    "~=0.4.1": {"0.4.1.dev0": True, "0.5.0rc1": False},
    "==1.2.*": {"1.2": True, "1.2.9rc1": True, "1.3.0": False, "1.3.0.dev0": False},
    "===0.9.1rc1": {"0.9.1rc1": True, "0.9.1": False},
    "<1,>0": {"0.0.post1": False, "0.5": True, "1.0rc1": False},
    # a release line keeps its post-release and local label: 1.0.post1.dev2 leads to 1.0.post1
    "==1.0.post1": {"1.0.post1.dev2": True, "1.0.post2.dev0": False},
    "==1.0+cpu": {"1.0rc1+cpu": True, "1.0rc1+cuda": False},
}


@pytest.mark.parametrize("spec", list(COVERS))
def test_covers_counts_a_prerelease_or_dev_release_as_the_release_it_leads_to(spec):
    for candidate, expected in COVERS[spec].items():
        assert covers(spec, candidate) is expected, (spec, candidate)


def test_covers_differs_from_plain_pep_440_only_on_pre_and_dev_releases():
    """PEP 440 order alone says otherwise where a .dev or rc of a bound's own release is concerned."""
    for spec, candidate in ((">=0.4,<0.8", "0.4.0.dev"), ("==0.9.1", "0.9.1rc1"), (">=0.6.1", "0.6.1rc1")):
        assert covers(spec, candidate) and not SpecifierSet(spec).contains(candidate, prereleases=True)
    assert not covers("!=0.9.1", "0.9.1rc1") and SpecifierSet("!=0.9.1").contains("0.9.1rc1", prereleases=True)
    for spec, table in COVERS.items():  # on releases, packaging decides alone
        for candidate, expected in table.items():
            if not any(part in candidate for part in ("rc", "dev", "a", "b")):
                assert SpecifierSet(spec).contains(candidate, prereleases=True) is expected, (spec, candidate)


def test_a_development_bound_compares_development_releases_of_its_own_release_one_by_one():
    assert covers("==0.8.0.dev3", "0.8.0.dev3") and not covers("==0.8.0.dev3", "0.8.0.dev4")
    assert not covers("==0.8.0.dev3", "0.8.0")
    assert covers("~=0.8.0.dev3", "0.8.0.dev5") and not covers("~=0.8.0.dev3", "0.8.0.dev1")


def test_covers_takes_no_version_that_is_not_pep_440_and_refuses_a_bad_range():
    assert not covers(">=0.4", "main") and not covers(">=0.4", "")
    for spec in (">>1", "<0.8x", "1.0"):
        with pytest.raises(ValueError):
            covers(spec, "0.5")


def test_has_upper_bound():
    for spec in ("<0.24", ">=0.9.1,<=1.0", "==1.2.*", "~=2.0", "===1.0", ">=0.4,==0.5"):
        assert has_upper_bound(spec), spec
    for spec in (">=0.9.1", ">0.4,!=0.5", "", " , "):
        assert not has_upper_bound(spec), spec


# -- check: what a recipe may write -------------------------------------------

@pytest.mark.parametrize("spec", [">=0.4,<0.8", " >= 0.4 , < 0.8 ", ">=0.11.0rc1", "==1.2.*", "!=1.2.*", "~=2.0",
                                  "===1.0-foo", "==1.0+cpu", "==1.0.post1", "!=1.0.dev0", "<1,>0"])
def test_check_accepts_pep_440_ranges_with_release_or_pre_release_bounds(spec):
    check(spec)
    covers(spec, "1.0")  # and covers can match on what check accepts


@pytest.mark.parametrize("spec, message", [
    ("", "no version clause"),
    (" , ", "no version clause"),
    ("1.0", "'1.0': no operator: start with one of <, <=, >, >=, ==, !=, ~=, ==="),
    ("=<1", "'=<1': no operator"),
    (">>1", "'>>1': '>1' is not a PEP 440 version"),
    (">=0.4,<0.8x", "'<0.8x': '0.8x' is not a PEP 440 version"),
    (">=", "'>=': '' is not a PEP 440 version"),
    ("===1.0 foo", "'===1.0 foo': === takes one string, without spaces"),
    ("<1.0.*", "'<1.0.*': only == and != take a .* prefix"),
    ("==1.0rc1.*", "'==1.0rc1.*': a .* prefix is made of release numbers only"),
    ("==1.0.post1.*", "a .* prefix is made of release numbers only"),
    ("~=1", "'~=1': ~= needs at least two release numbers, e.g. ~=2.0"),
    (">=1.0+cpu", "'>=1.0+cpu': only == and != take a local version label"),
    ("<1.0.post1", "'<1.0.post1': patchkit ranges use release or pre-release bounds"),
    (">=0.8.0.dev0", "'>=0.8.0.dev0': patchkit ranges use release or pre-release bounds"),
])
def test_check_says_which_clause_is_wrong_and_why(spec, message):
    with pytest.raises(ValueError) as caught:
        check(spec)
    assert message in str(caught.value)


# -- start-up -------------------------------------------------------------------

def _imported(tmp_path, *args):
    """The modules ``patchkit *args`` imports, from ``python -X importtime``."""
    env = dict(os.environ, PATCHKIT_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "patchkit", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]


@pytest.mark.parametrize("command", ["--help", "list", "status"])
def test_the_start_up_commands_do_not_import_packaging(command, tmp_path):
    """packaging.specifiers costs about a third of start-up: only commands that match versions import it."""
    imported = _imported(tmp_path, command)
    assert not [m for m in imported if m.split(".")[0] == "packaging" or m == "patchkit.recipe.versions"], command


def test_loading_a_recipe_checks_its_range_with_packaging(tmp_path):
    """The other side of the test above: the listing shows packaging once a recipe's range is read."""
    imported = _imported(tmp_path, "show", "vllm-ascend-decode")
    assert "patchkit.recipe.versions" in imported and "packaging.specifiers" in imported


# -- beyond: newer than every release a range takes ---------------------------

BEYOND = {
    ">=0.4,<=0.7.1": {"0.7.2": True, "0.8.0.dev0": True, "0.8.0rc1": True, "0.7.1.post1": True, "0.7.1": False,
                      "0.3.9": False, "0.5": False},
    ">=0.9.1,<=0.30.0rc2": {"0.30.0rc3": True, "0.30.0": True, "0.30.0rc2": False, "0.30.0rc1": False},
    ">=0.9.1,<=0.23.0.post1": {"0.23.0.post2": True, "0.24.0rc1": True, "0.23.0": False},
    "<0.8": {"0.8.0.dev": True, "0.8": True, "0.7.9": False},
    "==1.2.0": {"1.2.1": True, "1.1": False, "1.2.0rc1": False},
    "==1.2.*": {"1.3.0": True, "1.1.9": False, "1!0.1": True},
    "~=0.4.1": {"0.5.0": True, "0.4.0": False},
    ">=0.4": {"9.0": False, "0.3": False},
    "!=0.9.1": {"0.9.1": False},
    "===0.9.1rc1": {"0.9.2": False},
}


@pytest.mark.parametrize("spec", list(BEYOND))
def test_beyond_is_a_version_past_every_upper_bound_it_fails(spec):
    from patchkit.recipe.versions import beyond

    for candidate, expected in BEYOND[spec].items():
        assert beyond(spec, candidate) is expected, (spec, candidate)
    assert beyond(spec, "main") is False


def test_newest_is_the_release_a_range_names_last():
    from patchkit.recipe.versions import newest

    assert [newest(s) for s in (">=0.4,<=0.7.1", ">=0.9.1,<=0.30.0rc2", "==1.2.0", "<0.8", ">=0.4", "==1.2.*")] == \
        ["0.7.1", "0.30.0rc2", "1.2.0", "", "", ""]


def test_a_post_release_bound_is_taken_only_as_the_newest_proven():
    check(">=0.9.1,<=0.23.0.post1")
    for bad in ("<0.23.0.post1", ">=0.23.0.post1", "<=0.24.0.dev0"):
        with pytest.raises(ValueError, match="release or pre-release bounds"):
            check(bad)
