"""`patchkit run`: a recipe planned as `diff` plans it, then handed to the import hook instead of written.

:func:`prepare` checks everything `apply` would (version, every point in
every file) before the command starts, writes each patched module's text to
the run cache (``$PATCHKIT_HOME/run-cache/<source sha256>-<recipe key>.py``,
atomically, shared by every later process) and returns the environment that
makes the command's Python processes install :mod:`patchkit.hook.importhook`.
Each module's entry records the sha256 of its source and of its patched
text: the hook executes a cached (or rebuilt) text only when it is that one.
A process on a node without the cache makes its entry with
:func:`patchkit.hook.runcache.rebuild`, from the recipe text in the environment.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

from patchkit.hook.importhook import ENV
from patchkit.hook.runcache import cache_dir, cache_name, text_sha256, write
from patchkit.core.model import Settings

HOOK_DIR = str(Path(__file__).resolve().parent / "_run")


def module_name(relpath: str) -> str:
    """``verl/workers/actor/dp_actor.py`` -> ``verl.workers.actor.dp_actor`` (``pkg/__init__.py`` -> ``pkg``)."""
    parts = relpath[:-3].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def prepare(settings: Settings, recipe_text: str, root: Optional[str] = None,
            skip_version_check: bool = False, strict_versions: Optional[bool] = None) -> Dict[str, Any]:
    """The ``PATCHKIT_RUN`` description, with the cache written; a PatchkitError (nothing started) otherwise.
    ``version_note`` says once that the version is past the recipe's proven range (see :func:`plan`)."""
    from patchkit.state.planning import plan

    p = plan(settings, root, skip_version_check, strict_versions)
    key = hashlib.sha256(json.dumps([recipe_text, list(settings.overrides)]).encode()).hexdigest()[:16]
    points = list(settings.active_points())
    modules: Dict[str, Any] = {}
    skipped: List[str] = []
    for f in p.files:
        if not f.changes:  # patchkit's lines are in the file already (applied): nothing to add in memory
            skipped.append(str(f.path))
            continue
        sha = hashlib.sha256(f.data).hexdigest()
        write(os.path.join(cache_dir(), cache_name(sha, key)), f.result.text)
        modules[module_name(f.relpath)] = {"sha256": sha, "patched_sha256": text_sha256(f.result.text),
                                           "path": str(f.path),
                                           "points": [points.index(pt) for pt in f.points]}
    return {"key": key, "recipe": recipe_text, "path": settings.recipe.path, "overrides": list(settings.overrides),
            "modules": modules, "already_applied": skipped, "version": p.installed.shown,
            "version_skipped": p.version_skipped, "version_note": p.version_note}


def environment(spec: Dict[str, Any], base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """``base`` (this process's environment) with the hook's folder first on PYTHONPATH and ``PATCHKIT_RUN`` set."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([HOOK_DIR] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env[ENV] = json.dumps({k: spec[k] for k in ("key", "recipe", "path", "overrides", "modules")})
    return env
