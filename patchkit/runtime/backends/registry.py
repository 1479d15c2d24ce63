"""The backend registry, the settings every backend takes, and how they are checked.

Standard library only: recipes are checked with it, and the runtime imports it.
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from patchkit.core.vocabulary import PERIODIC, SETTING, SETTINGS, problem

DEFAULT = "npu"  # the backend of a recipe that names none
KEYS = ("backend",) + tuple(SETTING)  # what runtime.configure() takes
DEFAULTS: Dict[str, Any] = {"backend": DEFAULT, **{s.name: s.default for s in SETTINGS}}

_REGISTRY: Dict[str, Any] = {}  # name -> backend module, or its dotted path until first used
_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
_REQUIRED = ("STATIC_FEATURES", "probe", "plan")

class Plan(NamedTuple):
    """What a backend module's ``plan()`` returns."""

    sections: Dict[str, str]  # section name -> Python statements
    trace_dir: Optional[str] = None  # where traces appear (None: written by an outside tool)
    notes: Tuple[str, ...] = ()  # comments for the reader (dropped or unused settings)


def register(name: str, module: Any) -> None:
    """Make backend ``name`` usable everywhere: recipes, ``backend=``, ``--backend``, ``show``, the runtime.

    ``module`` is the backend module, or its dotted path (imported when the
    backend is first used).  Registering a name again replaces its module.
    The runtime of a training process knows the backends registered in that
    process: the built-in ones, and those registered by code it imports.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"backend name {name!r}: use lower-case letters, digits and _, starting with a letter")
    if not isinstance(module, str):
        _check_module(name, module)
    _REGISTRY[name] = module


def names() -> Tuple[str, ...]:
    """The registered backends, in the order they were registered."""
    return tuple(_REGISTRY)


def get(name: str):
    """The backend module for ``name``; ``KeyError`` if there is none."""
    mod = _REGISTRY[name]
    if isinstance(mod, str):
        mod = _check_module(name, importlib.import_module(mod))
        _REGISTRY[name] = mod
    return mod


def _check_module(name: str, module: Any) -> Any:
    missing = [attr for attr in _REQUIRED if not hasattr(module, attr)]
    if missing:
        raise TypeError(f"backend {name}: {getattr(module, '__name__', module)!r} has no {', '.join(missing)}; "
                        "a backend module defines STATIC_FEATURES, probe() and plan() (see patchkit.runtime.backends)")
    return module


def probe(name: str) -> Dict[str, Any]:
    """Import backend ``name``'s profiler library and detect what it accepts."""
    return get(name).probe()


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
    (:mod:`patchkit.core.vocabulary`) and the backend against the registry, then,
    when all of that holds, asks the backend module's ``check()`` what its
    profiler would get wrong silently (a save_path torch_npu would drop, ...).
    """
    problems: List[str] = []
    for k in settings:
        if k not in KEYS:
            problems.append(f"unknown setting {k!r}; known: {', '.join(_name(x) for x in KEYS)}")
    s = dict(DEFAULTS)
    s.update({k: v for k, v in settings.items() if k in KEYS})

    backend = s["backend"]
    if not isinstance(backend, str) or backend not in _REGISTRY:
        problems.append(f"backend {backend!r} is not one of {', '.join(_REGISTRY)}")
    for setting in SETTINGS:
        found = problem(setting, s[setting.name])
        if found:
            problems.append(found)
    if not problems and s["replicas"] != "all" and s["ranks"] != "all":
        problems.append("profiler.replicas and profiler.ranks are both set: pick one")
    if not problems and s["trigger"] == "manual":
        fixed = [f"schedule.{k}" for k in PERIODIC + ("steps",) if s[k] != DEFAULTS[k]]
        if fixed:
            problems.append(f"schedule.trigger manual records the steps `patchkit capture` asks for; it does not "
                            f"combine with {', '.join(fixed)}")
    if not problems and s["steps"]:
        periodic = [f"schedule.{k}" for k in PERIODIC if s[k] != DEFAULTS[k]]
        if periodic:
            problems.append(f"schedule.steps picks the recorded steps itself; it does not combine with "
                            f"{', '.join(periodic)}")
    if problems:
        return problems
    try:
        module = get(backend)
    except (ImportError, TypeError) as exc:  # a registered path that does not import, or is no backend
        return [f"backend {backend!r} cannot be used: {exc}"]
    check = getattr(module, "check", None)
    return list(check(s)) if check is not None else []


def no_equivalent(profiler: str, settings: Mapping[str, Any], keys: Tuple[str, ...]) -> List[str]:
    """The note a backend gives for the settings among ``keys`` that its profiler has no equivalent of and that
    the recipe set away from their defaults (they are not used); none when all are at their defaults."""
    from patchkit.core.vocabulary import DEFAULTS

    unused = [f"profiler.{k}={settings[k]!r}" for k in keys if settings[k] != DEFAULTS[k]]
    return [f"{profiler} has no equivalent of {', '.join(unused)}; not used"] if unused else []


def role_of(key: Optional[str]) -> str:
    """The role part of a capture key ("recipe/role"), made safe for file names ('' if none)."""
    if not key or "/" not in key:
        return ""
    return re.sub(r"[^A-Za-z0-9._-]", "_", key.partition("/")[2])


