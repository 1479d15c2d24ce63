"""In the job: a recipe's target functions found alive, their instrumented code checked, swapped in, swapped back.

Runs inside the process ``patchkit attach`` got into (see :mod:`patchkit.runtime.attach.agent`): standard library only.

A target is named as the recipe names it: ``(class, method, nested)``, the class None for a module-level
function and ``nested`` a function defined inside it (a closure).  The module's file is compiled twice here,
as it is on disk (its original text) and as the engine instrumented it, each under the file's own name.  The
live function is the one whose code object *equals* the freshly compiled original (CPython compares the
bytecode, constants, names and line numbers): that is how it is found behind a decorator that keeps it only
in a closure (verl's ``GPUMemoryLogger``) or behind ``functools.wraps`` (``__wrapped__``), and how a file
changed on disk since the job imported it is told apart (no live function equals it).

A :class:`Swap` replaces one code object by its instrumented twin in the functions that use it: those found
from the recipe's names (the module's or class's attribute, a ``staticmethod`` / ``classmethod``'s function,
``__wrapped__`` and the closure cells of the decorators there, :data:`DEPTH` deep), and, as an addition, those
``gc.get_referrers`` finds (each closure made from a nested ``def`` has its own function object).  The names come
first because ``gc.get_referrers`` is not reliable: on free-threaded CPython 3.13, once a second thread has run,
it no longer returns the functions made before it.  The swap keeps its own record of every function whose code it
replaced, and puts the original back in exactly those, and in every function ``gc.get_referrers`` then finds with
the instrumented code (closures made meanwhile); :meth:`Swap.installed` says whether any of them still has it,
so that ``_patchkit_runtime``, which that code reads, stays in the module until none has.  A call in progress
keeps the code it started with: the swap takes effect at the next call.

:class:`Calls` counts the calls of the instrumented code while the window waits for its point (``sys.monitoring``,
3.12+), so that attach can tell "called N times, the point not reached" from "not called again".
"""

from __future__ import annotations

import gc
import sys
import time
import types

from patchkit.runtime.attach.protocol import Reason

FunctionType = types.FunctionType
CodeType = types.CodeType
SUSPENDABLE = 0x20 | 0x80 | 0x100 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR
DEPTH = 4  # decorators wrapped in decorators: how deep a closure is searched for the function


class Refused(Exception):
    """Why nothing may change in the job (the message says it and what to do; ``reason``, a
    :class:`~patchkit.runtime.attach.protocol.Reason`, says it to the attaching command)."""

    def __init__(self, message, reason=Reason.OTHER):
        super().__init__(message)
        self.reason = reason


def scope_name(target):
    cls, method, nested = target
    return ".".join(n for n in (cls, method, nested) if n)


def codes_named(code, name):
    """The code objects directly inside ``code`` (its constants) named ``name``, in the order they appear."""
    return [c for c in code.co_consts if isinstance(c, CodeType) and c.co_name == name]


def code_at(module_code, path):
    """The code objects at ``path`` (names from the module down), in source order; [] when there is none."""
    level = [module_code]
    for name in path:
        level = [c for code in level for c in codes_named(code, name)]
    return level


def functions_in(obj, depth=0, seen=None):
    """Every function reachable from a class attribute: itself, a staticmethod's, classmethod's or property's
    function, ``__wrapped__`` (functools.wraps), and the functions a decorator keeps in its closure."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth > DEPTH:
        return []
    seen.add(id(obj))
    found = []
    if isinstance(obj, (staticmethod, classmethod)):
        return functions_in(obj.__func__, depth, seen)
    if isinstance(obj, property):
        for part in (obj.fget, obj.fset, obj.fdel):
            if part is not None:
                found += functions_in(part, depth, seen)
        return found
    if isinstance(obj, FunctionType):
        found.append(obj)
        for cell in obj.__closure__ or ():
            try:
                inner = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            found += functions_in(inner, depth + 1, seen)
    try:  # functools.wraps (a function, or lru_cache's wrapper); never a __getattr__ of someone else's object
        wrapped = object.__getattribute__(obj, "__dict__").get("__wrapped__")
    except (AttributeError, TypeError):
        wrapped = None
    if wrapped is not None:
        found += functions_in(wrapped, depth + 1, seen)
    return found


def holder(module, target):
    """The object the module (or its class) holds under the target's name, as defined (no descriptor called)."""
    cls, method, _ = target
    where = module.__name__
    if cls is None:
        space = vars(module)
    else:
        klass = vars(module).get(cls)
        if not isinstance(klass, type):
            raise Refused(f"{where}.{cls} is not a class in the job (it is {type(klass).__name__}); "
                          "patchkit attaches only to the class the file defines")
        space, where = vars(klass), f"{where}.{cls}"
    if method not in space:
        raise Refused(f"{where} has no {method} in the job")
    return space[method]


