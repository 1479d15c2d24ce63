"""Where ``patchkit traces`` (and ``collect``) look when no folder is named: this project's captures first.

Root's state folder is shared by every project on a node that runs as root, and so is its captures index
(``$PATCHKIT_HOME/captures``): listing every folder in it shows a user other people's captures, and makes
their broken ones look like the user's own.  So the places are taken in three groups, in this order:

* ``applied``: the ``profiler.save_path`` of every recipe the ledger says is applied; a relative save path
  is relative to the training job's working directory, which patchkit cannot know, so it is taken relative
  to ``cwd`` (the folder ``patchkit traces`` runs in; over Ray, the driver's, on every node);
* ``here``: the folders of the index that lie in ``cwd`` (a job run from here wrote them), and ``cwd``
  itself when it is a save path (it holds ``patchkit-manifests/``);
* ``other``: every other folder of the index: searched only when asked (``--all``).

Everything here returns data; nothing prints.
"""

from __future__ import annotations

import os
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from patchkit.core import manifest
from patchkit.core.errors import PatchkitError

GROUPS = ("applied", "here", "other")  # the order captures are listed in


class Place(NamedTuple):
    folder: str  # absolute, normalised; it may not exist (yet)
    why: str  # "recipe verl-fsdp-update", "the current folder", or the index's path
    group: str  # one of GROUPS


def places(cwd: Optional[str] = None, ledger=None) -> List[Place]:
    """Every place, each folder once (in the first group that names it), applied ones first; existing or not."""
    cwd = os.path.abspath(cwd or os.getcwd())
    out: Dict[str, Place] = {}
    for path, why in _applied_save_paths(ledger):
        folder = os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))
        out.setdefault(folder, Place(folder, why, "applied"))
    if os.path.isdir(os.path.join(cwd, manifest.FOLDER)):
        out.setdefault(cwd, Place(cwd, "the current folder", "here"))
    index = os.path.join(manifest.home(), manifest.INDEX)
    for path in manifest.indexed_folders():
        folder = os.path.normpath(path)
        out.setdefault(folder, Place(folder, index, "here" if _inside(folder, cwd) else "other"))
    return sorted(out.values(), key=lambda p: GROUPS.index(p.group))


def default_folders(cwd: Optional[str] = None, ledger=None, every: bool = False) -> List[Tuple[str, str]]:
    """(folder, why) of the places that exist: this project's, or, with ``every``, the index's others too."""
    return [(p.folder, p.why) for p in places(cwd, ledger) if (every or p.group != "other") and os.path.isdir(p.folder)]


def others(cwd: Optional[str] = None, ledger=None) -> int:
    """How many folders of the index, existing, are other projects' (left out unless ``--all``)."""
    return sum(1 for p in places(cwd, ledger) if p.group == "other" and os.path.isdir(p.folder))


def nothing_there(spots: List[Place], every: bool) -> Tuple[str, str]:
    """(message, hint) when none of the places to search exists: what is missing, said as it is."""
    index = os.path.join(manifest.home(), manifest.INDEX)
    yet = [p for p in spots if p.group == "applied"]
    more = sum(1 for p in spots if p.group == "other" and os.path.isdir(p.folder))
    left = f"; {more} capture folder(s) of other projects are listed in {index}: `patchkit traces --all`" \
        if more and not every else ""
    if yet:
        named = ", ".join(f"{p.folder} ({p.why})" for p in yet[:3]) + (", ..." if len(yet) > 3 else "")
        return (f"no capture yet: the save path of the applied recipe does not exist yet: {named}{left}",
                "it is made when the job's first recording window closes; a relative save path is taken from the "
                "folder `patchkit traces` runs in: run it where the job runs, or name the folder")
    return (f"no folder to look in: no recipe is applied, and no folder listed in {index} lies in the current "
            f"folder{left}", "name the folder a recipe's profiler.save_path points at (`patchkit traces DIR`)")


def _inside(folder: str, top: str) -> bool:
    try:
        return os.path.commonpath([folder, top]) == top
    except ValueError:
        return False


def _applied_save_paths(ledger=None) -> Iterable[Tuple[str, str]]:
    from patchkit.state.ledger import Ledger
    from patchkit.recipe.load import load

    led = ledger or Ledger()
    seen = set()
    for rec in led.load().files.values():
        for rid, applied in sorted(rec.recipes.items()):
            ident = (rid, tuple(applied.overrides))
            if ident in seen:
                continue
            seen.add(ident)
            try:
                s = load(applied.recipe_path or rid, applied.overrides)
            except PatchkitError:  # the recipe file is gone or changed: its default folder is still worth a look
                from patchkit.recipe.load import default_save_path

                yield default_save_path(rid), f"recipe {rid} (its file could not be read)"
                continue
            yield s.recipe.profiler.save_path, f"recipe {rid}"
