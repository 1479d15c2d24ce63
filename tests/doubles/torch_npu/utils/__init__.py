"""torch_npu.utils stand-in (only what the profiler double needs)."""

from torch_npu._double.log import should_print_warning as _should_print_warning  # noqa: F401
