"""A recipe's version range (``>=0.4,<0.8``): PEP 440 by ``packaging``, read as release lines.

:func:`covers` is what a recipe's range means: a pre-release or development
release of X (``0.9.1rc1``, ``0.8.0.dev``) is matched as X itself, because
it carries X's code: a release candidate is X's code, and a checkout of
``main`` whose version file says ``0.8.0.dev`` is on the way to 0.8.0.  So
``>=0.4`` takes ``0.4.0.dev``, ``<0.8`` refuses ``0.8.0.dev`` and
``0.8.0rc1``, and ``>=0.6.1,<0.10`` takes ``0.9.1rc1``.  Only a clause whose
bound is itself a pre-release or development release of that same X
(``>=0.11.0rc2``) compares them one by one, in PEP 440 order.  Each clause is
then matched by ``packaging.specifiers`` with pre-releases allowed.

Bounds of ``<``, ``<=``, ``>``, ``>=`` are releases or pre-releases (``<0.8``,
``>=0.11.0rc1``), or after ``<=`` a post-release (``<=0.23.0.post1``, the newest
release proven); :func:`check` refuses development releases there, and post
releases after the others.
Candidates may be any version (post, dev and local included).  packaging
22.0 is the oldest that refuses what :func:`check` must (``==1.0rc1.*``);
before 26.1 it misreads two rare cases: ``>1.0a1`` refuses ``1.0.post1``, and
(before 24.0) a ``.*`` prefix mishandles epochs (``!=0.0.*`` and ``1!1.1``).

Import this module lazily (inside the function that needs it):
``packaging.specifiers`` pulls in ``packaging.tags`` (platform, subprocess,
logging, sysconfig): some 30 ms, a third of ``patchkit --help``'s start-up.
"""

from __future__ import annotations

from typing import List

from packaging.specifiers import InvalidSpecifier, Specifier
from packaging.version import InvalidVersion, Version

__all__ = ["InvalidVersion", "Version", "beyond", "check", "covers", "has_upper_bound", "newest"]

_ORDERED = ("<", "<=", ">", ">=")
_CAPPING = ("<", "<=", "==", "~=", "===")
_OPERATORS = ("===", "~=", "==", "!=", "<=", ">=", "<", ">")  # longest first, for error messages


def covers(specifiers: str, version: str) -> bool:
    """Whether the release lines in ``specifiers`` include ``version`` (see the module's docstring).

    A ``version`` that is no PEP 440 version is in no range; bad ``specifiers`` raise ValueError.
    """
    clauses = _clauses(specifiers)
    try:
        candidate = Version(version)
    except InvalidVersion:
        return False
    return all(_takes(spec, candidate, version) for spec in clauses)


def _takes(spec: Specifier, candidate: Version, version: str) -> bool:
    """Whether one clause takes ``candidate`` (``version`` as written), read as release lines."""
    if spec.operator == "===":
        return spec.contains(version.strip(), prereleases=True)  # arbitrary equality: the string itself
    return spec.contains(_compared(spec, candidate), prereleases=True)


def _compared(spec: Specifier, candidate: Version) -> Version:
    """What a clause compares: ``candidate`` itself against a pre-release bound of its own release, else its line."""
    bound = _bound(spec)
    same = bound.is_prerelease and Version(bound.base_version) == Version(candidate.base_version)
    return candidate if same else _release_line(candidate)


def _bound(spec: Specifier) -> Version:
    return Version(spec.version[:-2] if spec.version.endswith(".*") else spec.version)


def beyond(specifiers: str, version: str) -> bool:
    """Whether ``version`` is newer than every release ``specifiers`` takes: every clause it fails caps from above
    (``<``, ``<=``, ``==``, ``~=``) and the version is past that clause's bound.

    A later release, a pre-release or development release of one (``0.24.0rc1`` past ``<=0.23.0.post1``) and a
    checkout on the way to one are beyond; an older one, one that fails ``!=`` or ``===``, and one that is no
    PEP 440 version are not.  Bad ``specifiers`` raise ValueError.
    """
    clauses = _clauses(specifiers)
    try:
        candidate = Version(version)
    except InvalidVersion:
        return False
    failed = [spec for spec in clauses if not _takes(spec, candidate, version)]
    return bool(failed) and all(_past(spec, candidate) for spec in failed)


