"""``patchkit new`` without ``--backend`` (or ``--from``): the backend whose profiler the target's environment has,
found without importing anything.

torch_npu installed there: ``npu``; else torch: ``torch``; else the first other backend whose library is there
(:func:`patchkit.runtime.ready.ordered`, each backend's ``LIBRARY``); none: ``npu``, patchkit's default, said as such.
The target's environment is the folder its package lies in, with this environment's whole path when that folder is on
it (a site-packages of this Python, an editable checkout): a ``--root`` elsewhere (another environment's
site-packages) is looked in alone.  :class:`Picked` says which backend, and why, for the line ``new`` prints.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, NamedTuple

from patchkit.authoring.funcref import FunctionRef


class Picked(NamedTuple):
    backend: str
    why: str


def target_folder(ref: FunctionRef) -> Path:
    """The folder ``ref.relpath`` is relative to: the target's site-packages, or the checkout's root."""
    depth = len(Path(ref.relpath).parts)
    return ref.path.parents[depth - 1] if depth else ref.path.parent


def places(folder: Path) -> List[str]:
    """Where the target's environment keeps its libraries: ``folder``, then this environment's path when ``folder``
    is on it."""
    here = {os.path.realpath(p or os.curdir) for p in sys.path}
    return [str(folder)] + (list(sys.path) if os.path.realpath(folder) in here else [])


def pick(ref: FunctionRef) -> Picked:
    """The backend for a recipe on ``ref``'s function, from the libraries installed where it is."""
    from patchkit.runtime import finder, ready

    where = places(target_folder(ref))
    missing: List[str] = []
    for name in ready.ordered():
        lib = finder.get(name).LIBRARY
        if not lib or lib in missing:
            continue
        found = ready.library(lib, where)
        if found:
            return Picked(name, f"{lib} is installed there ({found})" + "".join(f"; {m} is not" for m in missing))
        missing.append(lib)
    return Picked("npu", f"no profiler library patchkit knows ({', '.join(missing)}) is installed where "
                         f"{target_folder(ref)} is: npu is patchkit's default")
