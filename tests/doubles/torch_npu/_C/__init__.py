"""torch_npu._C stand-in: only the profiler bindings the double needs."""
