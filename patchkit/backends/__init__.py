"""Profiler backends: one recipe vocabulary, three profilers.

A backend turns the settings a recipe hands to ``patchkit.runtime.configure``
(``backend``, ``level``, ``contents``, ``export_type``, ``analysis``,
``save_path``, ``ranks``, ``wait``, ``warmup``, ``active``, ``repeat``,
``skip_first``, ``mstx``) into *plain profiler code*: a few short Python
snippets, one per moment of a capture (created, a step, a window opens, ...).
The runtime compiles and runs exactly those snippets, and :func:`render`
prints exactly those snippets, so what a reviewer reads in
``patchkit show RECIPE --backend B`` is what runs.

This module imports only the standard library; torch / torch_npu are imported
by a backend's ``probe()`` when a capture is really created.

A backend module offers:

``STATIC_FEATURES``
    what :func:`render` assumes when nothing is probed (the newest API);
``probe() -> dict``
    import the profiler library and detect what the installed one accepts
    (may raise, e.g. ``ImportError`` without torch_npu);
``plan(settings, features, key) -> Plan``
    the snippets for normalised settings.
"""

from __future__ import annotations

import importlib
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..record import Record

BACKENDS = ("npu", "torch", "nsys")
LEVELS = ("level_none", "level0", "level1", "level2")
CONTENTS = ("npu", "cpu", "memory", "shapes", "module", "stack")
EXPORT_TYPES = ("text", "db")
SCHEDULE_KEYS = ("wait", "warmup", "active", "repeat", "skip_first")
PROFILER_KEYS = ("level", "contents", "export_type", "analysis", "save_path", "ranks", "mstx")
KEYS = ("backend",) + PROFILER_KEYS + SCHEDULE_KEYS

DEFAULTS: Dict[str, Any] = {
    "backend": "npu",
    "level": "level0",
    "contents": ("cpu", "npu"),
    "export_type": "text",
    "analysis": False,
    "save_path": "./outputs/patchkit",
    "ranks": "all",
    "wait": 0,
    "warmup": 0,
    "active": 1,
    "repeat": 1,
    "skip_first": 0,
    "mstx": False,
}

# torch_npu's tensorboard_trace_handler drops (returns None for) paths with other
# characters up to its 2026-05 releases; patchkit accepts only this safe subset.
NPU_PATH_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/-")

_REGISTRY: Dict[str, Any] = {name: f"{__name__}.{name}" for name in BACKENDS}

# Schedule actions, numbered like torch.profiler.ProfilerAction.
NONE, WARMUP, RECORD, RECORD_AND_SAVE = 0, 1, 2, 3


class Plan(Record):
    """What a backend module's ``plan()`` returns."""

    sections: Dict[str, str]  # section name -> Python statements
    trace_dir: Optional[str] = None  # where traces appear (None: written by an outside tool)
    notes: Tuple[str, ...] = ()  # comments for the reader (dropped or unused settings)


# ---------------------------------------------------------------------------
# registry


def register(name: str, module: Any) -> None:
    """Make a backend available under ``name`` (a module object or its dotted path)."""
    _REGISTRY[name] = module


def get(name: str):
    """The backend module for ``name``; ``KeyError`` if there is none."""
    mod = _REGISTRY[name]
    if isinstance(mod, str):
        mod = importlib.import_module(mod)
    return mod


def probe(name: str) -> Dict[str, Any]:
    """Import backend ``name``'s profiler library and detect what it accepts."""
    return get(name).probe()


# ---------------------------------------------------------------------------
# schedule semantics (exactly torch.profiler.schedule's)


def schedule_action(step: int, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0) -> int:
    """The action ``torch.profiler.schedule(...)`` returns for ``step``, as an int (NONE..RECORD_AND_SAVE)."""
    if step < skip_first:
        return NONE
    step -= skip_first
    cycle = wait + warmup + active
    if repeat > 0 and step >= repeat * cycle:
        return NONE
    m = step % cycle
    if m < wait:
        return NONE
    if m < wait + warmup:
        return WARMUP
    return RECORD if m < cycle - 1 else RECORD_AND_SAVE


