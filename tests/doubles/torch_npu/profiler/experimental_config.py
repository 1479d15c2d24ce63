"""torch_npu.profiler.experimental_config: enums and _ExperimentalConfig per train.

Invalid values never raise: each prints a [WARNING] and resets (section 6.3 of
the reference), in the order of the real _check_params.  Enum "members" are
plain string class attributes, as in torch_npu.
"""

from __future__ import annotations

import inspect

from torch_npu import _double
from torch_npu._C import _profiler as _C_profiler
from torch_npu._double.codegen import make_function
from torch_npu._double.log import print_info_msg, print_warn_msg, py_warn

_TRAIN = _double.freeze()
_MOD = __name__


class Constant:
    LEVEL0 = "Level0"
    LEVEL1 = "Level1"
    LEVEL2 = "Level2"
    LEVEL_NONE = "Level_none"
    AicPipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    AicArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
    AicMemory = "ACL_AICORE_MEMORY_BANDWIDTH"
    AicMemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
    AicMemoryUB = "ACL_AICORE_MEMORY_UB"
    AicResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
    AicL2Cache = "ACL_AICORE_L2_CACHE"
    AicMemoryAccess = "ACL_AICORE_MEMORY_ACCESS"
    AicMetricsNone = "ACL_AICORE_NONE"
    Db = "db"
    Text = "text"
    CPU = "cpu"
    MEM = "mem"
    DISK = "disk"
    NETWORK = "network"
    OSRT = "osrt"
    NUMA = "numa"


class ProfilerLevel:
    Level0 = Constant.LEVEL0
    Level1 = Constant.LEVEL1
    Level2 = Constant.LEVEL2


class AiCMetrics:
    PipeUtilization = Constant.AicPipeUtilization
    ArithmeticUtilization = Constant.AicArithmeticUtilization
    Memory = Constant.AicMemory
    MemoryL0 = Constant.AicMemoryL0
    MemoryUB = Constant.AicMemoryUB
    ResourceConflictRatio = Constant.AicResourceConflictRatio
    L2Cache = Constant.AicL2Cache


class ExportType:
    Db = Constant.Db
    Text = Constant.Text


if _TRAIN.has_level_none:
    ProfilerLevel.Level_none = Constant.LEVEL_NONE
if _TRAIN.has_memory_access:
    AiCMetrics.MemoryAccess = Constant.AicMemoryAccess
if _TRAIN.has_aicore_none:
    AiCMetrics.AiCoreNone = Constant.AicMetricsNone

__all__ = ["_ExperimentalConfig", "supported_profiler_level", "supported_ai_core_metrics",
           "supported_export_type", "ProfilerLevel", "AiCMetrics", "ExportType"]

if _TRAIN.has_host_sys:
    class HostSystem:
        CPU = Constant.CPU
        MEM = Constant.MEM
        DISK = Constant.DISK
        NETWORK = Constant.NETWORK
        OSRT = Constant.OSRT

    if _TRAIN.has_numa:
        HostSystem.NUMA = Constant.NUMA
    __all__.append("HostSystem")
    _HOST_SYS_VALUES = [v for k, v in vars(HostSystem).items() if not k.startswith("_")]

_LEVELS = [Constant.LEVEL0, Constant.LEVEL1, Constant.LEVEL2] + (
    [Constant.LEVEL_NONE] if _TRAIN.has_level_none else [])
_AIC_VALUES = [Constant.AicL2Cache, Constant.AicMemoryL0, Constant.AicMemory, Constant.AicMemoryUB,
               Constant.AicPipeUtilization, Constant.AicArithmeticUtilization,
               Constant.AicResourceConflictRatio] + (
    [Constant.AicMemoryAccess] if _TRAIN.has_memory_access else []) + [Constant.AicMetricsNone]


def supported_profiler_level():
    levels = {ProfilerLevel.Level0, ProfilerLevel.Level1, ProfilerLevel.Level2}
    if _TRAIN.has_host_sys:  # Level_none listed from T6 on
        levels.add(Constant.LEVEL_NONE)
    return levels


def supported_ai_core_metrics():
    metrics = {AiCMetrics.PipeUtilization, AiCMetrics.ArithmeticUtilization, AiCMetrics.Memory,
               AiCMetrics.MemoryL0, AiCMetrics.MemoryUB, AiCMetrics.ResourceConflictRatio,
               AiCMetrics.L2Cache}
    if _TRAIN.has_memory_access:
        metrics.add(Constant.AicMemoryAccess)
    if _TRAIN.has_host_sys:
        metrics.add(Constant.AicMetricsNone)
    return metrics


