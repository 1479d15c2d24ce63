"""torch_npu.npu.mstx stand-in, per release train (section 9 of the reference).

Markers are recorded only while mstx is enabled: a torch_npu profile with
ProfilerActivity.NPU and mstx/msprof_tx is running (or config(mstx_external=True)
imitates msprof/mspti).  Otherwise range_start returns 0, range_push/range_pop
return -1 and mark does nothing, exactly like the real C++ side.
"""

from __future__ import annotations

import functools
import threading
import time

from torch_npu import _double
from torch_npu._double.codegen import make_function
from torch_npu._double.log import diag, hazard, mstx_no_exception_func, py_warn
from torch_npu._double.recorder import MstxRecord, recorder
from torch_npu._double.runtime import mstx_state

_TRAIN = _double.freeze()
_MOD = __name__

__all__ = ["mstx"] if _TRAIN.has_mstx_module else []


# ---------------------------------------------------------------- C++ side ---
def _enabled():
    return mstx_state.enabled or _double.get("mstx_external")


def _check_enabled(fn):
    """Disabled calls are no-ops.  Strict mode only objects when no profile in this process was
    ever configured to record markers (NPU activity + mstx/msprof_tx): such markers can never
    show up.  Calls during wait/warmup phases or after stop() are normal and stay silent."""
    if _enabled():
        return True
    if mstx_state.ever_configured:
        diag(f"mstx_disabled:{fn}")
    else:
        hazard(f"mstx.{fn} called but no torch_npu profile with ProfilerActivity.NPU and "
               "mstx/msprof_tx was created; the real call is a no-op and the marker is lost",
               diagnostic=f"mstx_disabled:{fn}")
    return False


def _torch_mirror_enter(name):
    if not _double.get("mstx_mirror"):
        return None
    owner = mstx_state.owner
    backend = getattr(owner, "backend", None)
    if backend is None or backend.kind != "torch" or backend.state != "running":
        return None
    try:
        import torch
        return torch.ops.profiler._record_function_enter_new(name, None)
    except Exception:  # noqa: BLE001
        return None


def _torch_mirror_exit(handle):
    if handle is None:
        return
    try:
        import torch
        torch.ops.profiler._record_function_exit._RecordFunction(handle)
    except Exception:  # noqa: BLE001
        pass


def _record(kind, message, domain, has_stream, internal=False):
    t_ns = time.time_ns()
    recorder.mstx.append(MstxRecord(kind, message, domain, has_stream, t_ns, threading.get_ident()))
    owner = mstx_state.owner
    if internal:
        return  # per-step ranges are already visible as ProfilerStep#N spans
    if owner is not None and getattr(owner, "backend", None) is not None:
        owner.backend.add_mstx(kind, message, domain, has_stream, time.perf_counter_ns())


def _c_mark(message, stream, domain, fn="mark"):
    if not _check_enabled(fn):
        return None
    if not mstx_state.domain_allowed(domain):
        diag(f"mstx_domain_filtered:{domain}")
        return None
    _record("mark", message, domain, stream is not None)
    _torch_mirror_exit(_torch_mirror_enter(message))
    return None


def _c_range_start(message, stream, domain, fn="range_start", internal=False):
    if internal:
        if not _enabled():
            return 0
    elif not _check_enabled(fn):
        return 0
    if not mstx_state.domain_allowed(domain):
        diag(f"mstx_domain_filtered:{domain}")
        return 0
    rid = mstx_state.next_id()
    _record("range_start", message, domain, stream is not None, internal=internal)
    if not internal:
        handle = _torch_mirror_enter(message)
        if handle is not None:
            mstx_state.mirror[rid] = handle
    return rid


def _c_range_end(range_id, domain, fn="range_end", internal=False):
    if range_id == 0:
        return None
    if not _enabled():
        return None
    _record("range_end", str(range_id), domain, False, internal=internal)
    _torch_mirror_exit(mstx_state.mirror.pop(range_id, None))
    return None


def _c_range_push(message, stream, domain):
    if not _check_enabled("range_push"):
        return -1
    if not mstx_state.domain_allowed(domain):
        diag(f"mstx_domain_filtered:{domain}")
        return -1
    stack = mstx_state.push_stack(domain)
    depth = len(stack)
    stack.append(_torch_mirror_enter(message))
    _record("range_push", message, domain, stream is not None)
    return depth


def _c_range_pop(domain):
    if not _check_enabled("range_pop"):
        return -1
    stack = mstx_state.push_stack(domain)
    if not stack:
        return -1
    _torch_mirror_exit(stack.pop())
    _record("range_pop", None, domain, False)
    return len(stack)


def _internal_range_start(message, stream=None, domain="default"):
    """Per-step range the T11+ profile opens on current_stream(); never strict."""
    return _c_range_start(message, stream, domain, internal=True)


def _internal_range_end(range_id, domain="default"):
    if range_id:
        _c_range_end(range_id, domain, internal=True)


# ------------------------------------------------------------ Python side ---
def _is_stream(stream):
    from .streams import Stream
    return isinstance(stream, Stream)


def _valid_message(message, fn):
    if not message or not isinstance(message, str):
        py_warn(f"Invalid message for mstx.{fn} func. Please input valid message string.")
        return False
    return True


def _valid_domain(domain, fn, allow_empty=False):
    if (not allow_empty and not domain) or not isinstance(domain, str):
        py_warn(f"Invalid domain for mstx.{fn} func. Please input valid domain string.")
        return False
    return True


def _valid_stream(stream, fn):
    if stream and not _is_stream(stream):
        py_warn(f"Invalid stream for mstx.{fn} func. Please input valid stream.")
        return False
    return True


