"""The recipe's words, in one table: what `profiler:` and `schedule:` take, and a point's `at:` and `action:`.

Each setting is one :class:`Setting` row: its section, its name, its kind
(which says its type), the words it allows, its default and a line of help.
Everything that knows these words reads the table: the recipe loader (checks,
defaults, the valid ``KEY=VALUE`` keys and their did-you-mean), the records
of :mod:`patchkit.core.model`, :func:`patchkit.runtime.settings.validate` (the same checks
on what the runtime is handed), ``patchkit show`` and, through
``python -m patchkit.recipe.schema``, ``recipe.schema.json``.

Backend names are not here: they are the modules of
:mod:`patchkit.runtime.backends`, and any registered (``backends.names()``).

Standard library only: ``patchkit --help`` imports this.
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple


# The kinds of value a setting takes (its type).
WORD = "word"  # one of ``values``
WORDS = "words"  # a non-empty list of ``values`` (a recipe may write a single word)
FLAG = "flag"  # true or false
COUNT = "count"  # an integer >= ``minimum``
PATH = "path"  # a non-empty path
RANKS = "ranks"  # ``all``, or a list of ranks >= 0 (a recipe may write a single rank)
STEPS = "steps"  # a list of step numbers >= 0, kept sorted and once each; empty: not used
THRESHOLD = "threshold"  # a number >= 0, or none (YAML null, or the word none)


class Setting(NamedTuple):
    section: str  # "profiler" or "schedule"
    name: str
    kind: str
    default: Any
    values: Tuple[str, ...] = ()  # the words a WORD or WORDS setting allows
    minimum: int = 0  # the least a COUNT may be
    help: str = ""

    @property
    def key(self) -> str:
        """How a ``KEY=VALUE`` override and an error message name it: ``profiler.level``."""
        return f"{self.section}.{self.name}"


# In the order of the keyword arguments of the inserted ``configure(...)`` line
# (mstx, then replicas and replica_size, then steps came last); each section's keys keep this order.
SETTINGS: Tuple[Setting, ...] = (
    Setting("profiler", "level", WORD, "level0", ("level_none", "level0", "level1", "level2"),
            help="how much the npu profiler collects"),
    Setting("profiler", "contents", WORDS, ("cpu", "npu"),
            ("npu", "cpu", "memory", "shapes", "module", "stack", "flops"),
            help="what is recorded (flops: with_flops)"),
    Setting("profiler", "export_type", WORD, "text", ("text", "db"), help="the npu trace format"),
    Setting("profiler", "analysis", FLAG, False, help="analyse online when a window closes (npu)"),
    Setting("profiler", "save_path", PATH, "./outputs/patchkit",
            help="where traces go; a recipe's default is ./outputs/patchkit/<recipe id>"),
    Setting("profiler", "ranks", RANKS, "all", help="all, or the ranks that profile, such as [0, 1]"),
    Setting("schedule", "wait", COUNT, 0, help="steps to skip at the start of each cycle"),
    Setting("schedule", "warmup", COUNT, 0, help="steps profiled but thrown away before each window"),
    Setting("schedule", "active", COUNT, 1, minimum=1, help="steps recorded in each window"),
    Setting("schedule", "repeat", COUNT, 1, help="cycles to record; 0: until the process ends"),
    Setting("schedule", "skip_first", COUNT, 0, help="steps to skip once, before the first cycle"),
    Setting("profiler", "mstx", FLAG, False, help="npu: an mstx range per step (lightweight markers)"),
    Setting("profiler", "replicas", RANKS, "all",
            help="rollout workers: all, or the Agent Loop replicas that profile, such as [0] (every process of them)"),
    Setting("profiler", "replica_size", COUNT, 0,
            help="rollout workers: processes per replica (rollout tp*dp*pp), to read the replica from the rank "
                 "where verl sets no VERL_REPLICA_RANK; 0: VERL_REPLICA_RANK only"),
    Setting("schedule", "steps", STEPS, (),
            help="exactly these steps, such as [1, 2, 5] (patchkit's step count at the recipe's points, from 0); "
                 "instead of wait, warmup, active, repeat and skip_first"),
    Setting("schedule", "trigger", WORD, "schedule", ("schedule", "manual"),
            help="manual: record nothing until `patchkit capture` asks, then the next steps it asks for"),
)
PERIODIC = ("wait", "warmup", "active", "repeat", "skip_first")  # the keys schedule.steps replaces

# torch_npu's _ExperimentalConfig, under its own names (npu only; a torch_npu without one leaves it out, said in show)
AIC_METRICS = ("default", "none", "pipe_utilization", "arithmetic_utilization", "memory", "memory_l0", "memory_ub",
               "resource_conflict_ratio", "l2_cache", "memory_access")
HOST_SYS = ("cpu", "mem", "disk", "network", "osrt", "numa")
NPU_SETTINGS: Tuple[Setting, ...] = (
    Setting("profiler", "aic_metrics", WORD, "default", AIC_METRICS,
            help="npu: AI Core metrics; default: none below level1, torch_npu's own choice from level1"),
    Setting("profiler", "l2_cache", FLAG, False, help="npu: collect L2 cache data"),
    Setting("profiler", "op_attr", FLAG, False, help="npu: operator attributes (needs export_type db before 2.13)"),
    Setting("profiler", "data_simplification", FLAG, True, help="npu: delete the raw data after parsing"),
    Setting("profiler", "record_op_args", FLAG, False, help="npu: operator arguments, for AOE tuning"),
    Setting("profiler", "gc_detect_threshold", THRESHOLD, None,
            help="npu: record Python gc events longer than this many ms (0: all); none: off"),
    Setting("profiler", "host_sys", WORDS, (), HOST_SYS, help="npu: host-side system data to collect"),
    Setting("profiler", "sys_io", FLAG, False, help="npu: NIC and RoCE data"),
    Setting("profiler", "sys_interconnection", FLAG, False, help="npu: HCCS, PCIe and inter-chip data"),
)
SETTINGS = SETTINGS + NPU_SETTINGS
NPU_ONLY = tuple(s.name for s in NPU_SETTINGS)

SETTING: Dict[str, Setting] = {s.name: s for s in SETTINGS}
SECTIONS = ("profiler", "schedule")
PROFILER_KEYS = tuple(s.name for s in SETTINGS if s.section == "profiler")
SCHEDULE_KEYS = tuple(s.name for s in SETTINGS if s.section == "schedule")
DEFAULTS: Dict[str, Any] = {s.name: s.default for s in SETTINGS}

LEVELS = SETTING["level"].values
CONTENTS = SETTING["contents"].values
EXPORT_TYPES = SETTING["export_type"].values

# A point's action.  Its position (`at:`) is a kind of patchkit.recipe.kinds, which declares the actions it allows.
ACTIONS = ("start", "step", "refuse", "range", "mark")  # range and mark: a labelled span or instant, in a window
DEFAULT_ACTION = "step"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def problem(setting: Setting, value: Any) -> Optional[str]:
    """What is wrong with ``value`` for ``setting`` (as the runtime is handed it), or None."""
    key, kind = setting.key, setting.kind
    if kind == WORD:
        if not isinstance(value, str) or value not in setting.values:
            return f"{key} {value!r} is not one of {', '.join(setting.values)}"
    elif kind == WORDS:
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value) or (
                not value and setting.default):
            return f"{key} must be a list of {', '.join(setting.values)}; got {value!r}"
        bad = [v for v in value if v not in setting.values]
        if bad:
            return f"{key}: unknown {', '.join(map(repr, bad))}; use {', '.join(setting.values)}"
    elif kind == FLAG:
        if not isinstance(value, bool):
            return f"{key} must be true or false; got {value!r}"
    elif kind == COUNT:
        if not _is_int(value) or value < setting.minimum:
            return f"{key} must be an integer >= {setting.minimum}; got {value!r}"
    elif kind == PATH:
        if not isinstance(value, str) or not value.strip():
            return f"{key} must be a non-empty path; got {value!r}"
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: bytes that were not UTF-8, as os.fsdecode hands them on
                return f"{key} is not valid UTF-8: {value!r}"
    elif kind == RANKS:
        if value != "all" and not (isinstance(value, (list, tuple)) and all(_is_int(r) and r >= 0 for r in value)):
            return f"{key} must be 'all' or a list of ranks like [0, 1]; got {value!r}"
    elif kind == THRESHOLD:
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0):
            return f"{key} must be a number of milliseconds >= 0, or none; got {value!r}"
    elif kind == STEPS:
        if not (isinstance(value, (list, tuple)) and all(_is_int(n) and n >= 0 for n in value)):
            return f"{key} must be a list of step numbers like [1, 2, 5]; got {value!r}"
    else:  # pragma: no cover - a row of the table with a kind nobody reads
        raise ValueError(f"{key}: unknown kind {kind!r}")
    return None
