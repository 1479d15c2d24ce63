"""patchkit.versions agrees with packaging (its version parser and order, and
packaging.specifiers with pre-releases allowed) on generated cases."""

from __future__ import annotations

import subprocess
import sys
from itertools import product

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion as PackagingInvalid
from packaging.version import Version as PackagingVersion

from patchkit.versions import InvalidVersion, Version, check, contains, covers, has_upper_bound

release = st.lists(st.integers(0, 12), min_size=1, max_size=3).map(lambda xs: ".".join(map(str, xs)))
suffix = st.sampled_from(["", "rc1", "a2", "b1", ".post1", ".dev0", "rc1.post2", "+local.7", ".post2+abc"])
version = st.builds(lambda e, r, s: (f"{e}!" if e else "") + r + s, st.sampled_from([0, 0, 0, 1]), release, suffix)
op = st.sampled_from(["<", "<=", ">", ">=", "==", "!=", "~="])
clause = st.builds(lambda o, r, s: f"{o}{r}{'' if o == '~=' and '.' not in r else s}",
                   op, release, st.sampled_from(["", "", "rc1", "a1", ".*"]))


# Spellings of versions, valid and nearly so.  A valid spelling takes every part of PEP 440 in its
# alternate forms (case, separators, implicit numbers, implicit post-releases, "v", epochs, local
# labels, surrounding whitespace); two in three are then damaged once (a character inserted, dropped or
# doubled, or junk at the end).  Each part is drawn whole from a list of its spellings, as
# draws are what make Hypothesis slow.
SEPARATORS = ["", ".", "-", "_"]
CASES = [str.lower, str.upper, str.title]


def _often_absent(spellings):
    return st.one_of(st.just(""), st.sampled_from(list(spellings)))


def _labelled(*words):
    """``[sep] word [sep] [number]``, the word in any case: ``.Beta-2``, ``rc``, ``_POST01``."""
    return [s1 + case(word) + s2 + n for s1, word, s2, n, case in
            product(SEPARATORS, words, SEPARATORS, ["", "0", "1", "01", "10"], CASES)]


space = st.sampled_from(["", "", "", "", " ", "\t\n", "\u00a0", "\u2003"])
lead = st.sampled_from(["", "", "v", "V"])
epoch = st.sampled_from(["", "", "", "0!", "1!", "01!", "2!"])
dotted = st.sampled_from([".".join(parts) for n in (1, 2, 3, 4) for parts in product("0120", repeat=n)]
                         + ["01", "10.0", "1.01", "0.0.10"])
pre = _often_absent(_labelled("alpha", "a", "beta", "b", "preview", "pre", "c", "rc"))
post = st.one_of(_often_absent(_labelled("post", "rev", "r")), st.sampled_from(["-0", "-1", "-01", "-10"]))  # 1.0-1
dev = _often_absent(_labelled("dev"))
LOCAL_PARTS = ["abc", "ABC", "7", "07", "ubuntu1", "0", "a", "Z9"]
local = _often_absent("+" + first + "".join(rest) for n in (0, 1, 2) for first in LOCAL_PARTS
                      for rest in product([s + p for s in SEPARATORS[1:] for p in LOCAL_PARTS], repeat=n))
valid = st.tuples(space, lead, epoch, dotted, pre, post, dev, local, space).map("".join)


def _damage(text, how):
    if how is None:
        return text
    where, what = how
    at = round(where * len(text))
    if what == "drop":
        return text[:at] + text[at + 1:]
    if what == "double":
        return text[:at] + text[at:at + 1] + text[at:]
    return text[:at] + what + text[at:]


DAMAGE = [None] * 60 + list(product([0, 0.2, 0.4, 0.5, 0.6, 0.8, 1], ["drop", "double", "x", "r", "c", "post", ".",
                                                                      "-", "_", " ", "+", "!", "*", "..", "é",
                                                                      "\u0661", "\u212a"]))
spelling = st.builds(_damage, valid, st.sampled_from(DAMAGE))


def _packaging(text):
    try:
        return PackagingVersion(text)
    except PackagingInvalid:
        return None


def _ours(text):
    try:
        return Version(text)
    except InvalidVersion:
        return None


