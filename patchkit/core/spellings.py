"""The users' own spellings of patchkit's settings, in one table: torch_npu's names of values, verl's and
MindSpeed-RL's names of keys.

People copy settings from torch_npu code (``torch_npu.profiler.ProfilerLevel.Level1``), from verl's role
config (``profiler: {all_ranks: true, tool_config: {npu: {level: level1}}}``) and from MindSpeed-RL's
``profiler_config`` (``profile_level: level1``, ``profile_with_memory: true``).  The recipe loader
(:mod:`patchkit.recipe.respell`) reads them through this table and hands on only patchkit's own names, so
the codemod, the runtime and ``patchkit show`` never see another spelling; the npu backend writes code with
the same torch_npu names (:func:`member`); the docs' reference is generated from it.

Two tables:

- :data:`MEMBERS`: each torch_npu enum member a patchkit word stands for.  A recipe may write the member as
  torch_npu code does (``ProfilerLevel.Level1``, ``torch_npu.profiler.ProfilerLevel.Level1``), bare
  (``Level1``), or as the string torch_npu stores (``ACL_AICORE_PIPE_UTILIZATION``, as in
  ``profiler_info.json``).
- :data:`KEYS`: other tools' names of ``profiler:`` keys.  :data:`NESTED` is verl's ``tool_config.npu``:
  keys written under it are read as if written under ``profiler:``.

Standard library only: the npu backend imports it inside the training process.
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

TORCH_NPU = "torch_npu.profiler"  # the module torch_npu's enums live in


class Member(NamedTuple):
    """A torch_npu enum member that a patchkit word of ``setting`` stands for."""

    setting: str  # a WORD or WORDS setting of patchkit.core.vocabulary: "level"
    word: str  # patchkit's word: "level1"
    enum: str  # torch_npu's class: "ProfilerLevel"
    name: str  # the member: "Level1"
    value: str = ""  # the string torch_npu stores, where it differs from the member's name

    def spellings(self) -> Tuple[str, ...]:
        """Every way a recipe may write it, the most explicit first."""
        out = (f"{TORCH_NPU}.{self.enum}.{self.name}", f"{self.enum}.{self.name}", self.name)
        return out + ((self.value,) if self.value and self.value not in out else ())


MEMBERS: Tuple[Member, ...] = (
    Member("level", "level_none", "ProfilerLevel", "Level_none"),
    Member("level", "level0", "ProfilerLevel", "Level0"),
    Member("level", "level1", "ProfilerLevel", "Level1"),
    Member("level", "level2", "ProfilerLevel", "Level2"),
    Member("export_type", "text", "ExportType", "Text"),
    Member("export_type", "db", "ExportType", "Db"),
    Member("contents", "cpu", "ProfilerActivity", "CPU"),
    Member("contents", "npu", "ProfilerActivity", "NPU"),
    Member("aic_metrics", "none", "AiCMetrics", "AiCoreNone", "ACL_AICORE_NONE"),
    Member("aic_metrics", "pipe_utilization", "AiCMetrics", "PipeUtilization", "ACL_AICORE_PIPE_UTILIZATION"),
    Member("aic_metrics", "arithmetic_utilization", "AiCMetrics", "ArithmeticUtilization",
           "ACL_AICORE_ARITHMETIC_UTILIZATION"),
    Member("aic_metrics", "memory", "AiCMetrics", "Memory", "ACL_AICORE_MEMORY_BANDWIDTH"),
    Member("aic_metrics", "memory_l0", "AiCMetrics", "MemoryL0", "ACL_AICORE_L0B_AND_WIDTH"),
    Member("aic_metrics", "memory_ub", "AiCMetrics", "MemoryUB", "ACL_AICORE_MEMORY_UB"),
    Member("aic_metrics", "resource_conflict_ratio", "AiCMetrics", "ResourceConflictRatio",
           "ACL_AICORE_RESOURCE_CONFLICT_RATIO"),
    Member("aic_metrics", "l2_cache", "AiCMetrics", "L2Cache", "ACL_AICORE_L2_CACHE"),
    Member("aic_metrics", "memory_access", "AiCMetrics", "MemoryAccess", "ACL_AICORE_MEMORY_ACCESS"),
    Member("host_sys", "cpu", "HostSystem", "CPU"),
    Member("host_sys", "mem", "HostSystem", "MEM"),
    Member("host_sys", "disk", "HostSystem", "DISK"),
    Member("host_sys", "network", "HostSystem", "NETWORK"),
    Member("host_sys", "osrt", "HostSystem", "OSRT"),
    Member("host_sys", "numa", "HostSystem", "NUMA"),
)

# setting -> spelling -> patchkit word (a patchkit word also maps to itself only through the vocabulary)
VALUES: Dict[str, Dict[str, str]] = {}
for _m in MEMBERS:
    for _s in _m.spellings():
        VALUES.setdefault(_m.setting, {})[_s] = _m.word


def member(setting: str, word: str) -> str:
    """torch_npu's member name for patchkit's ``word`` of ``setting``: ``member("level", "level1") == "Level1"``."""
    return next(m.name for m in MEMBERS if m.setting == setting and m.word == word)


def word(setting: str, value: object) -> Optional[str]:
    """patchkit's word for a torch_npu spelling of a value of ``setting``, or None."""
    return VALUES.get(setting, {}).get(value) if isinstance(value, str) else None


