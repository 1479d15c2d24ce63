"""Which backends there are: every module of :mod:`patchkit.runtime.backends`, and any that code registers.

The package's folder is walked with :mod:`pkgutil`, as LibCST's codemod
command finder walks its commands: each module there (its name not starting
with ``_``) is the backend of that name, and no list names them.  Walking
imports nothing; a backend's module is imported the first time its backend
is used, and must define one concrete subclass of
:class:`patchkit.runtime.backend.Backend`.  Code outside patchkit (a plugin, a
test, a benchmark) may :func:`register` more; a training process knows the
backends registered in it.

Standard library only.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import pkgutil
import re
from typing import Any, Dict, Tuple, Union

from patchkit.runtime.backend import Backend

PACKAGE = "patchkit.runtime.backends"  # the folder walked
_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
_REGISTRY: Dict[str, Union[str, Backend]] = {}  # registered: name -> backend, or a module's dotted path until used
_LOADED: Dict[str, Backend] = {}  # found backends already imported


@functools.lru_cache(maxsize=None)
def found() -> Tuple[str, ...]:
    """The backends in :data:`PACKAGE`'s folder, by name (one module each), without importing any."""
    spec = importlib.util.find_spec(PACKAGE)
    where = list(spec.submodule_search_locations or ()) if spec else []
    return tuple(sorted(m.name for m in pkgutil.iter_modules(where) if not m.ispkg and _NAME.match(m.name)))


def names() -> Tuple[str, ...]:
    """Every backend: those found, in name order, then those registered, in the order they were."""
    here = found()
    return here + tuple(name for name in _REGISTRY if name not in here)


def register(name: str, backend: Any) -> None:
    """Make backend ``name`` usable everywhere: recipes, ``backend=``, ``--backend``, ``show``, the runtime.

    ``backend`` is a :class:`Backend` (or a subclass of it), or the dotted path of a module that defines one
    (imported when the backend is first used).  A registered name comes before a found one of the same name.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"backend name {name!r}: use lower-case letters, digits and _, starting with a letter")
    if isinstance(backend, type) and issubclass(backend, Backend):
        backend = _made(name, backend)
    elif not isinstance(backend, (str, Backend)):
        raise TypeError(f"backend {name}: {backend!r} is not a patchkit.runtime.backend.Backend, nor the path of a "
                        "module that defines one")
    _REGISTRY[name] = backend


def get(name: str) -> Backend:
    """The backend ``name``; ``KeyError`` if there is none, ``ImportError`` or ``TypeError`` if its module does
    not import or defines no backend."""
    entry = _REGISTRY.get(name)
    if isinstance(entry, Backend):
        return entry
    if entry is not None:
        registered = _REGISTRY[name] = _defined_in(name, importlib.import_module(entry))
        return registered
    loaded = _LOADED.get(name)
    if loaded is None:
        if name not in found():
            raise KeyError(name)
        loaded = _LOADED[name] = _defined_in(name, importlib.import_module(f"{PACKAGE}.{name}"))
    return loaded


def probe(name: str) -> Dict[str, Any]:
    """Import backend ``name``'s profiler library and detect what the installed one accepts."""
    return get(name).probe()


def _defined_in(name: str, module: Any) -> Backend:
    """The one Backend subclass ``module`` defines, made."""
    classes = [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, Backend)
               and c.__module__ == module.__name__]
    if len(classes) != 1:
        what = "no" if not classes else f"{len(classes)} ({', '.join(c.__name__ for c in classes)})"
        raise TypeError(f"backend {name}: {module.__name__} defines {what} subclasses of "
                        "patchkit.runtime.backend.Backend; a backend's module defines one")
    return _made(name, classes[0])


def _made(name: str, cls: type) -> Backend:
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        raise TypeError(f"backend {name}: {cls.__module__}.{cls.__qualname__} does not define {missing}")
    return cls()
