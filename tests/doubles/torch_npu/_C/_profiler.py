"""Stand-in for the pybind11 module torch_npu._C._profiler.

``ProfilerActivity`` is its own class (like the pybind enum): it never compares
equal to ``torch.profiler.ProfilerActivity`` members, so passing torch's enum to
the torch_npu profiler warns and resets, as on a real NPU host.
"""

from __future__ import annotations


class _EnumMeta(type):
    def __iter__(cls):
        return iter(cls.__members__.values())

    def __len__(cls):
        return len(cls.__members__)


class ProfilerActivity(metaclass=_EnumMeta):
    __slots__ = ("_name", "_value")
    __members__ = {}

    def __init__(self, name, value):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_value", value)

    def __setattr__(self, key, value):
        raise AttributeError("ProfilerActivity members are read-only")

    @property
    def name(self):
        return self._name

    @property
    def value(self):
        return self._value

    def __int__(self):
        return self._value

    def __index__(self):
        return self._value

    def __str__(self):
        return f"ProfilerActivity.{self._name}"

    def __repr__(self):
        return f"<ProfilerActivity.{self._name}: {self._value}>"

    def __eq__(self, other):
        if type(other) is ProfilerActivity:
            return self._value == other._value
        return NotImplemented

    def __ne__(self, other):
        res = self.__eq__(other)
        return res if res is NotImplemented else not res

    def __hash__(self):
        return hash(("torch_npu.ProfilerActivity", self._value))

    def __reduce__(self):
        return (getattr, (ProfilerActivity, self._name))


ProfilerActivity.CPU = ProfilerActivity("CPU", 1)
ProfilerActivity.NPU = ProfilerActivity("NPU", 2)
ProfilerActivity.__members__ = {"CPU": ProfilerActivity.CPU, "NPU": ProfilerActivity.NPU}
ProfilerActivity.__module__ = "torch_npu._C._profiler"


def _supported_npu_activities():
    return {ProfilerActivity.CPU, ProfilerActivity.NPU}


class _ExperimentalConfig:
    """What torch_npu.profiler._ExperimentalConfig.__call__() hands to C++."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __repr__(self):
        inner = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"_ExperimentalConfig({inner})"
