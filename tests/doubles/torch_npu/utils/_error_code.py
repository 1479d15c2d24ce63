"""Error-code suffixes appended to torch_npu exception messages.

Format: "\\n[ERROR] <time> (PID:<pid>, Device:<dev>, RankID:<rank>) ERR<sub><code> <SUB> <text>";
the suffix is omitted when TORCH_NPU_COMPACT_ERROR_OUTPUT=1.
"""

from __future__ import annotations

import os
import time
from enum import Enum


class _SubModuleID(Enum):
    PTA = 0
    OPS = 1
    DIST = 2
    GRAPH = 3
    PROF = 4
    UNKNOWN = 99


class ErrCode(Enum):
    SUCCESS = (0, "success")
    PARAM = (1, "invalid parameter")
    TYPE = (2, "invalid type")
    VALUE = (3, "invalid value")
    PTR = (4, "invalid pointer")
    INTERNAL = (5, "internal error")
    MEMORY = (6, "memory error")
    NOT_SUPPORT = (7, "feature not supported")
    NOT_FOUND = (8, "resource not found")
    UNAVAIL = (9, "resource unavailable")
    SYSCALL = (10, "system call failed")
    TIMEOUT = (11, "timeout error")
    PERMISSION = (12, "permission error")
    ACL = (100, "call acl api failed")
    HCCL = (200, "call hccl api failed")
    GE = (300, "call ge api failed")
    EXCEPT = (999, "application exception")

    @property
    def code(self):
        return self.value[0]

    @property
    def msg(self):
        return self.value[1]


def _format_error_msg(submodule: _SubModuleID, error: ErrCode) -> str:
    if os.environ.get("TORCH_NPU_COMPACT_ERROR_OUTPUT", "0") == "1":
        return ""
    rank = os.environ.get("RANK", "-1")
    try:
        import torch_npu.npu as _npu
        device = _npu.current_device() if _npu.is_available() else -1
    except Exception:  # noqa: BLE001
        device = -1
    stamp = time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime())
    return (f"\n[ERROR] {stamp} (PID:{os.getpid()}, Device:{device}, RankID:{rank}) "
            f"ERR{submodule.value:0>2d}{error.code:0>3d} {submodule.name} {error.msg}")


def pta_error(error: ErrCode) -> str:
    return _format_error_msg(_SubModuleID.PTA, error)


def prof_error(error: ErrCode) -> str:
    return _format_error_msg(_SubModuleID.PROF, error)
