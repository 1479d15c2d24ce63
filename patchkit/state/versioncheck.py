"""Whether a recipe may patch the version found here, and what to say about it.

A recipe's ``target.versions`` is the range of releases it is proven on: the
tests apply it to the real files of those releases.  The structure decides
the rest, since every point must still fit as the recipe says:

* a version in the range (or a release named in ``target.tags``) is patched;
* a version newer than the range (a later release, a pre-release or dev
  build of one, a checkout past the newest release) is patched, and
  :func:`check_version` returns a note saying so, to be shown once;
* code with no version (no metadata, nothing in the tree, or a version that is
  not PEP 440) is patched, with a note when the recipe names a range;
* refused: a version older than the range, one matched by
  ``target.excluded`` (with the recipe's reason), and, when strict
  (``--strict-versions`` or ``PATCHKIT_STRICT_VERSIONS=1``), anything the
  range does not take.
"""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

from patchkit.core.errors import TargetError
from patchkit.core.model import Target
from patchkit.state.targets import Installed

SKIP_VERSION_CHECK = "--skip-version-check"
STRICT_FLAG = "--strict-versions"
STRICT_ENV = "PATCHKIT_STRICT_VERSIONS"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def strict_default() -> bool:
    """``PATCHKIT_STRICT_VERSIONS`` from the environment: whether only proven releases are patched."""
    value = os.environ.get(STRICT_ENV, "").strip().lower()
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    raise TargetError(f"{STRICT_ENV}={os.environ[STRICT_ENV]!r} is neither on nor off",
                      hint=f"set {STRICT_ENV}=1 to patch only the releases a recipe is proven on, or unset it")


def check_version(installed: Installed, target: Target, recipe_id: str, recipe_path: str = "",
                  strict: Optional[bool] = None) -> str:
    """Refuse a version the recipe must not patch (see the module's docstring); return the note to show once for a
    version it patches beyond its proven range ("" when there is nothing to say).  ``strict`` None: the environment's."""
    from patchkit.recipe import versions

    strict = strict_default() if strict is None else strict
    dist, shown = target.distribution, installed.shown
    known = installed.version is not None and _pep440(installed.version)
    if known and target.excluded and versions.covers(target.excluded, installed.version):
        reason = target.excluded_reason or "the recipe's places mean something else in these releases"
        raise TargetError(f"{recipe_id} excludes {dist} {target.excluded} and {dist} {shown} is installed "
                          f"({installed.version_from}): {reason}",
                          hint=elsewhere(installed, target, recipe_id) or
                          "check out a release outside the excluded ones, or write a recipe of your own for this one")
    if not target.versions and not target.tags:
        return ""
    proven = _proven(target)
    if not known:
        if strict:
            _refuse(installed, target, recipe_id, recipe_path, strict)
        return (f"{_unknown(installed, dist)}; {recipe_id} is proven on {dist} {proven}: its places were found by "
                "their structure; review them with `patchkit diff`")
    if fits(target, installed):
        return ""
    if not strict and target.versions and _newer(target, installed):
        past = "may be past" if installed.at_least and versions.covers(target.versions, installed.version) else \
            "is newer than"
        return (f"{dist} {shown} {past} the releases {recipe_id} is proven on ({proven}): its places were found by "
                f"their structure; review them with `patchkit diff` ({STRICT_FLAG} refuses such versions)")
    _refuse(installed, target, recipe_id, recipe_path, strict)
    return ""  # not reached: _refuse raises


def _pep440(version: str) -> bool:
    from patchkit.recipe.versions import InvalidVersion, Version

    try:
        Version(version)
    except InvalidVersion:
        return False
    return True


def _unknown(installed: Installed, dist: str) -> str:
    if installed.version is None:
        return f"cannot tell which version of {dist} is in {installed.root} (no metadata, nothing declared in the tree)"
    if installed.kind == "branch":
        return f"{dist} in {installed.root} is a checkout of git branch {installed.ref} with no release tag: no version"
    return (f"{dist} declares the version {installed.version!r} ({installed.version_from}), which is not a PEP 440 "
            "version: read as no version")


def _proven(target: Target) -> str:
    """The proven range for people: ``>=0.9.1,<=0.23.0.post1 (newest 0.23.0.post1)``, with the tags named."""
    from patchkit.recipe.versions import newest

    parts = []
    if target.versions:
        top = newest(target.versions)
        parts.append(target.versions + (f", newest {top}" if top else ""))
    if target.tags:
        parts.append(f"releases {', '.join(target.tags)}")
    return "; ".join(parts)