def _impl_mark(b):
    message = b["message"]
    stream = b.get("stream")
    domain = b.get("domain", "default")
    if _TRAIN.has_mstx_domain:
        if not _valid_message(message, "mark") or not _valid_domain(domain, "mark", allow_empty=True):
            return None
        if not _valid_stream(stream, "mark"):
            return None
    elif not message:
        return None  # C++ ignores an empty message (T2-T5 had no Python validation)
    return _c_mark(message, stream if stream else None, domain)


def _impl_mark_instance_bug(self_, b):
    # T2: ``def mark(self, message="")`` without @staticmethod: mstx.mark("x") binds "x" to self.
    diag("mstx_mark_instance_bug")
    return _impl_mark(b)


def _impl_range_start(b):
    message, stream = b["message"], b.get("stream")
    domain = b.get("domain", "default")
    if _TRAIN.has_mstx_domain:
        if not _valid_message(message, "range_start") or not _valid_domain(domain, "range_start"):
            return 0
    elif not message:
        py_warn("Invalid message for mstx.range_start func. Please input valid message string.")
        return 0
    if not _valid_stream(stream, "range_start"):
        return 0
    return _c_range_start(message, stream if stream else None, domain)


def _impl_range_end(b):
    range_id = b["range_id"]
    domain = b.get("domain", "default")
    if not isinstance(range_id, int):
        fn = "range_end" if _TRAIN.has_mstx_domain else "range_start"  # T3-T5 text says range_start
        py_warn(f"Invalid message for mstx.{fn} func. Please input return value from mstx.range_start.")
        return None
    if _TRAIN.has_mstx_domain and not _valid_domain(domain, "range_end"):
        return None
    return _c_range_end(range_id, domain)


def _impl_range_push(b):
    message, stream, domain = b["message"], b["stream"], b["domain"]
    if not _valid_message(message, "range_push") or not _valid_domain(domain, "range_push"):
        return -1
    if not _valid_stream(stream, "range_push"):
        return -1
    return _c_range_push(message, stream if stream else None, domain)


def _impl_range_pop(b):
    domain = b["domain"]
    if not _valid_domain(domain, "range_pop"):
        return -1
    return _c_range_pop(domain)


def _impl_mstx_range(b):
    message, stream = b["message"], b.get("stream")
    domain = b.get("domain", "default")

    def wrapper(func):
        @functools.wraps(func)
        def inner(*args, **kwargs):
            if _TRAIN.has_mstx_domain:
                range_id = mstx.range_start(message, stream, domain)
            else:
                range_id = mstx.range_start(message, stream)
            try:
                return func(*args, **kwargs)
            finally:
                if _TRAIN.has_mstx_domain:
                    mstx.range_end(range_id, domain)
                else:
                    mstx.range_end(range_id)
        return inner
    return wrapper


def _public(qualname, params, impl, default_ret=None, pass_first=False):
    fn = make_function(qualname, params, impl, module=_MOD, pass_first=pass_first)
    if _TRAIN.mstx_swallows:
        fn = mstx_no_exception_func(default_ret)(fn)
    return fn


class mstx:  # noqa: N801 - the real class name
    """Host-side mstx markers; see the module docstring."""


if _TRAIN.mstx_mark_instance_bug:
    mstx.mark = make_function("mstx.mark", "self, message=''", _impl_mark_instance_bug,
                              module=_MOD, pass_first=True)
elif _TRAIN.mstx_static_ranges:
    if _TRAIN.has_mstx_domain:
        mstx.mark = staticmethod(_public("mstx.mark", "message, stream=None, domain='default'", _impl_mark))
        mstx.range_start = staticmethod(_public(
            "mstx.range_start", "message, stream=None, domain='default'", _impl_range_start, 0))
        mstx.range_end = staticmethod(_public("mstx.range_end", "range_id, domain='default'", _impl_range_end))
        mstx.mstx_range = staticmethod(_public(
            "mstx.mstx_range", "message, stream=None, domain='default'", _impl_mstx_range))
    else:
        mstx.mark = staticmethod(_public("mstx.mark", "message=''", _impl_mark))
        mstx.range_start = staticmethod(_public("mstx.range_start", "message, stream=None",
                                                _impl_range_start, 0))
        mstx.range_end = staticmethod(_public("mstx.range_end", "range_id", _impl_range_end))
        mstx.mstx_range = staticmethod(_public("mstx.mstx_range", "message, stream=None", _impl_mstx_range))

if _TRAIN.has_mstx_push_pop:
    mstx.range_push = staticmethod(_public(
        "mstx.range_push", "message, stream=None, domain='default'", _impl_range_push, -1))
    mstx.range_pop = staticmethod(_public("mstx.range_pop", "domain='default'", _impl_range_pop, -1))


if _TRAIN.has_annotate:
    class annotate:  # noqa: N801 - the real class name
        """Context manager and decorator: an mstx range around a block or a function."""

        def _init(self, b):
            self.message = b["message"]
            self.stream = b["stream"]
            self.domain = b["domain"]
            self._range_id = 0

        def __enter__(self):
            self._range_id = mstx.range_start(self.message, self.stream, self.domain)
            return self

        def __exit__(self, exc_type, exc_val, exc_tb):
            mstx.range_end(self._range_id, self.domain)
            return False

        def __call__(self, func):
            message = self.message or func.__name__

            @functools.wraps(func)
            def inner(*args, **kwargs):
                range_id = mstx.range_start(message, self.stream, self.domain)
                try:
                    return func(*args, **kwargs)
                finally:
                    mstx.range_end(range_id, self.domain)
            return inner

    annotate.__init__ = make_function("annotate.__init__", "self, message='', stream=None, domain='default'",
                                      annotate._init, module=_MOD, pass_first=True)
    mstx.annotate = annotate
    __all__.append("annotate")
