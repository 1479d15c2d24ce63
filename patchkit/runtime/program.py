"""Programs: a backend's snippets for one capture, rendered for `patchkit show` and run by the runtime from
the same text.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from patchkit.core.wholejson import cut_at
from patchkit.runtime.backend import SECTIONS, WHEN, Backend, Plan
from patchkit.runtime.finder import get
from patchkit.runtime.schedule import describe_schedule
from patchkit.runtime.settings import no_equivalent, normalize, validate


class Program:
    """The profiler code of one capture: text sections, compiled once, run by the runtime."""

    def __init__(self, backend: str, key: str, settings: Mapping[str, Any], plan: Plan,
                 features: Mapping[str, Any], probed: bool, pid_in_trace_names: bool = False):
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
        self.pid_in_trace_names = pid_in_trace_names
        self.namespace: Dict[str, Any] = {"__name__": f"patchkit.profiler_code.{backend}", "step": 0,
                                          "json_cut": cut_at}
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

    def call(self, section: str, **values: Any) -> Any:
        """Run ``section`` with ``values`` bound (``name``, ``handle``); returns what it leaves in ``handle``."""
        code = self._code.get(section)
        if code is None:
            return None
        ns = self.namespace
        ns.update(values)
        ns.setdefault("handle", None)
        exec(code, ns)
        return ns.pop("handle", None)

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
        if self.pid_in_trace_names:  # ranks share the folder: keep this process's, named with its pid
            mine = re.compile(rf"(?:^|_){os.getpid()}[._]")
            names = [n for n in names if mine.search(n)]
        paths = [os.path.join(self.trace_dir, n) for n in names]  # type: ignore[arg-type]
        return sorted(paths, key=_mtime)

    def failed_traces(self) -> List[Tuple[str, str]]:
        """(trace, why) of each trace the code could not write whole since the last call.

        The code reports them in a list named ``failed_traces`` (see the torch backend's ``on_trace_ready``).
        """
        found = self.namespace.get("failed_traces")
        if not isinstance(found, list):
            return []
        out = [(str(item[0]), str(item[1])) if isinstance(item, tuple) and len(item) == 2 else (str(item), "failed")
               for item in found]
        del found[:]
        return out

    def _listdir(self) -> List[str]:
        if not self.trace_dir:
            return []
        try:
            return [n for n in os.listdir(self.trace_dir) if n != "patchkit-manifests"]  # patchkit.core.manifest.FOLDER
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
        if any("json_cut(" in text for text in self.sections.values()):
            lines.append("# `json_cut(path, objects)` is patchkit's check of a JSON file by its structure: \"\" when "
                         "it was written to its end, else what was found.")
        if not self.probed and self.features.get("assumed"):
            lines.append(f"# {self.features['assumed']}")
        lines += [f"# Note: {n}" for n in self.notes]
        for name in SECTIONS:
            if name not in self.sections or name == "begin":
                continue
            lines += ["", f"# {WHEN[name]}", self.sections[name].rstrip("\n")]
            if name == "create" and "begin" in self.sections:
                lines.append(self.sections["begin"].rstrip("\n"))
        if "create" not in self.sections and "begin" in self.sections:
            lines += ["", f"# {WHEN['create']}", self.sections["begin"].rstrip("\n")]
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
    backend = get(s["backend"])
    probed = features is None
    feats = backend.probe() if features is None else features
    plan = _with_unused(backend, s, backend.plan(s, feats, key or "patchkit"))
    prog = Program(s["backend"], key or "patchkit", s, plan, feats, probed, backend.PID_IN_TRACE_NAMES)
    prog.named = bool(key)
    return prog


def _with_unused(backend: Backend, s: Mapping[str, Any], plan: Plan) -> Plan:
    """``plan`` with the note naming the settings the backend declares ``UNUSED`` that were set (after its own)."""
    unused = no_equivalent(backend.PROFILER or s["backend"], s, backend.UNUSED)
    return plan._replace(notes=tuple(plan.notes) + tuple(unused))


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