# What another tool's key does when read under patchkit's name.
RENAME = "rename"  # the same value, patchkit's key
MEMBER = "member"  # a flag: true puts ``word`` in the list setting ``key``, false takes it out
ALL = "all"  # a flag: true is ``key: all``; false leaves ``key`` to say which
ALWAYS = "always"  # a switch patchkit is always in while a recipe is applied: true only, no effect


class Key(NamedTuple):
    """Another tool's name of a ``profiler:`` key."""

    spelling: str  # "profile_level"
    tool: str  # whose name it is: "MindSpeed-RL", "verl", "torch_npu"
    does: str  # RENAME, MEMBER, ALL or ALWAYS
    key: str = ""  # the patchkit setting it sets (empty for ALWAYS)
    word: str = ""  # MEMBER: the word it puts in the list
    why: str = ""  # ALWAYS: why false cannot be honoured, said in the error's hint


VERL, MSRL, TNPU = "verl", "MindSpeed-RL", "torch_npu"
ALWAYS_ON = "patchkit records the recipe's own window whenever the recipe is applied"

KEYS: Tuple[Key, ...] = (
    # verl: a role's `profiler:` (all_ranks, ranks, discrete, enable) and tool_config.npu (level, contents,
    # analysis, discrete); its npu_profile.yaml before 0.5 (with_* and record_shapes)
    Key("all_ranks", VERL, ALL, "ranks"),
    Key("discrete", VERL, ALWAYS, why="each recipe's window is its own capture already (verl's discrete mode); "
        "for one end-to-end capture of a whole step use verl's own profiler"),
    Key("enable", VERL, ALWAYS, why=ALWAYS_ON + "; to record nothing, revert it"),
    Key("with_cpu", VERL, MEMBER, "contents", "cpu"),
    Key("with_npu", VERL, MEMBER, "contents", "npu"),
    Key("with_memory", VERL, MEMBER, "contents", "memory"),
    Key("with_module", VERL, MEMBER, "contents", "module"),
    Key("with_stack", VERL, MEMBER, "contents", "stack"),
    Key("record_shapes", VERL, MEMBER, "contents", "shapes"),
    # MindSpeed-RL: profiler_config.integrated (mindspeed_rl/config_cls/mindstudio_config.py, ProfilerConfig)
    Key("profile", MSRL, ALWAYS, why=ALWAYS_ON + "; to record nothing, revert it"),
    Key("profile_level", MSRL, RENAME, "level"),
    Key("profile_export_type", MSRL, RENAME, "export_type"),
    Key("profile_save_path", MSRL, RENAME, "save_path"),
    Key("profile_analysis", MSRL, RENAME, "analysis"),
    Key("profile_ranks", MSRL, RENAME, "ranks"),
    Key("profile_with_cpu", MSRL, MEMBER, "contents", "cpu"),
    Key("profile_with_npu", MSRL, MEMBER, "contents", "npu"),
    Key("profile_with_memory", MSRL, MEMBER, "contents", "memory"),
    Key("profile_with_module", MSRL, MEMBER, "contents", "module"),
    Key("profile_record_shapes", MSRL, MEMBER, "contents", "shapes"),
    # torch_npu's own keywords (profile(), _ExperimentalConfig(), tensorboard_trace_handler())
    Key("profiler_level", TNPU, RENAME, "level"),
    Key("msprof_tx", TNPU, RENAME, "mstx"),
    Key("analyse_flag", TNPU, RENAME, "analysis"),
    Key("profile_memory", TNPU, MEMBER, "contents", "memory"),
    Key("with_modules", TNPU, MEMBER, "contents", "module"),
    Key("with_flops", TNPU, MEMBER, "contents", "flops"),
)
KEY: Dict[str, Key] = {k.spelling: k for k in KEYS}
NESTED = ("tool_config", "npu")  # verl: profiler.tool_config.npu.KEY reads as profiler.KEY
