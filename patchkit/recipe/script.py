"""A recipe whose target is a script, ``python train.py``, rather than a file of a package.

The target names the script instead of a package::

    target:
      script: train.py   # from the recipe file's folder; --root DIR: the folder holding it

A script has no package, distribution or version, so ``script:`` takes none
of ``package``, ``distribution``, ``versions``, ``excluded``, ``instead`` or
``tags``.  ``files:`` may be left out: a script recipe patches the script
alone (``files: [train.py]`` if given, and the same in any point's
``files:``).  The path is a ``.py`` file, relative (with ``/``, no ``..``) or
absolute.  Whether it is there, and not a link out of its folder, is checked
where it is found (:func:`patchkit.state.targets.locate`), since ``--root``
moves it.
"""

from __future__ import annotations

import os
from typing import Any, Tuple

from patchkit.core import model as m
from patchkit.recipe.reader import MAX_NAME, Reader
from patchkit.recipe.yamlpos import shorten

NOT_WITH_SCRIPT = ("package", "distribution", "versions", "excluded", "instead", "tags")
MAX_PATH = 4096


def target(r: Reader, given: Any) -> m.Target:
    """``target:`` with ``script:`` (``given`` is the target's mapping); every error at its line."""
    here = ("target", "script")
    both = [k for k in NOT_WITH_SCRIPT if k in given]
    if both:
        raise r.fail(("target", both[0]), f"target.script names a script, which has no {both[0]}: a target is a "
                     "script or a package, not both", f"remove target.{both[0]}, or target.script to patch a package",
                     key=True)
    path = r.string(here, "the script's path, e.g. train.py")
    _check_path(r, here, path)
    script = m.Script(path, _base(r.path), r.where(here))
    files = tuple(r.strings(("target", "files"))) if "files" in given else (script.name,)
    for i, f in enumerate(files):
        if f != script.name:
            raise r.fail(("target", "files", i), f"target.files names {shorten(f)!r}, but a script recipe patches "
                         f"its script {script.name} alone", "leave target.files out (the script is the file)")
    return m.Target(package="", distribution=script.name, versions="", files=files, script=script)


def check_points(r: Reader, t: m.Target, points: Tuple[m.Point, ...]) -> None:
    """A point's ``files:`` in a script recipe can name only the script."""
    if t.script is None:
        return
    for i, p in enumerate(r.get(("points",)) or ()):
        for j, f in enumerate(p.get("files", ()) if isinstance(p, dict) else ()):
            if f != t.script.name:
                raise r.fail(("points", i, "files", j), f"the point's files name {shorten(str(f))!r}, but a script "
                             f"recipe patches its script {t.script.name} alone",
                             "leave the point's files: out")


def _check_path(r: Reader, here: Tuple[Any, ...], path: str) -> None:
    if "\x00" in path or "\\" in path:
        raise r.fail(here, f"target.script {shorten(path)!r} contains a NUL byte or a backslash",
                     "write the script's path with / separators, e.g. scripts/train.py")
    if len(path) > MAX_PATH or any(len(part.encode("utf-8", "surrogatepass")) > 255 for part in path.split("/")):
        raise r.fail(here, f"target.script {shorten(path)!r} is too long ({len(path)} characters)",
                     f"write the script's real path: at most {MAX_PATH} characters, each part at most 255 bytes")
    parts = path.split("/")
    if ".." in parts:
        raise r.fail(here, f"target.script {shorten(path)!r} leaves the recipe's folder ('..')",
                     "write a path inside the recipe file's folder, or the script's absolute path, or put the "
                     "recipe beside the script")
    if not path.endswith(".py") or parts[-1] == ".py" or len(parts[-1]) > MAX_NAME:
        raise r.fail(here, f"target.script {shorten(path)!r} is not a .py file",
                     "name the Python script the job runs, e.g. train.py")


def _base(recipe_path: str) -> str:
    """The folder a relative script path is taken from: the recipe file's, as an absolute path."""
    return os.path.abspath(os.path.dirname(recipe_path) or ".")
