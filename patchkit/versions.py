"""PEP 440 version ranges (``>=0.4,<0.8``), matched with pre-releases allowed.

Bounds are releases or pre-releases (``<0.8``, ``>=0.11.0rc1``, ``==1.2.*``,
``~=2.0``); candidates may be any version (post, dev and local included).

``packaging.specifiers`` would do this, but importing it pulls in
``packaging.tags`` (platform, subprocess, logging, sysconfig): more than the
rest of a `patchkit diff`.  ``packaging.version`` is light, so versions are
parsed and ordered by it and only the operators are written out here, rule
for rule as in PEP 440; the test suite checks them against
``packaging.specifiers`` on many generated cases.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version


def contains(specifiers: str, version: str) -> bool:
    """Whether ``version`` satisfies every clause of ``specifiers`` (pre-releases included)."""
    try:
        candidate = Version(version)
    except InvalidVersion:
        return False
    return all(_clause(clause.strip(), candidate, version) for clause in specifiers.split(",") if clause.strip())


def _split(clause: str):
    for op in ("===", "~=", "==", "!=", "<=", ">=", "<", ">"):
        if clause.startswith(op):
            return op, clause[len(op):].strip()
    raise ValueError(f"not a version specifier: {clause!r}")


def _clause(clause: str, candidate: Version, raw: str) -> bool:
    op, text = _split(clause)
    if op == "===":
        return raw.strip().lower() == text.lower()
    if op in ("==", "!="):
        equal = _prefix_equal(candidate, text[:-2]) if text.endswith(".*") else _equal(candidate, Version(text))
        return equal if op == "==" else not equal
    if op == "~=":
        spec = Version(text)
        prefix = ".".join(str(part) for part in spec.release[:-1])
        if spec.epoch:
            prefix = f"{spec.epoch}!{prefix}"
        return candidate >= spec and _prefix_equal(candidate, prefix)
    spec = Version(text)
    if spec.is_postrelease or spec.is_devrelease or spec.local:
        raise ValueError(f"patchkit ranges use release or pre-release bounds, not {clause!r}")
    public = Version(candidate.public)
    if op == "<=":
        return public <= spec
    if op == ">=":
        return public >= spec
    if op == "<":
        if not public < spec:
            return False
        # <V does not admit pre-releases of V itself, unless V is one
        return spec.is_prerelease or not candidate.is_prerelease or Version(candidate.base_version) != Version(spec.base_version)
    # ">": not the post-releases or local versions of V itself
    if not public > spec:
        return False
    same = Version(candidate.base_version) == Version(spec.base_version) and candidate.pre == spec.pre  # 1.0 == 1
    return not (same and (candidate.is_postrelease or candidate.local is not None))


def _equal(candidate: Version, spec: Version) -> bool:
    if spec.local is None:  # no local label asked for: the candidate's is ignored
        return Version(candidate.public) == spec
    return candidate == spec


def _prefix_equal(candidate: Version, prefix_text: str) -> bool:
    prefix = Version(prefix_text)
    if candidate.epoch != prefix.epoch:
        return False
    wanted = list(prefix.release)
    have = list(candidate.release)
    have += [0] * (len(wanted) - len(have))  # 1.2 matches ==1.2.0.*
    return have[: len(wanted)] == wanted
