"""npu backend: ``torch_npu.profiler.profile`` (Ascend), only with torch_npu's own objects.

Maps the vocabulary onto ``_ExperimentalConfig(profiler_level=...,
export_type=<a str>, mstx|msprof_tx=...)``, ``ProfilerActivity.CPU/NPU``
from contents, ``analyse_flag`` from analysis, and torch_npu's own
``schedule`` class with keywords.  Keyword arguments the installed torch_npu
does not have are left out (found with ``inspect.signature``, said in the
code as a comment).  The handler is checked for ``None``: torch_npu returns
None instead of raising when it rejects the folder, and then throws the data
away.  With ``mstx``, each recorded step is also an mstx range.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, FrozenSet, List, Mapping

from patchkit.core.spellings import MEMBERS
from patchkit.runtime.backend import Backend, Plan
from patchkit.runtime.program import call
from patchkit.runtime.roles import role_of, worker_name
from patchkit.runtime.schedule import steps_function

P = "torch_npu.profiler"
# torch_npu's tensorboard_trace_handler drops (returns None for) paths with other
# characters up to its 2026-05 releases; patchkit accepts only this safe subset.
PATH_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/-")
# patchkit's words -> torch_npu's members, from the one table that also reads the users' torch_npu spellings
LEVEL = {m.word: m.name for m in MEMBERS if m.setting == "level"}
EXPORT = {m.word: m.name for m in MEMBERS if m.setting == "export_type"}

# torch_npu 2.13/2.14 (the newest API), used when nothing is probed.
STATIC_FEATURES: Dict[str, Any] = {
    "version": None,
    "assumed": "torch_npu not probed: the newest API (2.14) is assumed; at run time, keywords the installed "
               "torch_npu lacks are left out (inspect.signature).",
    "profile": frozenset({"activities", "schedule", "on_trace_ready", "record_shapes", "profile_memory",
                          "with_stack", "with_flops", "with_modules", "experimental_config",
                          "execution_trace_observer", "custom_trace_id_callback", "use_cuda"}),
    "experimental": frozenset({"profiler_level", "aic_metrics", "l2_cache", "msprof_tx", "mstx",
                               "data_simplification", "record_op_args", "op_attr", "gc_detect_threshold",
                               "export_type", "host_sys", "mstx_domain_include", "mstx_domain_exclude",
                               "sys_io", "sys_interconnection"}),
    "handler": frozenset({"dir_name", "worker_name", "analyse_flag", "async_mode"}),
    "schedule": frozenset({"wait", "active", "warmup", "repeat", "skip_first", "skip_first_wait"}),
    "aic_none": True,
    "mstx_range": True,
    "aic_members": frozenset({"AiCoreNone", "PipeUtilization", "ArithmeticUtilization", "Memory", "MemoryL0",
                              "MemoryUB", "ResourceConflictRatio", "L2Cache", "MemoryAccess"}),
    "host_sys_members": frozenset({"CPU", "MEM", "DISK", "NETWORK", "OSRT", "NUMA"}),
}
AIC = {m.word: m.name for m in MEMBERS if m.setting == "aic_metrics"}
HOST_SYS = {m.word: m.name for m in MEMBERS if m.setting == "host_sys"}
ACTIVITY = {m.word: m.name for m in MEMBERS if m.setting == "contents"}
FLAGS = ("l2_cache", "op_attr", "record_op_args", "sys_io", "sys_interconnection")  # off unless asked
SCHEDULE = ("wait", "warmup", "active", "repeat", "skip_first")
# profile()'s flags and the item of profiler.contents each one records
CONTENT_FLAGS = (("record_shapes", "shapes"), ("profile_memory", "memory"), ("with_stack", "stack"),
                 ("with_modules", "module"), ("with_flops", "flops"))


class Npu(Backend):
    STATIC_FEATURES = STATIC_FEATURES
    PROFILER = P
    PID_IN_TRACE_NAMES = True
    LIBRARY, DEVICES, DEVICE_CONTENT = "torch_npu", ("npu",), "npu"  # cpu alone needs no NPU

    def probe(self) -> Dict[str, Any]:
        import torch_npu  # noqa: F401
        import torch_npu.profiler as prof

        st = STATIC_FEATURES
        mstx = getattr(getattr(torch_npu, "npu", None), "mstx", None)
        return {
            "version": getattr(torch_npu, "__version__", "unknown"),
            "profile": _params(prof.profile.__init__, st["profile"]),
            "experimental": _params(prof._ExperimentalConfig.__init__, st["experimental"]),
            "handler": _params(prof.tensorboard_trace_handler, st["handler"]),
            "schedule": _params(prof.schedule, st["schedule"]),
            "aic_none": hasattr(getattr(prof, "AiCMetrics", None), "AiCoreNone"),
            "mstx_range": hasattr(mstx, "range_start") and hasattr(mstx, "range_end"),
            "aic_members": frozenset(m for m in st["aic_members"] if hasattr(getattr(prof, "AiCMetrics", None), m)),
            "host_sys_members": frozenset(m for m in st["host_sys_members"]
                                          if hasattr(getattr(prof, "HostSystem", None), m)),
        }

    def check(self, settings: Mapping[str, Any]) -> List[str]:
        """What torch_npu would get wrong silently with these (otherwise valid) settings."""
        problems = []
        path = settings["save_path"]
        bad_chars = sorted(set(path) - PATH_CHARS)
        if bad_chars:
            problems.append(
                f"profiler.save_path {path!r} has characters torch_npu rejects ({' '.join(map(repr, bad_chars))}): "
                "its tensorboard_trace_handler would return None and the trace would be silently discarded; "
                "use only letters, digits, '.', '_', '-' and '/'")
        elif len(path) > 4096 or any(len(part) > 255 for part in path.split("/")):
            problems.append("profiler.save_path is too long for torch_npu (a part over 255 or all over 4096 "
                            "characters)")
        if not {"cpu", "npu"} & set(settings["contents"]):
            problems.append("profiler.contents needs cpu or npu (or both) for the npu backend: nothing would be "
                            "collected")
        return problems

    def plan(self, settings: Mapping[str, Any], features: Mapping[str, Any], key: str) -> Plan:
        """The profiler torch_npu's own objects make, in the order its code runs: the output folder, the
        experimental config, the trace handler, the profiler; then the markers of each step, range and mark."""
        code = _Code(settings, features)
        role = role_of(key)
        create = code.folder(role) + code.experimental_config() + code.handler(role) + code.profiler()
        sections = {
            "create": "\n".join(create) + "\n",
            "begin": "prof.start()\n",
            "advance": "prof.step()\n",
            "end": "prof.stop()\n",
            **code.markers(key),
        }
        return Plan(sections=sections, trace_dir=settings["save_path"], notes=tuple(code.notes))


def _params(fn: Callable, fallback: FrozenSet[str]) -> FrozenSet[str]:
    try:
        return frozenset(n for n in inspect.signature(fn).parameters if n != "self")
    except (TypeError, ValueError):
        return fallback


class _Code:
    """The npu backend's code for one capture, written part by part; each keyword the installed torch_npu lacks
    is left out, and :attr:`notes` says so."""

    def __init__(self, settings: Mapping[str, Any], features: Mapping[str, Any]):
        self.s = settings
        self.f = features
        self.notes: List[str] = []
        if features.get("version"):
            self.notes.append(f"built for the installed torch_npu {features['version']}")

    def keep(self, group: str, name: str, source: str, out: List[str]) -> None:
        """``name=source`` into ``out`` when this torch_npu's ``group`` (a signature) has ``name``; else a note."""
        if name in self.f[group]:
            out.append(f"{name}={source}")
        else:
            self.notes.append(f"this torch_npu has no {name}=; left out")

    def folder(self, role: str) -> List[str]:
        """The imports, a device when npu data is asked for, and the output folder."""
        out = ["import os"] + (["import socket"] if role else []) + ["import torch_npu", ""]
        if "npu" in self.s["contents"]:
            out += ["if not torch_npu.npu.is_available():",
                    "    raise RuntimeError('no NPU device is available (torch_npu.npu.is_available() is False)')"]
        return out + [f"os.makedirs({self.s['save_path']!r}, exist_ok=True)"]

    def experimental_config(self) -> List[str]:
        """``experimental_config``: the level, AI Core metrics, export type, markers, then the rest."""
        s, f = self.s, self.f
        exp: List[str] = []
        self.keep("experimental", "profiler_level", f"{P}.ProfilerLevel.{LEVEL[s['level']]}", exp)
        if s["aic_metrics"] != "default":
            member = AIC[s["aic_metrics"]]
            if member in f.get("aic_members", STATIC_FEATURES["aic_members"]):
                self.keep("experimental", "aic_metrics", f"{P}.AiCMetrics.{member}", exp)
            else:
                self.notes.append(f"this torch_npu has no AiCMetrics.{member}; profiler.aic_metrics left out")
        elif s["level"] in ("level0", "level_none") and f.get("aic_none") and "aic_metrics" in f["experimental"]:
            exp.append(f"aic_metrics={P}.AiCMetrics.AiCoreNone")  # no AI Core metrics below level1
        self.keep("experimental", "export_type", f"{P}.ExportType.{EXPORT[s['export_type']]}", exp)  # a str
        if s["mstx"]:
            if "mstx" in f["experimental"]:
                exp.append("mstx=True")
            elif "msprof_tx" in f["experimental"]:
                exp.append("msprof_tx=True")
            else:
                self.notes.append("this torch_npu has neither mstx= nor msprof_tx=; markers are not collected")
        self._other_options(exp)
        return call(f"experimental_config = {P}._ExperimentalConfig", exp)

    def _other_options(self, exp: List[str]) -> None:
        """The rest of torch_npu's _ExperimentalConfig, each only when it differs from torch_npu's default."""
        s = self.s
        for name in FLAGS:
            if s[name]:
                self.keep("experimental", name, "True", exp)
        if s["op_attr"] and s["export_type"] != "db":
            self.notes.append("torch_npu before 2.13 turns op_attr off unless export_type is db")
        if not s["data_simplification"]:
            self.keep("experimental", "data_simplification", "False", exp)
        if s["gc_detect_threshold"] is not None:
            self.keep("experimental", "gc_detect_threshold", repr(s["gc_detect_threshold"]), exp)
        if s["host_sys"]:
            members = self.f.get("host_sys_members", STATIC_FEATURES["host_sys_members"])
            have = [HOST_SYS[h] for h in s["host_sys"] if HOST_SYS[h] in members]
            lost = [h for h in s["host_sys"] if HOST_SYS[h] not in members]
            if lost:
                self.notes.append(f"this torch_npu has no HostSystem {', '.join(lost)}; left out of host_sys")
            if have:
                self.keep("experimental", "host_sys", "[" + ", ".join(f"{P}.HostSystem.{h}" for h in have) + "]", exp)

    def handler(self, role: str) -> List[str]:
        """``on_trace_ready``, checked for None: torch_npu returns None when it rejects the folder."""
        args = [repr(self.s["save_path"])]
        if role:  # actor, ref, ... share a folder: the role goes into the folder name
            args.append(f"worker_name={worker_name(role, pid=False)}")
        if "analyse_flag" in self.f["handler"]:
            args.append(f"analyse_flag={bool(self.s['analysis'])!r}")
        elif self.s["analysis"]:
            self.notes.append("this torch_npu has no analyse_flag=; analyse offline with "
                              "torch_npu.profiler.profiler.analyse")
        return [f"on_trace_ready = {P}.tensorboard_trace_handler({', '.join(args)})",
                "if on_trace_ready is None:",
                "    raise RuntimeError('torch_npu.profiler.tensorboard_trace_handler returned None: "
                "torch_npu rejected the output folder and would discard the data')"]

    def profiler(self) -> List[str]:
        """``prof``: the activities, torch_npu's own schedule, the handler, the contents' flags, the config."""
        s, f = self.s, self.f
        args: List[str] = []
        missing = [k for k in SCHEDULE if k not in f["schedule"]]
        if missing:
            raise RuntimeError(f"this torch_npu's schedule has no {', '.join(missing)}")
        acts = [f"{P}.ProfilerActivity.{ACTIVITY[a]}" for a in ("cpu", "npu") if a in s["contents"]]
        self.keep("profile", "activities", f"[{', '.join(acts)}]", args)
        before: List[str] = []
        if s["steps"]:  # exactly these steps: a schedule function returning torch_npu's own actions
            before = ["", *steps_function(f"{P}.ProfilerAction", s["steps"])]
            self.keep("profile", "schedule", "schedule", args)
        else:
            self.keep("profile", "schedule", f"{P}.schedule({', '.join(f'{k}={int(s[k])!r}' for k in SCHEDULE)})",
                      args)
        self.keep("profile", "on_trace_ready", "on_trace_ready", args)
        for flag, item in CONTENT_FLAGS:
            if flag in f["profile"]:
                args.append(f"{flag}={item in s['contents']!r}")
            elif item in s["contents"]:
                self.notes.append(f"this torch_npu has no {flag}=; profiler.contents {item} left out")
        self.keep("profile", "experimental_config", "experimental_config", args)
        return before + call(f"prof = {P}.profile", args)

    def markers(self, key: str) -> Dict[str, str]:
        """mstx: a range per recorded step (with ``profiler.mstx`` and npu data), and a recipe's ranges and marks."""
        s = self.s
        out: Dict[str, str] = {}
        if s["mstx"] and "npu" in s["contents"]:
            if self.f.get("mstx_range"):
                out["step_enter"] = f"mstx_range_id = torch_npu.npu.mstx.range_start({key!r} + '#' + str(step))\n"
                out["step_exit"] = "torch_npu.npu.mstx.range_end(mstx_range_id)\n"
            else:
                self.notes.append("this torch_npu has no mstx.range_start; no range per step")
        elif s["mstx"]:
            self.notes.append("mstx markers are recorded only with npu in profiler.contents")
        if self.f.get("mstx_range"):  # a recipe's labelled ranges and marks (collected with profiler.mstx: true)
            out["range_open"] = "handle = torch_npu.npu.mstx.range_start(name)\n"
            out["range_close"] = "torch_npu.npu.mstx.range_end(handle)\n"
            out["mark"] = "torch_npu.npu.mstx.mark(name)\n"
        return out
