"""torch_npu.version stand-in: the version of the imitated release."""

from torch_npu import _double

__version__ = _double.current_train().version
git_version = "double"