def schedule_end(wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0) -> Optional[int]:
    """The first step from which the schedule stays NONE for good (None when ``repeat`` is 0)."""
    if repeat <= 0:
        return None
    return skip_first + repeat * (wait + warmup + active)


def windows(settings: Mapping[str, Any], cycles: Optional[int] = None) -> List[Tuple[int, int]]:
    """(first, last) recorded step of each cycle; the first ``cycles`` ones when ``repeat`` is 0."""
    s = settings
    cycle = s["wait"] + s["warmup"] + s["active"]
    count = s["repeat"] if s["repeat"] > 0 else (cycles or 1)
    out = []
    for c in range(count):
        first = s["skip_first"] + c * cycle + s["wait"] + s["warmup"]
        out.append((first, first + s["active"] - 1))
    return out


def describe_schedule(settings: Mapping[str, Any]) -> str:
    s = settings
    sched = " ".join(f"{k}={s[k]}" for k in SCHEDULE_KEYS)
    wins = windows(s, cycles=2)
    spans = ", ".join(_span(a, b) for a, b in wins)
    if s["repeat"] > 0:
        return f"{sched}: records {spans}; the schedule is over at step {schedule_end(*(s[k] for k in SCHEDULE_KEYS))}"
    cycle = s["wait"] + s["warmup"] + s["active"]
    return f"{sched}: records {spans}, ... (every {cycle} steps until the process exits)"


def _span(a: int, b: int) -> str:
    return f"step {a}" if a == b else f"steps {a}-{b}"


# ---------------------------------------------------------------------------
# settings


def normalize(settings: Mapping[str, Any]) -> Dict[str, Any]:
    """Settings with defaults filled in and lists made tuples (validate first)."""
    s = dict(DEFAULTS)
    s.update({k: v for k, v in settings.items() if k in KEYS})
    if isinstance(s["contents"], (list, tuple)):
        s["contents"] = tuple(s["contents"])
    if isinstance(s["ranks"], list):
        s["ranks"] = tuple(s["ranks"])
    return s


def _name(key: str) -> str:
    if key in SCHEDULE_KEYS:
        return f"schedule.{key}"
    if key in PROFILER_KEYS:
        return f"profiler.{key}"
    return key


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def validate(settings: Mapping[str, Any]) -> List[str]:
    """Problems a recipe author must fix before these settings can profile anything.

    Empty list: fine.  Checks the vocabulary and the values every backend
    needs, plus what a given backend would silently get wrong (a save_path
    torch_npu would drop, an npu capture with neither cpu nor npu contents).
    """
    problems: List[str] = []
    for k in settings:
        if k not in KEYS:
            problems.append(f"unknown setting {k!r}; known: {', '.join(_name(x) for x in KEYS)}")
    s = dict(DEFAULTS)
    s.update({k: v for k, v in settings.items() if k in KEYS})

    backend = s["backend"]
    if backend not in _REGISTRY:
        problems.append(f"backend {backend!r} is not one of {', '.join(_REGISTRY)}")
    if s["level"] not in LEVELS:
        problems.append(f"profiler.level {s['level']!r} is not one of {', '.join(LEVELS)}")
    contents = s["contents"]
    if not isinstance(contents, (list, tuple)) or not all(isinstance(c, str) for c in contents):
        problems.append(f"profiler.contents must be a list of {', '.join(CONTENTS)}; got {contents!r}")
        contents = ()
    else:
        bad = [c for c in contents if c not in CONTENTS]
        if bad:
            problems.append(f"profiler.contents: unknown {', '.join(map(repr, bad))}; use {', '.join(CONTENTS)}")
    if s["export_type"] not in EXPORT_TYPES:
        problems.append(f"profiler.export_type {s['export_type']!r} is not one of {', '.join(EXPORT_TYPES)}")
    for k in ("analysis", "mstx"):
        if not isinstance(s[k], bool):
            problems.append(f"{_name(k)} must be true or false; got {s[k]!r}")
    ranks = s["ranks"]
    if ranks != "all" and not (
        isinstance(ranks, (list, tuple)) and all(_is_int(r) and r >= 0 for r in ranks)
    ):
        problems.append(f"profiler.ranks must be 'all' or a list of ranks like [0, 1]; got {ranks!r}")
    for k in SCHEDULE_KEYS:
        v, low = s[k], (1 if k == "active" else 0)
        if not _is_int(v) or v < low:
            problems.append(f"{_name(k)} must be an integer >= {low}; got {v!r}")

    path = s["save_path"]
    if not isinstance(path, str) or not path.strip():
        problems.append(f"profiler.save_path must be a non-empty path; got {path!r}")
    elif backend == "npu":
        bad_chars = sorted(set(path) - NPU_PATH_CHARS)
        if bad_chars:
            problems.append(
                f"profiler.save_path {path!r} has characters torch_npu rejects ({' '.join(map(repr, bad_chars))}): "
                "its tensorboard_trace_handler would return None and the trace would be silently discarded; "
                "use only letters, digits, '.', '_', '-' and '/'")
        elif len(path) > 4096 or any(len(part) > 255 for part in path.split("/")):
            problems.append(f"profiler.save_path is too long for torch_npu (a part over 255 or all over 4096 characters)")
    if backend == "npu" and not {"cpu", "npu"} & set(contents):
        problems.append("profiler.contents needs cpu or npu (or both) for the npu backend: nothing would be collected")
    return problems


