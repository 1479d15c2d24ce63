"""Deprecated: ``patchkit.api`` gathered the public names a second time; they are all ``patchkit``'s own now.

``from patchkit import api; api.load(...)`` keeps working, with a DeprecationWarning when this module is
imported: write ``import patchkit; patchkit.load(...)``.  The few names it also gave that are not public are
still answered, from the module that defines them.
"""

import warnings

warnings.warn("patchkit.api is deprecated: its names are patchkit's own (`import patchkit; patchkit.load(...)`)",
              DeprecationWarning, stacklevel=2)

# names patchkit.api gave that are not public, and the module that defines each
_ALSO = {"example_points": "patchkit.engine.examples", "decode": "patchkit.engine.marks",
         "own_dependency": "patchkit.state.planning", "skipped_note": "patchkit.state.planning",
         "builtin_dir": "patchkit.recipe.catalogue", "Installed": "patchkit.state.targets"}


def __getattr__(name: str):
    import importlib

    import patchkit

    if name in _ALSO:
        return getattr(importlib.import_module(_ALSO[name]), name)
    if name in patchkit.__all__:
        return getattr(patchkit, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    import patchkit

    return sorted(set(patchkit.__all__) | set(_ALSO))
