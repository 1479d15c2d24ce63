"""Whether a backend can record here: its library found, and the device it records on in use, asked without
importing anything or touching a device.

``patchkit attach`` asks it in the job, before anything there changes (:func:`refusal`): a recipe whose backend
cannot record in that job is refused, naming the backends that can, instead of getting in and recording nothing.
``patchkit new`` asks it of the target's environment to pick a backend (:func:`library`, :func:`ordered`).

What a backend needs, it says itself (:class:`~patchkit.runtime.backend.Backend`'s ``LIBRARY``, ``DEVICES`` and
``DEVICE_CONTENT``).  The answers:

* a library is found when the process has imported it, or ``importlib`` finds its spec on the path (a top-level
  name: nothing is imported, not even its package's ``__init__``);
* a CUDA device is in use when the process has imported torch and ``torch.cuda.is_initialized()``: a job that has
  run nothing on CUDA is not asked further, since ``torch.cuda.is_available()`` would start the driver in it;
* an NPU is in use when the process has imported torch_npu and ``torch_npu.npu.is_available()`` (the npu
  backend's own question): a job that has not imported torch_npu runs nothing on an NPU.

Standard library only.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from typing import Any, Iterable, List, Mapping, Optional, Sequence

PREFERRED = ("npu", "torch")  # asked first, in this order; then every other backend, in the finder's order


def ordered() -> List[str]:
    """Every backend, those of :data:`PREFERRED` first."""
    from patchkit.runtime import finder

    names = finder.names()
    return [n for n in PREFERRED if n in names] + [n for n in names if n not in PREFERRED]


def library(name: str, folders: Optional[Sequence[str]] = None) -> str:
    """Where the top-level module ``name`` is found ("" when it is not): in ``folders`` when given (a target's
    site-packages), else as this process would import it (imported already, or on its path)."""
    try:
        if folders is not None:
            spec = importlib.machinery.PathFinder.find_spec(name, [str(f) for f in folders])
        else:
            module = sys.modules.get(name)
            if module is not None:
                return _folder(getattr(module, "__spec__", None)) or "imported"
            spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError, OSError):  # a broken finder or spec: not found
        return ""
    return _folder(spec) if spec is not None else ""


def _folder(spec: Any) -> str:
    origin = getattr(spec, "origin", None)
    places = list(getattr(spec, "submodule_search_locations", None) or ())
    where = os.path.dirname(places[0]) if places else os.path.dirname(origin) if isinstance(origin, str) else ""
    return where or "found"


def device(kind: str) -> str:
    """Why this process is not using a ``kind`` device ("cuda", "npu"); "" when it is."""
    if kind == "cuda":
        torch = sys.modules.get("torch")
        if torch is None:
            return "the job has not imported torch, so it runs nothing on CUDA"
        try:
            used = bool(torch.cuda.is_initialized())
        except Exception:  # noqa: BLE001 - a torch without CUDA, half imported, ...: not in use
            used = False
        return "" if used else "the job has not used a CUDA device (torch.cuda.is_initialized() is False)"
    if kind == "npu":
        torch_npu = sys.modules.get("torch_npu")
        if torch_npu is None:
            return "the job has not imported torch_npu, so it runs nothing on an NPU"
        try:
            there = bool(torch_npu.npu.is_available())
        except Exception as exc:  # noqa: BLE001 - said, never raised into the job
            return f"torch_npu.npu.is_available() failed ({type(exc).__name__}: {exc})"
        return "" if there else "no NPU device is available (torch_npu.npu.is_available() is False)"
    return f"patchkit cannot tell whether a {kind} device is in use"


def unready(name: str, contents: Iterable[str] = ()) -> str:
    """Why backend ``name`` cannot record in this process with ``profiler.contents`` ``contents``; "" when it can,
    or when it says nothing of what it needs (a backend not found is left to the runtime, which says so)."""
    from patchkit.runtime import finder

    try:
        backend = finder.get(name)
    except (KeyError, ImportError, TypeError):
        return ""
    lib = backend.LIBRARY
    if lib and not library(lib):
        return f"{lib} is not installed in the job's environment ({sys.executable})"
    if backend.DEVICES and (not backend.DEVICE_CONTENT or backend.DEVICE_CONTENT in tuple(contents)):
        whys = [device(kind) for kind in backend.DEVICES]
        if all(whys):
            return "; ".join(whys)
    return ""


def refusal(recipe_id: str, given: Optional[Mapping[str, Any]] = None) -> str:
    """Why ``patchkit attach`` must not put ``recipe_id`` into this process: its backend cannot record here, with
    the backends that can; "" when it can.  ``given``: the recipe's settings (default: those it configured here)."""
    if given is None:
        from patchkit.runtime.process import settings

        given = settings.get(recipe_id) or {}
    name, contents = str(given.get("backend") or ""), tuple(given.get("contents") or ())
    why = unready(name, contents)
    if not why:
        return ""
    others = [n for n in ordered() if n != name and not unready(n, contents)]
    if others:
        hint = f"--backend {others[0]}" + "".join(f" (or --backend {n})" for n in others[1:2]) + " can record here"
    else:
        hint = "no backend can record here: attach to a job whose environment has its profiler's library and device"
    return f"the {name} backend cannot record in this job: {why}; hint: {hint}"
