"""attach.decorate: a recipe's decorator put where the job holds the function (the class's or module's attribute, a
staticmethod or classmethod, the closure cell of the function's own decorators), giving the object graph the applied
text gives (innermost, below the function's own decorators), taken off again only where the place still holds it; and
each shape attach refuses, with nothing changed; the same on each other CPython found here.  The end-to-end runs on
real CPU jobs are in test_attach_decorated_jobs.py."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import textwrap
import types

import pytest

import attach_helpers as helpers
from patchkit.runtime.attach.decorate import Attribute, Cell, cells_holding, held_elsewhere, plan_wraps
from patchkit.runtime.attach.swap import Refused

SOURCE = textwrap.dedent('''\
    import functools

    TRAIL = []


    def keep(func):
        def f(*args, **kwargs):
            TRAIL.append("own>")
            try:
                return func(*args, **kwargs)
            finally:
                TRAIL.append("own<")
        return f


    def wraps(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            return func(*args, **kwargs)
        return wrapper


    def shared(func):
        def f(*args, **kwargs):
            return func(*args, **kwargs)
        def g(*args, **kwargs):
            return func(*args, **kwargs)
        f.g = g
        return f


    def two_cells(func):
        first, second = func, func
        def f(*args, **kwargs):
            return first(*args, **kwargs) + 0 * second(*args, **kwargs)
        return f


    class Base:
        def plain(self, x):
            return x


    class A(Base):
        BATCH = 4

        def plain(self, x, n=BATCH):
            return super().plain(x) + n + (__class__ is A)

        @keep
        def kept(self, x):
            return x + 1

        @wraps
        def wrapped(self, x):
            return x + 2

        @staticmethod
        def static(x):
            return x + 3

        @classmethod
        def klass(cls, x):
            return x + 4

        @property
        def prop(self):
            return 5

        @functools.lru_cache(maxsize=None)
        def cached(self, x):
            return x + 6

        def gen(self):
            yield 1

        @two_cells
        def doubled(self, x):
            return x


    def free(x):
        return x + 7


    @keep
    def kept_free(x):
        return x + 8


    def outer(k):
        def inner(x):
            return x + k
        return inner
    ''')

PK = '_patchkit_runtime.on_exit("k")'


def runtime_double(mod):
    """What ``_patchkit_runtime.on_exit`` does, observable in the module's TRAIL: each call one way in and out."""
    def on_exit(key, guard=None):
        def decorate(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                mod.TRAIL.append("pk>")
                try:
                    return fn(*args, **kwargs)
                finally:
                    if guard is None or guard(*args, **kwargs):
                        mod.TRAIL.append(f"pk<{key}")
            return wrapper
        return decorate
    return types.SimpleNamespace(on_exit=on_exit)


def load(tmp_path, text=SOURCE, name="deco_mod"):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    mod._patchkit_runtime = runtime_double(mod)  # as the applied file's header binds it, before its classes
    exec(compile(text, str(path), "exec", dont_inherit=True), vars(mod))
    return mod


@pytest.fixture
def module(tmp_path):
    mod = load(tmp_path)
    sys.modules[mod.__name__] = mod
    yield mod
    sys.modules.pop(mod.__name__, None)


def original_of(mod):
    return compile(SOURCE, mod.__file__, "exec", dont_inherit=True)


def line_of(name):
    return next(i for i, ln in enumerate(SOURCE.splitlines(), 1) if f"def {name}(" in ln)


def wrap_of(mod, target, text=PK):
    (wrap,) = plan_wraps(mod, target, [[[line_of(target[1]), text]]], original_of(mod))
    return wrap


CASES = {  # name -> (target, a call, the place, what the class or module holds under the name)
    "plain": (("A", "plain", None), lambda m: m.A().plain(1), Attribute),
    "kept": (("A", "kept", None), lambda m: m.A().kept(1), Cell),
    "wrapped": (("A", "wrapped", None), lambda m: m.A().wrapped(1), Cell),
    "static": (("A", "static", None), lambda m: m.A.static(1), Attribute),
    "klass": (("A", "klass", None), lambda m: m.A().klass(1), Attribute),
    "free": ((None, "free", None), lambda m: m.free(1), Attribute),
    "kept_free": ((None, "kept_free", None), lambda m: m.kept_free(1), Cell),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_decorator_goes_where_the_function_is_held_and_comes_off_again(module, name):
    target, call, place = CASES[name]
    owner = module if target[0] is None else module.A
    held = vars(owner)[target[1]]
    before = call(module)
    wrap = wrap_of(module, target)
    code = wrap.fn.__code__
    assert isinstance(wrap.place, place)
    assert wrap.apply() == 1 and wrap.functions == [wrap.fn]
    del module.TRAIL[:]
    assert call(module) == before
    assert [t for t in module.TRAIL if t.startswith("pk")] == ["pk>", "pk<k"]  # one way in, one out, per call
    assert (vars(owner)[target[1]] is held) == (place is Cell)  # a cell changes inside the decorators it holds
    assert wrap.undo() == 1 and wrap.restored() and not wrap.replaced
    assert vars(owner)[target[1]] is held and wrap.fn.__code__ is code
    del module.TRAIL[:]
    assert call(module) == before and not [t for t in module.TRAIL if t.startswith("pk")]
    if type(held) in (staticmethod, classmethod):
        assert type(held).__name__ in repr(type(wrap.place.get()))


def test_the_wrapped_function_keeps_super_its_class_cell_and_the_class_s_names_in_the_lambdas(module):
    wrap = wrap_of(module, ("A", "plain", None), '_patchkit_runtime.on_exit("k", lambda self, x, n=BATCH: n == 4)')
    wrap.apply()
    assert module.A().plain(1) == 6 and module.TRAIL == ["pk>", "pk<k"]  # BATCH read as the class body reads it
    wrap.undo()


def test_under_the_function_s_own_decorators_as_the_applied_text_has_it(module, tmp_path):
    """The applied text (the engine's decorator right above the def) and attach give the same calls, in order;
    a bound method taken before the attach reaches the decorator too."""
    applied_text = SOURCE.replace("    @keep\n    def kept(", f"    @keep\n    @{PK}  # patchkit:k\n    def kept(")
    applied = load(tmp_path, applied_text, name="deco_applied")
    applied.A().kept(1)
    bound = module.A().kept
    wrap = wrap_of(module, ("A", "kept", None))
    wrap.apply()
    bound(1)
    assert module.TRAIL == applied.TRAIL == ["own>", "pk>", "pk<k", "own<"]
    wrap.undo()


def test_two_decorators_of_the_recipe_nest_as_written(module):
    (wrap,) = plan_wraps(module, ("A", "plain", None), [[[1, '_patchkit_runtime.on_exit("outer")'],
                                                         [2, '_patchkit_runtime.on_exit("inner")']]],
                         original_of(module))
    wrap.apply()
    module.A().plain(1)
    assert module.TRAIL == ["pk>", "pk>", "pk<inner", "pk<outer"]
    wrap.undo()


def test_something_put_there_meanwhile_is_left_and_said(module):
    wrap = wrap_of(module, ("A", "plain", None))
    wrap.apply()
    other = lambda self, x: -1  # noqa: E731
    module.A.plain = other
    assert wrap.undo() == 0 and wrap.replaced and not wrap.restored() and vars(module.A)["plain"] is other


def test_a_place_changed_between_the_check_and_the_change_is_refused(module):
    wrap = wrap_of(module, ("A", "plain", None))
    held = vars(module.A)["plain"]
    module.A.plain = staticmethod(held)
    with pytest.raises(Refused, match="changed in the job while attach was checking"):
        wrap.apply()
    assert wrap.undo() == 0 and not wrap.replaced


@pytest.mark.parametrize("target,says", [
    (("A", "prop", None), "a property's function"),
    (("A", "cached", None), "elsewhere than in a closure"),
    (("A", "gen", None), "generator or coroutine"),
    (("A", "doubled", None), "in 2 closure cells"),
    ((None, "outer", "inner"), "nested function"),
    (("A", "nothing", None), "the file has no such function"),
])
def test_each_shape_attach_cannot_decorate_is_refused_with_nothing_changed(module, target, says):
    before = dict(vars(module.A)), dict(vars(module))
    with pytest.raises(Refused, match=says):
        plan_wraps(module, target, [[[1, PK]]], original_of(module))
    assert dict(vars(module.A)) == before[0] and dict(vars(module)) == before[1]


def test_a_module_function_another_module_holds_too_is_refused(module):
    other = types.ModuleType("deco_importer")
    other.free = module.free  # from deco_mod import free
    sys.modules[other.__name__] = other
    try:
        assert held_elsewhere(module, module.free) == ["deco_importer"]
        with pytest.raises(Refused, match="held by deco_importer too"):
            wrap_of(module, (None, "free", None))
        wrap_of(module, (None, "kept_free", None))  # the decorators' cell: every holder of the wrapper reaches it
    finally:
        del sys.modules[other.__name__]


def test_the_definition_the_job_runs_must_carry_the_decorator_and_its_text_must_compile(module):
    with pytest.raises(Refused, match="carries none of the recipe's decorators"):
        plan_wraps(module, ("A", "plain", None), [[]], original_of(module))
    with pytest.raises(Refused, match="does not compile here"):
        wrap_of(module, ("A", "plain", None), "_patchkit_runtime.on_exit(")


def test_cells_are_found_down_the_decorators(module):
    inner = vars(module.A)["kept"].__closure__[0].cell_contents
    assert cells_holding(vars(module.A)["kept"], inner)[0].cell_contents is inner
    assert cells_holding(vars(module.A)["static"], vars(module.A)["static"].__func__) == []
    both = module.shared(module.free)
    assert len(cells_holding(both, module.free)) == 1  # f and g share the cell of func
    nested = module.keep(module.keep(module.free))
    assert len(cells_holding(nested, module.free)) == 1


CHILD = """\
import json, sys, types
sys.path.insert(0, sys.argv[2])
from patchkit.runtime.attach.decorate import plan_wraps
source = open(sys.argv[1]).read()
mod = types.ModuleType("deco_mod")
mod.__file__ = sys.argv[1]
code = compile(source, sys.argv[1], "exec", dont_inherit=True)
exec(code, vars(mod))
def on_exit(key, guard=None):
    def decorate(fn):
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            finally:
                mod.TRAIL.append(key)
        return wrapper
    return decorate
mod._patchkit_runtime = types.SimpleNamespace(on_exit=on_exit)
held = dict(vars(mod.A))
names = ("plain", "kept", "static", "klass")
wraps = [plan_wraps(mod, ("A", n, None), [[[1, '_patchkit_runtime.on_exit(%r)' % n]]], code)[0] for n in names]
for w in wraps:
    w.apply()
got = [mod.A().plain(1), mod.A().kept(1), mod.A.static(1), mod.A().klass(1)]
for w in wraps:
    w.undo()
print(json.dumps({"got": got, "trail": [t for t in mod.TRAIL if t in names],
                  "back": all(vars(mod.A)[n] is held[n] for n in held)}))
"""


@pytest.mark.parametrize("version", helpers.OTHER_VERSIONS)
def test_the_decorator_goes_on_and_off_on_each_other_cpython(tmp_path, version):
    python = helpers.other_pythons().get(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine (pyenv's, or python{version} on PATH)")
    (tmp_path / "deco_mod.py").write_text(SOURCE)
    done = subprocess.run([python, "-c", CHILD, str(tmp_path / "deco_mod.py"), str(helpers.REPO)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {"got": [6, 2, 4, 5], "trail": ["plain", "kept", "static", "klass"],
                                       "back": True}
