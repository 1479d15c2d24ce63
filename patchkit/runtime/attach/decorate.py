"""In the job: a recipe's decorators (``at: on_exit``, a range around a method) put on a live function where
``apply``'s text has them, and taken off again.

Runs inside the process ``patchkit attach`` got into (see :mod:`patchkit.runtime.attach.agent`): standard library only.

A decorator cannot be added by swapping code: it is a call around the function.  The engine writes a decorating
point as the innermost decorator, right above the ``def`` and below the function's own decorators, so that an
applied file defines ``own(patchkit(f))``.  :func:`plan_wraps` finds where the job holds ``f`` and puts
``patchkit(f)`` there, which is the same object graph:

- the class's attribute (a module's, for a function) when it is ``f`` itself, or a ``staticmethod`` /
  ``classmethod`` made directly from it: it becomes ``patchkit(f)``, in a new staticmethod / classmethod;
- the one closure cell of the function's own decorators that holds ``f`` (verl's ``GPUMemoryLogger``,
  ``torch.no_grad()``, any ``functools.wraps`` decorator): it holds ``patchkit(f)``, so every reference to the
  decorated method, taken before the attach or not, calls it.

``f`` keeps its own code object (swapped too when the recipe has other points in it) and its closure, so
``super()`` and ``__class__`` work as they did.  Refused before anything changes: a nested function, a generator or
coroutine, a property's function, ``f`` kept by its decorators elsewhere than in one closure cell (a class-based
decorator's attribute, ``functools.lru_cache``), and a module-level function another module holds too
(``from m import f``: that name would go on calling ``f`` without the decorator, and the window never open).

The decorators are the request's text (never the job's files), compiled at their line of the instrumented text
and evaluated as a class body evaluates them: the class's names, then the module's, once ``_patchkit_runtime`` is
in the module.  Undone only where the place still holds what patchkit put; something that replaced it meanwhile
is left there, and said (:attr:`Wrap.replaced`).
"""

from __future__ import annotations

import sys
import types

from patchkit.runtime.attach.swap import DEPTH, SUSPENDABLE, FunctionType, Refused, find_live, holder, scope_name

PROPERTIES = (property,)


class Attribute:
    """A class's (or module's) attribute, read as defined (no descriptor called) and set back by name."""

    def __init__(self, owner, name):
        self.owner, self.name = owner, name

    def get(self):
        return vars(self.owner).get(self.name)

    def set(self, value):
        setattr(self.owner, self.name, value)


class Cell:
    """A closure cell of one of the function's own decorators."""

    def __init__(self, cell):
        self.cell = cell

    def get(self):
        try:
            return self.cell.cell_contents
        except ValueError:  # emptied meanwhile
            return None

    def set(self, value):
        self.cell.cell_contents = value


def cells_holding(obj, fn, depth=0, seen=None):
    """The closure cells, in the decorators from ``obj`` down, that hold ``fn`` itself."""
    seen = set() if seen is None else seen
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if type(obj) is not FunctionType or obj is fn or id(obj) in seen or depth > DEPTH:
        return []
    seen.add(id(obj))
    found = []
    for cell in obj.__closure__ or ():
        try:
            inner = cell.cell_contents
        except ValueError:
            continue
        found += [cell] if inner is fn else cells_holding(inner, fn, depth + 1, seen)
    return found


def held_elsewhere(module, fn):
    """The other modules whose namespace holds ``fn`` (``from m import f``, a package's re-export)."""
    others = []
    for name, other in list(sys.modules.items()):
        space = getattr(other, "__dict__", None) if isinstance(other, types.ModuleType) else None
        if other is module or not isinstance(space, dict):
            continue
        if any(value is fn for value in list(space.values())):
            others.append(name)
    return sorted(others)


