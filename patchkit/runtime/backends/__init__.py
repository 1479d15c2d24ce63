"""Profiler backends: one recipe vocabulary, one module per profiler; every module of this folder is a backend.

A backend is one module here, named for the backend (``torch.py`` is
``backend: torch``), that defines one subclass of
:class:`~patchkit.runtime.backend.Backend`.  The folder is walked to find them
(:mod:`patchkit.runtime.finder`), so no list names them: a module added here
is a valid ``backend:`` in a recipe, ``backend=`` override and ``--backend``
choice, is in the schema and the reference, ``patchkit show`` renders its
code and the runtime runs it.  docs/contributing.md says how to write one.

This package is the backends' public face; the work is done by the runtime's
modules it names:

* :mod:`patchkit.runtime.backend`: what a backend is (``Backend``, ``Plan``, ``SECTIONS``);
* :mod:`patchkit.runtime.finder`: which backends there are (``names``, ``get``, ``register``);
* :mod:`patchkit.runtime.settings`: the settings every backend takes (``DEFAULTS``, ``validate``, ``normalize``);
* :mod:`patchkit.runtime.program`: a backend's code for one capture, run and printed (``render``, ``build``);
* :mod:`patchkit.runtime.schedule`: torch.profiler's schedule, step by step;
* :mod:`patchkit.runtime.roles`: a capture's role in trace file names.

Standard library only; torch / torch_npu are imported by a backend's
``probe()`` and code when a capture is really created.
"""

from __future__ import annotations

from patchkit.runtime.backend import SECTIONS, Backend, Plan  # noqa: F401
from patchkit.runtime.finder import _REGISTRY, found, get, names, probe, register  # noqa: F401
from patchkit.runtime.program import Program, build, call, program, render  # noqa: F401
from patchkit.runtime.roles import role_of  # noqa: F401
from patchkit.runtime.schedule import (  # noqa: F401
    NONE, RECORD, RECORD_AND_SAVE, WARMUP, describe_schedule, next_event, runs, schedule_action, schedule_end,
    window_last, windows,
)
from patchkit.runtime.settings import DEFAULT, DEFAULTS, KEYS, normalize, validate  # noqa: F401

