"""Message formats of the real torch_npu and the no_exception_func wrappers.

Profiler lines go to stdout as
    [YYYY-mm-dd HH:MM:SS] [WARNING] [<pid>] profiler.py: <msg>
and mstx (torch_npu.utils) errors as
    YYYY-mm-dd HH:MM:SS(<pid>)-[ERROR] <msg>
WARNING lines are suppressed by TORCH_NPU_WARNING_DISABLE=1 (older name
TORCH_NPU_DISABLED_WARNING=1) or a RANK other than "0"; they are recorded anyway.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import warnings

from . import is_strict
from .recorder import DoubleStrictError, ErrorRecord, recorder

_tls = threading.local()


def _stack():
    st = getattr(_tls, "api_stack", None)
    if st is None:
        st = _tls.api_stack = []
    return st


def push_api(api):
    _stack().append(api)


def pop_api():
    st = _stack()
    if st:
        st.pop()


def current_api():
    st = _stack()
    return st[-1] if st else "<internal>"


def should_print_warning() -> bool:
    for name in ("TORCH_NPU_WARNING_DISABLE", "TORCH_NPU_DISABLED_WARNING"):
        if os.environ.get(name, "0") == "1":
            return False
    rank = os.environ.get("RANK")
    return rank is None or rank == "0"


def _stamp():
    return time.strftime("[%Y-%m-%d %H:%M:%S]", time.localtime())


def print_info_msg(message: str):
    print(f"{_stamp()} [INFO] [{os.getpid()}] profiler.py: {message}", flush=True)


def print_error_msg(message: str):
    print(f"{_stamp()} [ERROR] [{os.getpid()}] profiler.py: {message}", flush=True)


def _escalate(message):
    if is_strict():
        raise DoubleStrictError(f"{current_api()}: {message}")


def print_warn_msg(message: str, reset: bool = False):
    """A [WARNING] line; ``reset=True`` marks a value the real API silently replaced."""
    recorder.warnings.append((current_api(), message))
    if should_print_warning():
        print(f"{_stamp()} [WARNING] [{os.getpid()}] profiler.py: {message}", flush=True)
    if reset:
        _escalate(message)


def py_warn(message: str, reset: bool = False, stacklevel: int = 3):
    """warnings.warn as used by the real mstx / msprof_tx / path checks."""
    recorder.warnings.append((current_api(), message))
    warnings.warn(message, stacklevel=stacklevel)
    if reset:
        _escalate(message)


def hazard(message: str, diagnostic: str = None):
    """A silent no-op of the real API: recorded; DoubleStrictError in strict mode."""
    recorder.diagnostics.append(diagnostic or ("hazard: " + message))
    if is_strict():
        recorder.strict_violations.append(message)
        raise DoubleStrictError(f"{current_api()}: {message}")


def diag(message: str):
    recorder.diagnostics.append(message)


def _print_utils_log(level, message):
    now = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(int(time.time())))
    print(f"{now}({os.getpid()})-[{level}] {message}", flush=True)


def no_exception_func(default_ret=None, strict_hazard=None, printer=None):
    """Port of torch_npu's wrapper: log ``Call <name> failed. Exception: <msg>``, return default.

    DoubleStrictError always propagates.  With ``strict_hazard`` set, strict mode
    turns a swallowed exception into DoubleStrictError (e.g. a handler of None).
    """
    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            try:
                return func(*args, **kwargs)
            except DoubleStrictError:
                raise
            except Exception as ex:  # noqa: BLE001 - this is the behaviour being imitated
                text = f"Call {func.__name__} failed. Exception: {ex}"
                if printer is None:
                    print_error_msg(text)
                else:
                    printer(text)
                recorder.errors.append(ErrorRecord(getattr(func, "__qualname__", func.__name__),
                                                   type(ex).__name__, str(ex)))
                if strict_hazard and is_strict():
                    recorder.strict_violations.append(strict_hazard)
                    raise DoubleStrictError(f"{strict_hazard}: {type(ex).__name__}: {ex}") from ex
                return default_ret
        return wrapper
    return decorator


def mstx_no_exception_func(default_ret=None):
    return no_exception_func(default_ret, printer=lambda text: _print_utils_log("ERROR", text))
