"""Build public callables from per-train parameter lists.

The real signatures are reproduced as real Python functions (compiled from a
small source template), so ``inspect.signature`` and the ``TypeError`` raised
by CPython for a bad keyword, a missing argument or a positional call are the
same as torch_npu's.  The generated body records the call and forwards the
bound arguments, as a dict, to the implementation.
"""

from __future__ import annotations

import ast
import functools
import inspect
import threading
import time

from .log import pop_api, push_api
from .recorder import CallRecord, recorder


def _enter(api, bound):
    recorder.raise_pending_strict()
    recorder.calls.append(CallRecord(api, dict(bound), time.time_ns(), threading.current_thread().name))
    push_api(api)


def _param_names(params):
    args = ast.parse(f"def _f({params}): pass").body[0].args
    names = [a.arg for a in args.posonlyargs + args.args]
    if args.vararg:
        names.append(args.vararg.arg)
    names += [a.arg for a in args.kwonlyargs]
    if args.kwarg:
        names.append(args.kwarg.arg)
    return names


def make_function(qualname, params, impl, *, module, namespace=None, doc=None, pass_first=False):
    """Compile ``def <name>(<params>)`` that records the call and runs ``impl``.

    ``impl`` receives ``(first, bound)`` when ``pass_first`` (self/cls), else ``(bound)``.
    ``namespace`` supplies the names used in default expressions.
    """
    name = qualname.rsplit(".", 1)[-1]
    names = _param_names(params)
    first = names.pop(0) if pass_first else None
    bound = "{" + ", ".join(f"{n!r}: {n}" for n in names) + "}"
    call = f"__impl__({first}, __b__)" if first else "__impl__(__b__)"
    src = (f"def {name}({params}):\n"
           f"    __b__ = {bound}\n"
           f"    __enter__({qualname!r}, __b__)\n"
           f"    try:\n"
           f"        return {call}\n"
           f"    finally:\n"
           f"        __leave__()\n")
    glb = dict(namespace or {})
    glb.update(__impl__=impl, __enter__=_enter, __leave__=pop_api, __name__=module)
    exec(compile(src, f"<torch_npu double {module}.{qualname}>", "exec"), glb)  # noqa: S102
    fn = glb[name]
    fn.__qualname__ = qualname
    fn.__module__ = module
    fn.__doc__ = doc
    if hasattr(fn.__code__, "co_qualname"):  # Python 3.11+: TypeError texts use it
        fn.__code__ = fn.__code__.replace(co_qualname=qualname)
    return fn


def recorded(api):
    """Decorator for hand-written methods: record the call and attribute warnings to ``api``."""
    def decorator(func):
        sig = inspect.signature(func)
        has_self = next(iter(sig.parameters), None) in ("self", "cls")

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            try:
                ba = sig.bind(*args, **kwargs)
                bound = dict(ba.arguments)
                if has_self:
                    bound.pop(next(iter(sig.parameters)), None)
            except TypeError:
                bound = {"args": args[1:] if has_self else args, "kwargs": kwargs}
            _enter(api, bound)
            try:
                return func(*args, **kwargs)
            finally:
                pop_api()
        wrapper.__qualname__ = api
        return wrapper
    return decorator