def role_of(key: Optional[str]) -> str:
    """The role part of a capture key ("recipe/role"), made safe for file names ('' if none)."""
    if not key or "/" not in key:
        return ""
    return re.sub(r"[^A-Za-z0-9._-]", "_", key.partition("/")[2])


# ---------------------------------------------------------------------------
# programs: the snippets, rendered and run from the same text

SECTIONS = ("create", "begin", "advance", "window_open", "step_enter", "step_exit", "window_close", "end")

_WHEN = {
    "create": "When the capture starts: at the first start/step point, in the thread that reaches it.",
    "begin": None,  # printed under "create"
    "advance": "At every later step point (step += 1):",
    "window_open": "When a recording window opens (before its first recorded step):",
    "step_enter": "At the start of each recorded step:",
    "step_exit": "At the end of each recorded step:",
    "window_close": "When a recording window closes (after its last recorded step):",
    "end": "When the schedule is over, or at process exit while the capture runs:",
}


class Program:
    """The profiler code of one capture: text sections, compiled once, run by the runtime."""

    def __init__(self, backend: str, key: str, settings: Mapping[str, Any], plan: Plan,
                 features: Mapping[str, Any], probed: bool):
        self.backend = backend
        self.key = key
        self.named = True  # False: rendered without a capture key ("patchkit" labels the markers)
        self.settings = dict(settings)
        self.sections = {k: v for k, v in plan.sections.items() if v and v.strip()}
        unknown = set(self.sections) - set(SECTIONS)
        if unknown:
            raise ValueError(f"backend {backend}: unknown sections {sorted(unknown)}")
        self.trace_dir = plan.trace_dir
        self.notes = tuple(plan.notes)
        self.features = dict(features)
        self.probed = probed
        self.namespace: Dict[str, Any] = {"__name__": f"patchkit.profiler_code.{backend}", "step": 0}
        self._code: Dict[str, Any] = {}
        self._seen: set = set()

    # -- running --------------------------------------------------------------

    def compile(self) -> "Program":
        for name, src in self.sections.items():
            self._code[name] = compile(src, f"<patchkit {self.backend} code: {name}>", "exec")
        return self

    def run(self, section: str, step: Optional[int] = None) -> None:
        code = self._code.get(section)
        if code is not None:
            if step is not None:
                self.namespace["step"] = step
            exec(code, self.namespace)

    def has(self, section: str) -> bool:
        return section in self.sections

    def code(self, section: str) -> Any:
        """The compiled ``section`` or None, for a caller that runs it as :meth:`run` does, without the lookups."""
        return self._code.get(section)

    def snapshot(self) -> None:
        """Remember what is in the trace folder now; :meth:`new_traces` reports what appears later."""
        self._seen = set(self._listdir())

    def new_traces(self) -> List[str]:
        names = [n for n in self._listdir() if n not in self._seen]
        self._seen.update(names)
        paths = [os.path.join(self.trace_dir, n) for n in names]  # type: ignore[arg-type]
        return sorted(paths, key=_mtime)

    def _listdir(self) -> List[str]:
        if not self.trace_dir:
            return []
        try:
            return os.listdir(self.trace_dir)
        except OSError:
            return []

    # -- reading ----------------------------------------------------------------

    def render(self) -> str:
        s = self.settings
        lines = [
            f"# Profiler code{' for ' + self.key if self.named else ''} with the {self.backend} backend; "
            "patchkit.runtime runs exactly this.",
            f"# Schedule {describe_schedule(s)}.",
            f"# Ranks: {'all' if s['ranks'] == 'all' else ', '.join(map(str, s['ranks']))}"
            + ("" if s["ranks"] == "all" else " (other ranks create no profiler)") + ".",
            "# `step` is patchkit's step index: 0 at the first start/step point, +1 at each later step point.",
        ]
        if not self.probed and self.features.get("assumed"):
            lines.append(f"# {self.features['assumed']}")
        lines += [f"# Note: {n}" for n in self.notes]
        for name in SECTIONS:
            if name not in self.sections or name == "begin":
                continue
            lines += ["", f"# {_WHEN[name]}", self.sections[name].rstrip("\n")]
            if name == "create" and "begin" in self.sections:
                lines.append(self.sections["begin"].rstrip("\n"))
        if "create" not in self.sections and "begin" in self.sections:
            lines += ["", f"# {_WHEN['create']}", self.sections["begin"].rstrip("\n")]
        return "\n".join(lines) + "\n"