def place_of(module, target, fn):
    """Where the job holds ``fn`` so that a call of the target reaches it: an :class:`Attribute` or a :class:`Cell`."""
    cls, method, _ = target
    scope = scope_name(target)
    held = holder(module, target)  # refuses a name that is not a class of the module
    owner = module if cls is None else vars(module)[cls]
    if held is fn or (type(held) in (staticmethod, classmethod) and held.__func__ is fn):
        if cls is None:
            others = held_elsewhere(module, fn)
            if others:
                raise Refused(f"{scope} is held by {', '.join(others[:3])} too (from {module.__name__} import "
                              f"{method}): calls through that name would not reach the decorator, so attach puts it on "
                              "the module's function only when no other module holds it; use `patchkit run` for it")
        return Attribute(owner, method)
    if isinstance(held, PROPERTIES) or "cached_property" in type(held).__name__:
        raise Refused(f"{scope} is a property's function: attach does not decorate it; use `patchkit run`, or a point "
                      "inside it")
    cells = cells_holding(held, fn)
    if len(cells) != 1:
        where = f"in {len(cells)} closure cells" if cells else "elsewhere than in a closure (a class-based " \
                                                                "decorator, functools.lru_cache, ...)"
        raise Refused(f"{scope}: its own decorators keep the function {where}; attach cannot put the recipe's "
                      "decorator under them; use `patchkit run`, or a point inside the method")
    return Cell(cells[0])


def compiled(decorators, filename, scope):
    """Each ``[line, text]`` of the request as an expression compiled at its line of the instrumented text."""
    codes = []
    for line, text in decorators:
        try:
            codes.append(compile("\n" * (int(line) - 1) + text, filename, "eval", dont_inherit=True))
        except (SyntaxError, ValueError, TypeError) as exc:
            raise Refused(f"{scope}: the recipe's decorator {text!r} does not compile here ({exc})") from None
    return codes


def plan_wraps(module, target, definitions, original):
    """The wrap one decorated target needs, checked (nothing changes here).  ``definitions``: for each definition
    of the name in the instrumented text, in the file's order, its patchkit decorators as ``[line, text]``."""
    target = tuple(target)
    scope = scope_name(target)
    if target[2]:
        raise Refused(f"{scope} is a nested function: each call of {target[1]} makes a new one, which attach cannot "
                      "decorate; use `patchkit run` for it")
    index, fn = find_live(module, target, original)
    if fn.__code__.co_flags & SUSPENDABLE:
        raise Refused(f"{scope} is a generator or coroutine: a decorator around it would see it created, not "
                      "finished; use `patchkit run` for it")
    if index >= len(definitions) or not definitions[index]:
        raise Refused(f"{scope}: the definition the job runs carries none of the recipe's decorators")
    place = place_of(module, target, fn)
    cls = vars(module)[target[0]] if target[0] else None
    return [Wrap(scope, fn, place, compiled(definitions[index], original.co_filename, scope), module, cls)]


class Wrap:
    """One function's place holding ``patchkit(f)`` while attached: the same face as :class:`.swap.Swap`."""

    def __init__(self, scope, fn, place, decorators, module, cls=None):
        self.scope, self.fn, self.place, self.decorators = scope, fn, place, decorators
        self.module, self.cls = module, cls
        self.held = place.get()  # what the place holds now: put back on undo
        self.put, self.functions, self.replaced = None, [], False

    def decorated(self):
        """``patchkit(f)``: the decorators evaluated, innermost first, as the class body would (its names first)."""
        space = vars(self.module)
        names = vars(self.cls) if self.cls is not None else space
        wrapped = self.fn
        for code in reversed(self.decorators):
            wrapped = eval(code, space, names)(wrapped)  # noqa: S307 - the hash-checked request's own text
        return type(self.held)(wrapped) if type(self.held) in (staticmethod, classmethod) else wrapped

    def apply(self):
        if self.place.get() is not self.held:
            raise Refused(f"{self.scope} changed in the job while attach was checking it; try again")
        self.put = self.decorated()
        self.place.set(self.put)
        self.functions = [self.fn]
        return 1

    def undo(self):
        """The original back, only where the place still holds what patchkit put; how many put back."""
        if self.put is None:
            return 0
        now = self.place.get()
        if now is self.put:
            self.place.set(self.held)
            return 1
        self.replaced = now is not self.held
        return 0

    def restored(self):
        return self.place.get() is self.held

    def installed(self):
        """Whether the place still holds what patchkit put (the recipe's decorators, which read its runtime)."""
        return self.put is not None and self.place.get() is self.put

    def counted(self):
        """The code objects whose calls :class:`.swap.Calls` counts: the function's, reached only through the
        decorators once they are in (unless the job took the function itself before)."""
        return (self.fn.__code__,)

    def codes(self):
        """The decorators' own code (their lambdas: a key or guard), which reads the module's names."""
        found, todo = [], list(self.decorators)
        while todo:
            code = todo.pop()
            found.append(code)
            todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        return tuple(found)