def supported_export_type():
    return {ExportType.Db, ExportType.Text}


class _ExperimentalConfig:
    """Extra NPU options of torch_npu.profiler.profile (never torch's _ExperimentalConfig)."""

    def _init(self, b):
        # Resets of values the caller did not pass (train defaults) are printed and
        # recorded but never escalated by strict mode.
        explicit = frozenset(k for k, v in b.items() if k not in _DEFAULTS or not _same(v, _DEFAULTS[k]))
        level = b["profiler_level"]
        aic = b["aic_metrics"]
        self._profiler_level = level
        self._aic_metrics = aic
        if not _TRAIN.new_defaults:  # T1-T8 promote AicMetricsNone at Level1/Level2
            if level != Constant.LEVEL_NONE and level != Constant.LEVEL0 and aic == Constant.AicMetricsNone:
                self._aic_metrics = Constant.AicPipeUtilization
        self._l2_cache = b["l2_cache"]
        if _TRAIN.has_msprof_tx:
            self._msprof_tx = b["msprof_tx"]
        if _TRAIN.has_mstx_param:
            self._mstx = b["mstx"]
        self._data_simplification = b["data_simplification"]
        self.record_op_args = b["record_op_args"]
        if _TRAIN.export_type_list:
            self._export_type = self._conver_export_type_to_list(b["export_type"], "export_type" in explicit)
        else:
            self._export_type = b["export_type"]
        if _TRAIN.has_host_sys:
            self._host_sys = b["host_sys"] if b["host_sys"] else []
        if _TRAIN.has_op_attr:
            self._op_attr = b["op_attr"]
        if _TRAIN.has_gc_detect:
            self._gc_detect_threshold = b["gc_detect_threshold"]
        if _TRAIN.has_mstx_domain:
            self._mstx_domain_include = b["mstx_domain_include"] if b["mstx_domain_include"] else []
            self._mstx_domain_exclude = b["mstx_domain_exclude"] if b["mstx_domain_exclude"] else []
            self._sys_io = b["sys_io"]
            self._sys_interconnection = b["sys_interconnection"]
        self._check_params(explicit)
        if _TRAIN.has_mstx_domain:
            self._check_mstx_domain_params(explicit)
            self._check_host_sys_params(explicit)

    def __call__(self):
        fields = dict(trace_level=self._profiler_level, metrics=self._aic_metrics, l2_cache=self._l2_cache,
                      record_op_args=self.record_op_args)
        if _TRAIN.has_msprof_tx:
            fields.update(msprof_tx=self._tx(), op_attr=self._op_attr)
        if _TRAIN.has_host_sys:
            fields.update(host_sys=self._host_sys, mstx_domain_include=self._mstx_domain_include,
                          mstx_domain_exclude=self._mstx_domain_exclude, sys_io=self._sys_io,
                          sys_interconnection=self._sys_interconnection)
        return _C_profiler._ExperimentalConfig(**fields)

    # ------------------------------------------------------------ helpers ---
    def _tx(self):
        return bool(getattr(self, "_msprof_tx", False) or getattr(self, "_mstx", False))

    def _export_list(self):
        """export_type as a list in every train (internal use)."""
        et = self._export_type
        return list(et) if isinstance(et, list) else [et]

    def _conver_export_type_to_list(self, export_type, explicit=True):
        if not export_type:
            print_warn_msg(f"Invalid parameter export_type: {export_type}, reset it to text.", reset=explicit)
            return [ExportType.Text]
        if isinstance(export_type, str):
            return [export_type]
        if isinstance(export_type, list):
            try:
                return list(set(export_type))
            except Exception as error:  # noqa: BLE001 - unhashable elements
                print_warn_msg(f"Invalid parameter export_type: {export_type}, reset it to text. "
                               f"Error is {error}", reset=explicit)
                return [ExportType.Text]
        print_warn_msg(f"Invalid parameter export_type: {export_type}, reset it to text.", reset=explicit)
        return [ExportType.Text]

    def _check_params(self, explicit=None):
        def esc(*params):
            return explicit is None or any(p in explicit for p in params)

        if (self._profiler_level in (Constant.LEVEL0, Constant.LEVEL_NONE)
                and self._aic_metrics != Constant.AicMetricsNone):
            print_warn_msg("Please use level1 or level2 if you want to collect aic metrics, "
                           "reset aic metrics to None!", reset=esc("aic_metrics"))
            self._aic_metrics = Constant.AicMetricsNone
        if not isinstance(self._l2_cache, bool):
            print_warn_msg("Invalid parameter l2_cache, which must be of boolean type, reset it to False.",
                           reset=esc("l2_cache"))
            self._l2_cache = False
        if _TRAIN.has_msprof_tx and not isinstance(self._msprof_tx, bool):
            print_warn_msg("Invalid parameter msprof_tx, which must be of boolean type, reset it to False.",
                           reset=esc("msprof_tx"))
            self._msprof_tx = False
        if _TRAIN.has_mstx_param and not isinstance(self._mstx, bool):
            print_warn_msg("Invalid parameter mstx, which must be of boolean type, reset it to False.",
                           reset=esc("mstx"))
            self._mstx = False
        if self._data_simplification is not None and not isinstance(self._data_simplification, bool):
            print_warn_msg("Invalid parameter data_simplification, which must be of boolean type, "
                           "reset it to default.", reset=esc("data_simplification"))
            self._data_simplification = True
        if not isinstance(self.record_op_args, bool):
            print_warn_msg("Invalid parameter record_op_args, which must be of boolean type, reset it to False.",
                           reset=esc("record_op_args"))
            self.record_op_args = False
        if _TRAIN.has_op_attr and not isinstance(self._op_attr, bool):
            print_warn_msg("Invalid parameter op_attr, which must be of boolean type, reset it to False.",
                           reset=esc("op_attr"))
            self._op_attr = False
        if _TRAIN.has_mstx_domain:
            if not isinstance(self._sys_io, bool):
                print_warn_msg("Invalid parameter sys_io, which must be of boolean type, reset it to False.",
                               reset=esc("sys_io"))
                self._sys_io = False
            if not isinstance(self._sys_interconnection, bool):
                print_warn_msg("Invalid parameter sys_interconnection, which must be of boolean type, "
                               "reset it to False.", reset=esc("sys_interconnection"))
                self._sys_interconnection = False
        if _TRAIN.has_mstx_param and self._msprof_tx:
            py_warn("The parameter msprof_tx will be deprecated. Please use the new parameter mstx instead.")
        if (_TRAIN.level_none_forces_mstx and self._profiler_level == Constant.LEVEL_NONE
                and not self._tx()):
            # Wording not verified against the wheel; behaviour per reference section 6.3 rule 4.
            print_warn_msg("Profiler level is Level_none but mstx and msprof_tx are both False, "
                           "reset mstx to True.", reset=esc("mstx", "msprof_tx"))
            self._mstx = True
        if self._profiler_level not in _LEVELS:
            print_warn_msg("Invalid parameter profiler_level, reset it to ProfilerLevel.Level0.", reset=esc("profiler_level"))
            self._profiler_level = ProfilerLevel.Level0
        if self._aic_metrics not in _AIC_VALUES:
            print_warn_msg("Invalid parameter aic_metrics, reset it to default.", reset=esc("aic_metrics"))
            if self._profiler_level == ProfilerLevel.Level0:
                self._aic_metrics = Constant.AicMetricsNone
            else:
                self._aic_metrics = Constant.AicPipeUtilization
        if _TRAIN.export_type_list:
            if not all(et in (ExportType.Text, ExportType.Db) for et in self._export_type):
                print_warn_msg("Invalid parameter export_type, reset it to text.", reset=esc("export_type"))
                self._export_type = [ExportType.Text]
            has_db = ExportType.Db in self._export_type
        else:
            if self._export_type not in (ExportType.Text, ExportType.Db):
                print_warn_msg("Invalid parameter type, reset it to text.", reset=esc("export_type"))
                self._export_type = ExportType.Text
            has_db = self._export_type == ExportType.Db
        if _TRAIN.has_op_attr and self._op_attr and not has_db:
            cann_db = _TRAIN.op_attr_text_when_cann_db and _double.get("cann_db_default")
            if not cann_db:
                print_warn_msg("op_attr switch is invalid with export type set as text.", reset=esc("op_attr"))
                self._op_attr = False
        if _TRAIN.has_gc_detect and self._gc_detect_threshold is not None:
            if not isinstance(self._gc_detect_threshold, (int, float)):
                print_warn_msg("Parameter gc_detect_threshold is not int or float type, reset it to default.",
                               reset=esc("gc_detect_threshold"))
                self._gc_detect_threshold = None
            elif self._gc_detect_threshold < 0.0:
                print_warn_msg("Parameter gc_detect_threshold can not be negative, reset it to default.",
                               reset=esc("gc_detect_threshold"))
                self._gc_detect_threshold = None
            elif self._gc_detect_threshold == 0.0:
                print_info_msg("Parameter gc_detect_threshold is set to 0, it will collect all gc events.")

    def _check_mstx_domain_params(self, explicit=None):
        def esc(*params):
            return explicit is None or any(p in explicit for p in params)

        if not self._tx():
            if self._mstx_domain_include or self._mstx_domain_exclude:
                switch = "mstx or msprof_tx" if _TRAIN.has_mstx_param else "msprof_tx"
                print_warn_msg(f"mstx_domain_include and mstx_domain_exclude are only valid when {switch} "
                               "is True.", reset=esc("mstx_domain_include", "mstx_domain_exclude"))
            self._mstx_domain_include = []
            self._mstx_domain_exclude = []
            return
        for attr, label in (("_mstx_domain_include", "mstx_domain_include"),
                            ("_mstx_domain_exclude", "mstx_domain_exclude")):
            value = getattr(self, attr)
            if not value:
                continue
            if not isinstance(value, list):
                print_warn_msg(f"Invalid parameter {label}, which must be of list type, reset it to default.",
                               reset=esc("mstx_domain_include", "mstx_domain_exclude"))
                setattr(self, attr, [])
            elif any(not isinstance(domain, str) for domain in value):
                print_warn_msg(f"Invalid parameter {label}, which contents must be of str type, "
                               "reset it to default.", reset=esc("mstx_domain_include", "mstx_domain_exclude"))
                setattr(self, attr, [])
            else:
                setattr(self, attr, list(set(value)))
        if self._mstx_domain_include and self._mstx_domain_exclude:
            print_warn_msg("Parameter mstx_domain_include and mstx_domain_exclude can not be both set, "
                           "only mstx_domain_include will work.", reset=esc("mstx_domain_include", "mstx_domain_exclude"))
            self._mstx_domain_exclude = []

    def _check_host_sys_params(self, explicit=None):
        def esc(*params):
            return explicit is None or any(p in explicit for p in params)

        if not isinstance(self._host_sys, list):
            print_warn_msg("Invalid parameter host_sys, which must be of list type, reset it to empty.",
                           reset=esc("host_sys"))
            self._host_sys = []
        if not all(item in _HOST_SYS_VALUES for item in self._host_sys):
            print_warn_msg("Invalid parameter host_sys, reset it to empty.", reset=esc("host_sys"))
            self._host_sys = []
        self._host_sys = list(set(str(item) for item in self._host_sys))