def live_function(module, target, fresh):
    """The job's function for the (outer) target whose code equals ``fresh``, the original just compiled."""
    scope = scope_name(target[:2] + (None,))
    candidates = functions_in(holder(module, target))
    for fn in candidates:
        if fn.__code__ == fresh:
            return fn
    named = [fn for fn in candidates if fn.__code__.co_name == fresh.co_name]
    if named:
        raise Refused(f"{scope} in the job is not the code of {fresh.co_filename} as it is on disk: the file "
                      "changed since the job imported it, so its instrumented text would not be the job's code")
    raise Refused(f"cannot find the function {scope} behind its decorators (no __wrapped__, nor a closure "
                  "holding it); attach cannot reach it")


def pick(codes, index, what):
    if index >= len(codes):
        raise Refused(f"the instrumented text has no {what}")
    return codes[index]


def outer_path(target):
    cls, method, _ = target
    return (cls, method) if cls else (method,)


def find_live(module, target, original):
    """The job's (outer) function of ``target`` and which definition of the file it is (a name defined twice: if/else,
    a property's setter), the index into :func:`code_at`'s list.  ``original``: the file's module code."""
    fresh = code_at(original, outer_path(target))
    if not fresh:
        raise Refused(f"{scope_name(target)}: the file has no such function")
    for index, candidate in enumerate(fresh):
        try:
            return index, live_function(module, target, candidate)
        except Refused:
            if index == len(fresh) - 1:
                raise
    raise AssertionError("unreachable")


def plan_swaps(module, target, original, instrumented):
    """The swaps one target needs: its own code, and for a nested function its outer function's too (so closures
    made later are instrumented as well).  ``original`` / ``instrumented``: the two compiled module codes."""
    _, method, nested = target
    index, fn = find_live(module, target, original)
    new_outer = pick(code_at(instrumented, outer_path(target)), index, scope_name(target[:2] + (None,)))
    named = [f for f in functions_in(holder(module, target)) if f.__code__ is fn.__code__]
    swaps = [Swap(scope_name(target[:2] + (None,)), fn.__code__, new_outer, named)]
    if nested:
        olds = codes_named(fn.__code__, nested)
        news = codes_named(new_outer, nested)
        if not olds or len(olds) != len(news):
            raise Refused(f"{scope_name(target)}: no function {nested} inside {method} in the job")
        swaps += [Swap(scope_name(target), old, new) for old, new in zip(olds, news)]
    for swap in swaps:
        swap.check()
    return swaps