def _newer(target: Target, installed: Installed) -> bool:
    """Past the proven range: a version above its upper bound, or a checkout known only from below that is not older."""
    from patchkit.recipe import versions

    if installed.at_least:
        return versions.covers(target.versions, installed.version) or versions.beyond(target.versions, installed.version)
    return versions.beyond(target.versions, installed.version)


def fits(target: Target, installed: Installed) -> bool:
    """Whether the recipe is proven on the version: a release line its range takes
    (:func:`patchkit.recipe.versions.covers`), a release named in ``target.tags``, or a lower bound (``at_least``)
    under a range without an upper bound."""
    from patchkit.recipe import versions

    if installed.version is None:
        return False
    if installed.ref is not None and installed.ref in target.tags:
        return True  # a release the recipe names by its tag or branch
    if not target.versions:
        return False
    if installed.at_least and versions.has_upper_bound(target.versions):
        return False
    return versions.covers(target.versions, installed.version)


def _refuse(installed: Installed, target: Target, recipe_id: str, recipe_path: str, strict: bool) -> None:
    dist = target.distribution
    past = (f"if you know this code has the shape the recipe expects, pass {SKIP_VERSION_CHECK}: only the version "
            "check is skipped, the recipe's points must still match")
    strictly = f"only releases it is proven on are patched ({STRICT_FLAG} or {STRICT_ENV})"
    if installed.version is None or not _pep440(installed.version):
        message = f"{_unknown(installed, dist)}; {recipe_id} is proven on {dist} {_proven(target)}, and {strictly}"
    else:
        why = f", and {strictly}" if strict and target.versions and _newer(target, installed) else ""
        message = (f"{dist} {installed.shown} is installed ({installed.version_from}); "
                   f"{recipe_id} is proven on {dist} {_proven(target)}{why}")
    if installed.version is None:
        raise TargetError(message, hint="point --root at a site-packages folder with the package's .dist-info, or at "
                                        f"a git checkout of a release\n  hint: {past}")
    hints = [elsewhere(installed, target, recipe_id)]
    if not hints[0]:
        name = os.path.basename(recipe_path) if recipe_path else f"{recipe_id}.yaml"
        if installed.kind == "branch":
            change = f"add the branch to target.tags there (tags: [{installed.ref}])"
        else:
            change = "change target.versions there to take this version"
        hints[0] = (f"no built-in recipe covers {dist} {installed.shown}; to adapt one, copy "
                    f"{recipe_path or name} into a folder of your own (its file name must stay its id), {change}, "
                    f"and check it with `patchkit diff ./{name}`")
    if installed.kind == "branch":
        hints.append(f"git branch {installed.ref} has no tag in its history: check out a release the recipe supports "
                     "(a branch made from one of its tags counts as that release)")
    elif installed.kind in ("tag", "scm", "forked"):
        hints.append("check out a release the recipe supports, by its tag or its release branch (a branch made from "
                     "one of its tags counts as that release)")
    hints.append(past)
    raise TargetError(message, hint="\n  hint: ".join(hints))


def elsewhere(installed: Installed, target: Target, recipe_id: str) -> str:
    """The built-in recipes proven on this version, ``instead`` first, as a hint ("" when there are none)."""
    dist = target.distribution
    others = covering(installed, target, recipe_id)
    listed = ", ".join(f"{rid} ({dist} {rng})" for rid, rng in others if rid != target.instead)
    if others and others[0][0] == target.instead:
        return (f"use {target.instead} ({dist} {others[0][1]}) for this version"
                + (f"; other built-in recipes for it: {listed}" if listed else ""))
    return f"built-in recipes for {dist} {installed.shown}: {listed}" if others else ""


def covering(installed: Installed, target: Target, recipe_id: str) -> List[Tuple[str, str]]:
    """``(id, range)`` of the built-in recipes for the same distribution proven on this version, ``instead`` first."""
    from patchkit.core.errors import PatchkitError
    from patchkit.recipe.load import all_recipes

    try:
        recipes = all_recipes()
    except PatchkitError:
        return []
    found = []
    for s in recipes:
        other = s.recipe.target
        if s.id == recipe_id or other.distribution != target.distribution or not (other.versions or other.tags):
            continue
        try:
            if fits(other, installed):
                found.append((s.id, other.versions))
        except ValueError:
            continue
    return sorted(found, key=lambda pair: (pair[0] != target.instead, pair[0]))
