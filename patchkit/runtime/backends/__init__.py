"""Profiler backends: one recipe vocabulary, one module per profiler, registered by name.

The profilers: :mod:`.torch`, :mod:`.npu` (torch_npu), :mod:`.nsys` (Nsight Systems), :mod:`.memory` (CUDA
memory snapshots); :mod:`.registry` holds the settings every backend takes, :mod:`.schedule` torch.profiler's
schedule, :mod:`.program` the snippets that run and that ``show`` prints.

A backend turns the settings a recipe hands to ``patchkit.runtime.configure``
(``backend``, ``level``, ``contents``, ``export_type``, ``analysis``,
``save_path``, ``ranks``, ``wait``, ``warmup``, ``active``, ``repeat``,
``skip_first``, ``mstx``) into *plain profiler code*: a few short Python
snippets, one per moment of a capture (created, a step, a window opens, ...).
The runtime compiles and runs exactly those snippets, and :func:`render`
prints exactly those snippets, so what a reviewer reads in
``patchkit show RECIPE --backend B`` is what runs.

The backends are the names :func:`register`-ed here, in this order: that
registry is the one list of them.  A registered name is a valid ``backend:``
in a recipe, ``backend=`` override and ``--backend`` choice, ``patchkit
show`` renders its code and the runtime runs it.  The built-in ones are
registered at the end of this module by module path, so naming them imports
none of them.

This module imports only the standard library; torch / torch_npu are imported
by a backend's ``probe()`` when a capture is really created.

A backend module offers:

``STATIC_FEATURES``
    what :func:`render` assumes when nothing is probed (the newest API);
``probe() -> dict``
    import the profiler library and detect what the installed one accepts
    (may raise, e.g. ``ImportError`` without torch_npu);
``plan(settings, features, key) -> Plan``
    the snippets for normalised settings;
``check(settings) -> list of str`` (optional)
    what this profiler would get wrong silently with settings that are
    otherwise valid (standard library only: recipes are checked with it).
"""

from __future__ import annotations

from patchkit.runtime.backends.program import SECTIONS, Program, build, call, program, render  # noqa: F401
from patchkit.runtime.backends.registry import (  # noqa: F401
    DEFAULT, DEFAULTS, KEYS, _REGISTRY, Plan, get, names, normalize, probe, register, role_of, validate,
)
from patchkit.runtime.backends.schedule import (  # noqa: F401
    NONE, RECORD, RECORD_AND_SAVE, WARMUP, describe_schedule, next_event, runs, schedule_action, schedule_end,
    window_last, windows,
)

# ---------------------------------------------------------------------------
# the built-in backends (a new one: its module in this folder, and a line here)

register("npu", f"{__name__}.npu")  # torch_npu.profiler, on Ascend NPUs
register("torch", f"{__name__}.torch")  # torch.profiler: CPU, and CUDA when there is one
register("nsys", f"{__name__}.nsys")  # Nsight Systems: CUDA profiler API edges, an NVTX range per step
register("memory", f"{__name__}.memory")  # the allocator's history in each window, a snapshot for memory_viz