class Swap:
    """One code object and its instrumented twin, in every function that uses it (see the module's docstring)."""

    def __init__(self, scope, old, new, named=()):
        self.scope, self.old, self.new = scope, old, new
        self.named = list(named)  # the functions found from the recipe's names
        self.functions = []  # each function whose code this swap replaced, in the order it did
        self.since = []  # the functions found with the instrumented code at the undo: closures made meanwhile

    def check(self):
        old, new = self.old, self.new
        if old.co_freevars != new.co_freevars:
            raise Refused(f"{self.scope}: its instrumented code reads the free variables {new.co_freevars}, the "
                          f"function in the job has {old.co_freevars}; a code object can only replace one with the "
                          "same free variables")
        if old.co_flags & SUSPENDABLE or new.co_flags & SUSPENDABLE:
            raise Refused(f"{self.scope} is a generator or coroutine: a suspended one would keep the instrumented "
                          "code after detach; use `patchkit run` for it")

    def users(self, code, known=()):
        """``known`` and the functions ``gc.get_referrers`` finds, once each, those whose code is ``code``."""
        seen, found = set(), []
        for fn in [*known, *gc.get_referrers(code)]:
            if type(fn) is FunctionType and id(fn) not in seen and fn.__code__ is code:
                seen.add(id(fn))
                found.append(fn)
        return found

    def apply(self):
        """Swap in; returns how many functions now run the instrumented code (each one recorded as it is done)."""
        for fn in self.users(self.old, self.named):
            fn.__code__ = self.new
            self.functions.append(fn)
        return len(self.functions)

    def recorded(self):
        return self.functions + self.since

    def undo(self):
        """The original back in every function recorded, and in any other found using the instrumented code
        (closures made meanwhile, recorded from now on); how many were put back."""
        ids = {id(fn) for fn in self.recorded()}
        self.since += [fn for fn in self.users(self.new) if id(fn) not in ids]
        back = 0
        for fn in self.recorded():
            if fn.__code__ is self.new:
                fn.__code__ = self.old
                back += 1
        return back

    def installed(self):
        """Whether a function recorded, or found, still has the instrumented code."""
        return any(fn.__code__ is self.new for fn in self.recorded()) or bool(self.users(self.new))

    def restored(self):
        """True when no function runs the instrumented code any more and each one swapped has the original."""
        return not self.installed() and all(fn.__code__ is self.old for fn in self.functions)

    def codes(self):
        """The code objects a frame may still be running after :meth:`undo` (the name ``_patchkit_runtime`` stays
        in the module while one does)."""
        return (self.new,)

    def counted(self):
        """The code objects whose calls :class:`Calls` counts: the instrumented one."""
        return (self.new,)


class Calls:
    """How many times the instrumented code was entered, counted with ``sys.monitoring`` (3.12+): a local
    ``PY_START`` event on those code objects only, so the job's other functions run as before, and a tool id of
    its own (3 or 4, the ones no tool claims by convention).  :attr:`count` stays None where it cannot count
    (3.10, 3.11, both ids taken)."""

    NAME, TOOLS = "patchkit attach", (4, 3)

    def __init__(self):
        self.tool, self.codes, self.count = None, [], None

    def start(self, codes):
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is None or self.tool is not None:
            return
        for tool in self.TOOLS:
            try:
                monitoring.use_tool_id(tool, self.NAME)
            except ValueError:  # another tool has it
                continue
            self.tool, self.count = tool, 0
            break
        else:
            return
        monitoring.register_callback(self.tool, monitoring.events.PY_START, self.entered)
        for code in codes:
            if all(code is not c for c in self.codes):
                monitoring.set_local_events(self.tool, code, monitoring.events.PY_START)
                self.codes.append(code)

    def entered(self, code, offset):
        self.count += 1  # another thread's call may be lost on a free-threaded build: a count, not a ledger

    def stop(self):
        """Counting stops (the window opened, or the code went back); :attr:`count` keeps its value.  Never raises."""
        if self.tool is None:
            return
        monitoring, tool, self.tool = sys.monitoring, self.tool, None
        try:
            for code in self.codes:
                monitoring.set_local_events(tool, code, 0)
            monitoring.register_callback(tool, monitoring.events.PY_START, None)
        finally:
            self.codes = []
            monitoring.free_tool_id(tool)


def put_back(swaps, wait, poll):
    """Each swap undone; then, while a frame of any thread runs their instrumented code (``wait`` seconds at most),
    waited for, and each undone again (closures such a frame made).  What of the recipe's code is still in the job,
    as short texts: the scopes whose functions have it, a call running it; [] when nothing is."""
    codes = [c for s in swaps for c in s.codes()]
    for swap in reversed(swaps):
        swap.undo()
    end = time.monotonic() + wait
    while in_flight(codes, sys._current_frames()) and time.monotonic() < end:
        time.sleep(poll)
    for swap in reversed(swaps):
        swap.undo()
    left = sorted({s.scope for s in swaps if s.installed()})
    return left + (["a call still running the recipe's code"] if in_flight(codes, sys._current_frames()) else [])


def in_flight(codes, frames):
    """Whether a frame of any thread is running one of ``codes`` (``frames``: ``sys._current_frames()``)."""
    wanted = {id(c) for c in codes}
    for frame in frames.values():
        while frame is not None:
            if id(frame.f_code) in wanted:
                return True
            frame = frame.f_back
    return False