# What generated versions are also compared with: neighbours of theirs in every kind of suffix
PANEL = [PackagingVersion(text) for text in (
    "0", "0.0.1", "0.1a1", "1.dev0", "1.0.dev1", "1a0.dev0", "1.0a0", "1.0a1", "1.0b0.post1.dev0", "1.0b1", "1.0c1",
    "1.0rc1.post0", "1", "1.0+0", "1.0+abc", "1.0+7.abc", "1.0.post0.dev1", "1.0.post1", "1.0.post1+abc", "1.0.0.1",
    "1.1", "1.2.post10", "2", "2.0.0+ubuntu1", "1!0", "1!1.0rc1", "1!2.0")]


@settings(max_examples=1000, deadline=None, derandomize=True)
@given(st.lists(spelling, min_size=1, max_size=3))
def test_parses_and_orders_as_packaging_does(texts):
    theirs = [_packaging(t) for t in texts]
    ours = [_ours(t) for t in texts]
    for text, a, b in zip(texts, theirs, ours):
        assert (a is None) == (b is None), (text, a, b)
        if a is not None:
            assert str(b) == str(a), text  # the same normalised spelling
            assert (b.epoch, b.release, b.pre, b.post, b.dev) == (a.epoch, a.release, a.pre, a.post, a.dev), text
    pairs = [(a, b) for a, b in zip(theirs, ours) if a is not None]
    others = pairs + [(a, Version(str(a))) for a in PANEL]
    for a1, b1 in pairs:
        for a2, b2 in others:
            assert (b1 < b2, b1 == b2, b1 > b2) == (a1 < a2, a1 == a2, a1 > a2), (a1, a2)
            assert (b2 < b1, b2 <= b1, b2 >= b1) == (a2 < a1, a2 <= a1, a2 >= a1), (a1, a2)
            assert (b1.key < b2.key, b1.key == b2.key) == (a1 < a2, a1 == a2), (a1, a2)
            assert (b1.public_key == b2.public_key) == (PackagingVersion(a1.public) == PackagingVersion(a2.public))
            same_base = PackagingVersion(a1.base_version) == PackagingVersion(a2.base_version)
            assert (b1.base_key == b2.base_key) == same_base
            assert b1 != b2 or hash(b1) == hash(b2)


def test_the_generator_reaches_valid_and_invalid_spellings_of_every_part():
    """The property above is only as good as its inputs: every kind of spelling must come up."""
    seen = set()

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(spelling)
    def collect(text):
        parsed = _packaging(text)
        if parsed is None:
            seen.add("invalid")
            return
        low = text.strip().lower()
        kinds = {
            "valid": True, "pre": parsed.pre, "post": parsed.post is not None, "dev": parsed.dev is not None,
            "local": parsed.local, "epoch": parsed.epoch, "whitespace": text != text.strip(),
            "v": low.startswith("v"), "upper case": text != text.lower(), "unnormalised": str(parsed) != low,
            "alternate spelling": any(word in low for word in ("alpha", "beta", "pre", "rev")),
            "implicit post": parsed.post is not None and not any(w in low for w in ("post", "rev", "r")),
            "implicit number": any(low.endswith(w) for w in ("a", "b", "rc", "post", "dev", "r")),
        }
        seen.update(kind for kind, present in kinds.items() if present)

    collect()
    assert seen == {"invalid", "valid", "pre", "post", "dev", "local", "epoch", "whitespace", "v", "upper case",
                    "unnormalised", "alternate spelling", "implicit post", "implicit number"}


def test_normalisation_examples():
    cases = {
        " v1.0 ": "1.0", "V1.0": "1.0", "1.0A": "1.0a0", "1.0-ALPHA.2": "1.0a2", "1.0_beta_3": "1.0b3",
        "1.0c1": "1.0rc1", "1.0pre1": "1.0rc1", "1.0preview": "1.0rc0", "1.0-1": "1.0.post1", "1.0r": "1.0.post0",
        "1.0.rev2": "1.0.post2", "1.0-post_3": "1.0.post3", "1.0dev": "1.0.dev0", "1.0-dev-4": "1.0.dev4",
        "01!02.03": "1!2.3", "1.0+Ubuntu-1_07": "1.0+ubuntu.1.7", "1.0a..post1": "1.0a0.post1",
    }
    for text, normal in cases.items():
        assert str(Version(text)) == normal == str(PackagingVersion(text)), text
    for text in ("", "v", "1.", ".1", "1..0", "1.0+", "1.0+a..b", "1.0-", "1.0post--", "1!", "1.0 a1", "\u0661.0",
                 "1.0+\u212a", "1.0\u212a", "1.0é", "1.0.*", "01!", "1.0a1b1", None):
        with pytest.raises(InvalidVersion):
            Version(text)
        with pytest.raises((PackagingInvalid, TypeError)):
            PackagingVersion(text)


