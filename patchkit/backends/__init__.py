"""Profiler backends: one recipe vocabulary, one module per profiler, registered by name.

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

import importlib
import os
import re
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ..vocabulary import SCHEDULE_KEYS, SETTING, SETTINGS, problem

DEFAULT = "npu"  # the backend of a recipe that names none
KEYS = ("backend",) + tuple(SETTING)  # what runtime.configure() takes
DEFAULTS: Dict[str, Any] = {"backend": DEFAULT, **{s.name: s.default for s in SETTINGS}}

_REGISTRY: Dict[str, Any] = {}  # name -> backend module, or its dotted path until first used
_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
_REQUIRED = ("STATIC_FEATURES", "probe", "plan")

# Schedule actions, numbered like torch.profiler.ProfilerAction.
NONE, WARMUP, RECORD, RECORD_AND_SAVE = 0, 1, 2, 3


class Plan(NamedTuple):
    """What a backend module's ``plan()`` returns."""

    sections: Dict[str, str]  # section name -> Python statements
    trace_dir: Optional[str] = None  # where traces appear (None: written by an outside tool)
    notes: Tuple[str, ...] = ()  # comments for the reader (dropped or unused settings)


# ---------------------------------------------------------------------------
# registry


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
                        "a backend module defines STATIC_FEATURES, probe() and plan() (see patchkit.backends)")
    return module


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
    for key in ("ranks", "replicas"):
        if isinstance(s[key], list):
            s[key] = tuple(s[key])
    return s


def _name(key: str) -> str:
    return SETTING[key].key if key in SETTING else key


def validate(settings: Mapping[str, Any]) -> List[str]:
    """Problems a recipe author must fix before these settings can profile anything.

    Empty list: fine.  Checks every setting against the vocabulary
    (:mod:`patchkit.vocabulary`) and the backend against the registry, then,
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
    if problems:
        return problems
    try:
        module = get(backend)
    except (ImportError, TypeError) as exc:  # a registered path that does not import, or is no backend
        return [f"backend {backend!r} cannot be used: {exc}"]
    check = getattr(module, "check", None)
    return list(check(s)) if check is not None else []


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
        if self.backend in ("torch", "npu"):  # ranks share the folder: keep this process's, named with its pid
            mine = re.compile(rf"(?:^|_){os.getpid()}[._]")
            names = [n for n in names if mine.search(n)]
        paths = [os.path.join(self.trace_dir, n) for n in names]  # type: ignore[arg-type]
        return sorted(paths, key=_mtime)

    def _listdir(self) -> List[str]:
        if not self.trace_dir:
            return []
        try:
            return [n for n in os.listdir(self.trace_dir) if n != "patchkit-manifests"]  # patchkit.manifest.FOLDER
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
            *([] if s["replicas"] == "all" else [
                f"# Replicas: {', '.join(map(str, s['replicas']))}, every process of them; the replica is "
                f"$VERL_REPLICA_RANK, else $RANK // {s['replica_size'] or 'replica_size (unset: no capture)'}."]),
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


# ---------------------------------------------------------------------------
# the built-in backends (a new one: its module in this folder, and a line here)

register("npu", f"{__name__}.npu")  # torch_npu.profiler, on Ascend NPUs
register("torch", f"{__name__}.torch")  # torch.profiler: CPU, and CUDA when there is one
register("nsys", f"{__name__}.nsys")  # Nsight Systems: CUDA profiler API edges, an NVTX range per step