def _past(spec: Specifier, candidate: Version) -> bool:
    """Whether ``candidate``, failing ``spec``, fails it by being newer than the clause's bound."""
    if spec.operator not in ("<", "<=", "==", "~="):
        return False
    chosen, bound = _compared(spec, candidate), _bound(spec)
    if spec.version.endswith(".*"):  # ==1.2.*: past it when the release's first numbers are larger
        width = len(bound.release)
        return chosen.epoch > bound.epoch or (chosen.epoch == bound.epoch and chosen.release[:width] > bound.release)
    return chosen >= bound if spec.operator == "<" else chosen > bound


def newest(specifiers: str) -> str:
    """The newest release a range names (``<=0.23.0.post1`` or ``==0.23.0.post1`` -> ``0.23.0.post1``), or "" when
    no clause names one (``<0.8``, ``>=0.4``)."""
    return next((spec.version for spec in _clauses(specifiers) if spec.operator in ("<=", "==", "===")
                 and not spec.version.endswith(".*")), "")


def has_upper_bound(specifiers: str) -> bool:
    """Whether ``specifiers`` caps versions from above (``<``, ``<=``, ``==``, ``~=``, ``===``)."""
    return any(spec.operator in _CAPPING for spec in _clauses(specifiers))


def check(specifiers: str) -> None:
    """Raise ValueError naming the first clause of ``specifiers`` that patchkit cannot match on, and why."""
    if not specifiers.replace(",", "").strip():
        raise ValueError("no version clause")
    for clause in (c.strip() for c in specifiers.split(",") if c.strip()):
        try:
            spec = Specifier(clause)
        except InvalidSpecifier:
            raise ValueError(f"{clause!r}: {_why_invalid(clause)}") from None
        if spec.operator in _ORDERED:
            bound = Version(spec.version)
            if bound.dev is not None or (bound.post is not None and spec.operator != "<="):
                raise ValueError(f"{clause!r}: patchkit ranges use release or pre-release bounds "
                                 "(a post-release only as the newest proven, after <=)")


def _clauses(specifiers: str) -> List[Specifier]:
    """The clauses of ``specifiers``, comma-separated; InvalidSpecifier (a ValueError) for a bad one."""
    return [Specifier(c.strip()) for c in specifiers.split(",") if c.strip()]


def _release_line(version: Version) -> Version:
    """``version`` without its pre-release and development parts: ``0.9.1rc1`` -> ``0.9.1``, ``1.0.post1.dev2`` -> ``1.0.post1``."""
    if not version.is_prerelease:
        return version
    text = (f"{version.epoch}!" if version.epoch else "") + ".".join(map(str, version.release))
    if version.post is not None:
        text += f".post{version.post}"
    if version.local is not None:
        text += f"+{version.local}"
    return Version(text)


def _why_invalid(clause: str) -> str:
    """What is wrong with a clause ``packaging`` refused, in words a recipe author can act on."""
    op = next((o for o in _OPERATORS if clause.startswith(o)), None)
    if op is None:
        return "no operator: start with one of <, <=, >, >=, ==, !=, ~=, ==="
    text = clause[len(op):].strip()
    if op == "===":
        return "=== takes one string, without spaces"
    prefix = text.endswith(".*")
    if prefix and op not in ("==", "!="):
        return "only == and != take a .* prefix"
    try:
        version = Version(text[:-2] if prefix else text)
    except InvalidVersion:
        return f"{text!r} is not a PEP 440 version"
    if prefix and (version.pre or version.post is not None or version.dev is not None or version.local):
        return "a .* prefix is made of release numbers only"
    if op == "~=" and len(version.release) < 2:
        return "~= needs at least two release numbers, e.g. ~=2.0"
    if version.local is not None and op not in ("==", "!="):
        return "only == and != take a local version label"
    return "not a PEP 440 version clause"