def _mtime(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:
        return 0.0


def program(settings: Mapping[str, Any], key: Optional[str] = None,
            features: Optional[Mapping[str, Any]] = None) -> Program:
    """The :class:`Program` for validated settings.

    ``features`` None: probe the installed profiler library (imports it; may
    raise).  Pass a backend's ``STATIC_FEATURES`` (or anything probed
    elsewhere) to build without importing anything.
    """
    s = normalize(settings)
    mod = get(s["backend"])
    probed = features is None
    feats = mod.probe() if probed else features
    prog = Program(s["backend"], key or "patchkit", s, mod.plan(s, feats, key or "patchkit"), feats, probed)
    prog.named = bool(key)
    return prog


def render(settings: Mapping[str, Any], key: Optional[str] = None,
           features: Optional[Mapping[str, Any]] = None) -> str:
    """The plain profiler code (no patchkit calls) the runtime builds for these settings.

    Without ``features`` nothing is imported and the newest profiler API is
    assumed (said in a comment); pass ``features=probe(backend)`` to render for
    the installed torch / torch_npu.  ``key`` is the capture key
    (``"recipe-id"`` or ``"recipe-id/role"``), used in marker names and, for a
    role, in trace file names.  Raises ``ValueError`` listing the problems of
    invalid settings.
    """
    problems = validate(settings)
    if problems:
        raise ValueError("; ".join(problems))
    s = normalize(settings)
    feats = features if features is not None else get(s["backend"]).STATIC_FEATURES
    return program(s, key, feats).render()


def build(settings: Mapping[str, Any], key: str) -> Program:
    """For the runtime: probe the installed library and compile the program (may raise)."""
    return program(settings, key).compile()


def call(fn: str, args: Sequence[str], indent: str = "") -> List[str]:
    """Source lines of ``fn(`` one argument per line ``)`` (arguments already Python source)."""
    if not args:
        return [f"{indent}{fn}()"]
    return [f"{indent}{fn}("] + [f"{indent}    {a}," for a in args] + [f"{indent})"]