def test_ordering_examples():
    ordered = ["1.0.dev0", "1.0a0.dev1", "1.0a0", "1.0a1", "1.0b0", "1.0rc1.dev0", "1.0rc1", "1.0rc1.post1",
               "1.0", "1.0+abc", "1.0+abc.z", "1.0+abc.1", "1.0+0", "1.0+7.abc", "1.0+7.1", "1.0+8",
               "1.0.post0.dev0", "1.0.post0", "1.0.post1", "1.0.1.dev0", "1.1", "2", "1!0.1"]
    for parse in (Version, PackagingVersion):
        versions = [parse(text) for text in ordered]
        assert all(low < high for low, high in zip(versions, versions[1:])), parse
        assert sorted(reversed(versions)) == versions
    assert Version("1.0.0") == Version("1") == Version("v1.0") and Version("1.0+07") == Version("1.0+7")
    assert len({Version("1.0.0"), Version("1"), Version("1.0-0")}) == 2  # 1.0-0 is 1.0.post0


def test_unicode_around_a_version():
    """Whitespace of any kind may surround a version; otherwise only ASCII counts, case-folded or not."""
    odd = [chr(c) for c in range(0x110000)
           if c < 0x80 or chr(c).isspace() or chr(c).isdigit() or chr(c).lower().isascii() or chr(c).upper().isascii()]
    assert len(odd) > 500 and "\u2003" in odd and "\u212a" in odd and "\u0661" in odd
    for char in odd:
        for text in (char + "1.0", "1.0" + char, "1" + char + "0", "1.0+" + char, char + "1.0" + char):
            theirs, ours = _packaging(text), _ours(text)
            assert (ours is None) == (theirs is None), text
            assert ours is None or str(ours) == str(theirs), text


def test_importing_it_imports_nothing_else():
    """Not packaging, nor even re: start-up time is the point of the module."""
    check = ("import sys, patchkit; before = set(sys.modules); import patchkit.versions; "
             "assert set(sys.modules) - before <= {'patchkit.versions', '__future__'}, set(sys.modules) - before; "
             "assert 'packaging' not in sys.modules")
    subprocess.run([sys.executable, "-c", check], check=True)


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


@settings(max_examples=1000, deadline=None, derandomize=True)
@given(st.lists(clause, min_size=1, max_size=2).map(",".join), spelling)
def test_agrees_with_packaging_on_odd_spellings_of_the_candidate(spec, candidate):
    if not _valid(spec):
        return
    assert contains(spec, candidate) == SpecifierSet(spec).contains(candidate, prereleases=True), (spec, candidate)


any_clause = st.one_of(clause, st.builds(lambda o, v: o + v, op, spelling),
                       st.sampled_from(["", ">=", "<1,", "1.0", "===1.0", "=== ", "~=1", "==1.0.post1.*", "=<1"]))
ORDERED = ("<", "<=", ">", ">=")


def _refused_bound(clause: str) -> bool:
    """A post or dev release as a bound: packaging takes it, patchkit refuses it (see contains)."""
    clause = clause.strip()
    if not clause.startswith(ORDERED):
        return False
    version = Version(clause.lstrip("<>=~").strip())
    return version.post is not None or version.dev is not None


@settings(max_examples=3000, deadline=None, derandomize=True)
@given(st.lists(any_clause, min_size=1, max_size=3).map(",".join))
def test_check_accepts_what_packaging_accepts_except_post_and_dev_bounds(spec):
    clauses = [c for c in spec.split(",") if c.strip()]  # no clause at all: refused, unlike packaging
    expected = _valid(spec) and bool(clauses) and not any(_refused_bound(c) for c in clauses)
    try:
        check(spec)
        accepted = True
    except ValueError:
        accepted = False
    assert accepted == expected, spec
    if accepted:  # whatever check accepts, contains matches on as packaging does
        for candidate in ("0", "0.0.dev0", "0.5rc1", "1.0", "1.0.post1", "1.1+local", "2!1.0"):
            assert contains(spec, candidate) == SpecifierSet(spec).contains(candidate, prereleases=True), (spec, candidate)


