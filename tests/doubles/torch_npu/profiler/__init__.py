"""torch_npu.profiler stand-in: exactly the selected train's public names.

Names a train lacks are simply absent, so ``from torch_npu.profiler import HostSystem``
raises ImportError before T6 and ``AiCMetrics.MemoryAccess`` raises AttributeError before T5.
``analyse`` is NOT re-exported here (import it from torch_npu.profiler.profiler).
"""

from torch_npu import _double

_TRAIN = _double.freeze()

from torch_npu._C._profiler import ProfilerActivity  # noqa: E402

from .experimental_config import (AiCMetrics, ExportType, ProfilerLevel, _ExperimentalConfig,  # noqa: E402
                                  supported_ai_core_metrics, supported_export_type,
                                  supported_profiler_level)
from .profiler import _KinetoProfile, profile, supported_activities, tensorboard_trace_handler  # noqa: E402
from .scheduler import ProfilerAction  # noqa: E402
from .scheduler import Schedule as schedule  # noqa: E402

__all__ = ["profile", "ProfilerActivity", "supported_activities", "tensorboard_trace_handler", "schedule",
           "ProfilerAction", "_ExperimentalConfig", "supported_profiler_level", "supported_ai_core_metrics",
           "supported_export_type", "ProfilerLevel", "AiCMetrics", "ExportType"]

if _TRAIN.has_host_sys:
    from .experimental_config import HostSystem  # noqa: E402,F401
    __all__.append("HostSystem")

if _TRAIN.has_dynamic_profile:
    from . import dynamic_profile  # noqa: E402,F401