def _export_type_prop(self):
    return self._export_type


_ExperimentalConfig.export_type = property(_export_type_prop)
if _TRAIN.has_gc_detect:
    _ExperimentalConfig.with_gc = property(lambda self: self._gc_detect_threshold is not None)
    _ExperimentalConfig.gc_detect_threshold = property(lambda self: self._gc_detect_threshold)
if _TRAIN.has_tx_enabled:
    _ExperimentalConfig.tx_enabled = property(lambda self: self._tx())


def _config_params():
    aic_default = "Constant.AicPipeUtilization" if _TRAIN.new_defaults else "Constant.AicMetricsNone"
    parts = ["self", "profiler_level=Constant.LEVEL0", f"aic_metrics={aic_default}", "l2_cache=False"]
    if _TRAIN.has_msprof_tx:
        parts.append("msprof_tx=False")
    if _TRAIN.has_mstx_param:
        parts.append("mstx=False")
    parts += ["data_simplification=True", "record_op_args=False"]
    if _TRAIN.has_op_attr:
        parts.append("op_attr=False")
    if _TRAIN.has_gc_detect:
        parts.append("gc_detect_threshold=None")
    if _TRAIN.new_defaults:
        parts.append("export_type=ExportType.Text")
    elif _TRAIN.export_type_list:
        parts.append("export_type=None")
    else:
        parts.append("export_type=Constant.Text")
    if _TRAIN.has_host_sys:
        parts += ["host_sys=None", "mstx_domain_include=None", "mstx_domain_exclude=None",
                  "sys_io=False", "sys_interconnection=False"]
    return ", ".join(parts)


def _same(a, b):
    try:
        return type(a) is type(b) and a == b
    except Exception:  # noqa: BLE001
        return False


_ExperimentalConfig.__init__ = make_function(
    "_ExperimentalConfig.__init__", _config_params(), _ExperimentalConfig._init, module=_MOD,
    namespace={"Constant": Constant, "ExportType": ExportType}, pass_first=True)
_DEFAULTS = {name: p.default for name, p in inspect.signature(_ExperimentalConfig.__init__).parameters.items()
             if p.default is not inspect.Parameter.empty}
