"""The settings every backend takes: their defaults, how they are checked, and the note for those a backend cannot use.

``patchkit.runtime.configure(recipe_id, **settings)`` is handed ``backend``
and the rows of :mod:`patchkit.core.vocabulary`; :func:`validate` says what is
wrong with them (the vocabulary's checks, the combinations that do not go
together, then the backend's own :meth:`~patchkit.runtime.backend.Backend.check`),
and :func:`normalize` fills in the defaults.  The recipe loader asks the same.

Standard library only: recipes are checked with it, and the runtime imports it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

from patchkit.core.vocabulary import PERIODIC, SETTING, SETTINGS, problem
from patchkit.runtime import finder

DEFAULT = "npu"  # the backend of a recipe that names none
KEYS = ("backend",) + tuple(SETTING)  # what runtime.configure() takes
DEFAULTS: Dict[str, Any] = {"backend": DEFAULT, **{s.name: s.default for s in SETTINGS}}


def normalize(settings: Mapping[str, Any]) -> Dict[str, Any]:
    """Settings with defaults filled in and lists made tuples (validate first)."""
    s = dict(DEFAULTS)
    s.update({k: v for k, v in settings.items() if k in KEYS})
    if isinstance(s["contents"], (list, tuple)):
        s["contents"] = tuple(s["contents"])
    for key in ("ranks", "replicas"):
        if isinstance(s[key], list):
            s[key] = tuple(s[key])
    if isinstance(s["steps"], (list, tuple)):
        s["steps"] = tuple(sorted(set(s["steps"])))
    return s


def _name(key: str) -> str:
    return SETTING[key].key if key in SETTING else key


def validate(settings: Mapping[str, Any]) -> List[str]:
    """Problems a recipe author must fix before these settings can profile anything.

    Empty list: fine.  Checks every setting against the vocabulary
    (:mod:`patchkit.core.vocabulary`) and the backend against those there are
    (:func:`patchkit.runtime.finder.names`), then, when all of that holds, asks
    the backend's ``check()`` what its profiler would get wrong silently (a
    save_path torch_npu would drop, ...).
    """
    problems: List[str] = []
    for k in settings:
        if k not in KEYS:
            problems.append(f"unknown setting {k!r}; known: {', '.join(_name(x) for x in KEYS)}")
    s = dict(DEFAULTS)
    s.update({k: v for k, v in settings.items() if k in KEYS})

    backend = s["backend"]
    if not isinstance(backend, str) or backend not in finder.names():
        problems.append(f"backend {backend!r} is not one of {', '.join(finder.names())}")
    for setting in SETTINGS:
        found = problem(setting, s[setting.name])
        if found:
            problems.append(found)
    problems += _combinations(s) if not problems else []
    if problems:
        return problems
    try:
        chosen = finder.get(backend)
    except (ImportError, TypeError) as exc:  # a module that does not import, or defines no backend
        return [f"backend {backend!r} cannot be used: {exc}"]
    return list(chosen.check(s))


def _combinations(s: Mapping[str, Any]) -> List[str]:
    """Settings each valid on its own that do not go together."""
    if s["replicas"] != "all" and s["ranks"] != "all":
        return ["profiler.replicas and profiler.ranks are both set: pick one"]
    if s["trigger"] == "manual":
        fixed = [f"schedule.{k}" for k in PERIODIC + ("steps",) if s[k] != DEFAULTS[k]]
        if fixed:
            return [f"schedule.trigger manual records the steps `patchkit capture` asks for; it does not "
                    f"combine with {', '.join(fixed)}"]
    if s["steps"]:
        periodic = [f"schedule.{k}" for k in PERIODIC if s[k] != DEFAULTS[k]]
        if periodic:
            return [f"schedule.steps picks the recorded steps itself; it does not combine with {', '.join(periodic)}"]
    return []


def no_equivalent(profiler: str, settings: Mapping[str, Any], keys: Tuple[str, ...]) -> List[str]:
    """The note for the settings among ``keys`` (a backend's ``UNUSED``) that its profiler has no equivalent of and
    that were set away from their defaults (they are not used); none when all are at their defaults."""
    unused = [f"{_name(k)}={settings[k]!r}" for k in keys if settings[k] != DEFAULTS[k]]
    return [f"{profiler} has no equivalent of {', '.join(unused)}; not used"] if unused else []