def test_post_dev_and_local_bounds_are_refused_rather_than_guessed():
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


# -- covers: what a recipe's range means -------------------------------------

def test_covers_counts_a_prerelease_or_dev_release_as_the_release_it_leads_to():
    cases = {
        ">=0.6.1,<0.10": {"0.9.1rc1": True, "0.6.1rc1": True, "0.6.1.dev0": True, "0.10.0rc1": False, "0.10.0.dev": False},
        "<0.8": {"0.8.0.dev": False, "0.8.0rc1": False, "0.7.9.dev3": True},
        ">=0.4,<0.8": {"0.4.0.dev": True, "0.7.0.dev": True, "0.3.1.dev": False, "0.8.0.dev": False},
        ">=0.9.1,<0.24": {"0.19.1rc2.dev1637": True, "0.24.0rc1": False, "0.9.1rc1": True},
        # a bound that is itself a pre-release of the same release compares pre-releases one by one
        ">=0.11.0rc2": {"0.11.0rc1": False, "0.11.0rc2": True, "0.11.0.dev0": False, "0.12.0.dev0": True},
        "==0.9.1": {"0.9.1rc1": True, "0.9.1": True, "0.9.2rc1": False},
        "!=0.9.1": {"0.9.1rc1": False},
        "~=0.4.1": {"0.4.1.dev0": True, "0.5.0rc1": False},
        "===0.9.1rc1": {"0.9.1rc1": True, "0.9.1": False},
    }
    for spec, table in cases.items():
        for candidate, expected in table.items():
            assert covers(spec, candidate) is expected, (spec, candidate)
    # PEP 440 order alone (contains) says otherwise where a .dev or rc of the lower bound is concerned
    assert not contains(">=0.4,<0.8", "0.4.0.dev") and not contains("==0.9.1", "0.9.1rc1")
    assert not covers(">=0.4", "main") and not covers(">=0.4", "")


def _release_line(text: str) -> str:
    """packaging's view of a version without its pre-release and dev parts: the oracle's side of covers."""
    v = PackagingVersion(text)
    out = (f"{v.epoch}!" if v.epoch else "") + ".".join(map(str, v.release))
    out += f".post{v.post}" if v.post is not None else ""
    return out + (f"+{v.local}" if v.local else "")


def _trim(release: tuple) -> tuple:
    """1.0.0 and 1 are one release."""
    while release and release[-1] == 0:
        release = release[:-1]
    return release


def _oracle(spec: str, candidate: str) -> bool:
    """Clause by clause, packaging on the candidate's release line, unless the bound is a pre-release of that release."""
    v = PackagingVersion(candidate)
    for clause in (c.strip() for c in spec.split(",") if c.strip()):
        bound = PackagingVersion(clause.lstrip("<>=!~").strip().removesuffix(".*"))
        same = bound.pre is not None and (bound.epoch, _trim(bound.release)) == (v.epoch, _trim(v.release))
        chosen = candidate if same or not v.is_prerelease else _release_line(candidate)
        if not SpecifierSet(clause).contains(chosen, prereleases=True):
            return False
    return True


@settings(max_examples=3000, deadline=None, derandomize=True)
@given(st.lists(clause, min_size=1, max_size=3).map(",".join), version)
def test_covers_agrees_with_packaging_on_each_candidates_release_line(spec, candidate):
    if not _valid(spec):
        return
    assert covers(spec, candidate) == _oracle(spec, candidate), (spec, candidate)


def test_has_upper_bound():
    for spec in ("<0.24", ">=0.9.1,<=1.0", "==1.2.*", "~=2.0", "===1.0", ">=0.4,==0.5"):
        assert has_upper_bound(spec), spec
    for spec in (">=0.9.1", ">0.4,!=0.5", ""):
        assert not has_upper_bound(spec), spec
