"""attach.swap: the live function found behind its decorators by its code, the instrumented twin swapped in every
function that uses the code (closures included) and swapped back, from the names and the swap's own record where
``gc.get_referrers`` finds nothing (free-threaded 3.13), what is still in the job said, the calls counted, and the
refusals that keep the job as it was."""

from __future__ import annotations

import functools
import sys
import textwrap
import threading
import types

import pytest

from patchkit.runtime.attach import swap as swap_module
from patchkit.runtime.attach.swap import (Calls, Refused, Swap, code_at, find_live, functions_in, in_flight, plan_swaps,
                                  put_back, scope_name)

SOURCE = textwrap.dedent('''\
    import functools

    def keep_in_closure(func):
        def f(*args, **kwargs):
            return func(*args, **kwargs)
        return f

    def wraps(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            return func(*args, **kwargs)
        return wrapper

    class A:
        @keep_in_closure
        def hidden(self, x):
            return x + 1

        @wraps
        def wrapped(self, x):
            return x + 2

        @staticmethod
        def static(x):
            return x + 3

        def uses_super(self):
            return super().__repr__()

    def outer(k):
        def inner(x):
            return x + k
        return inner

    def gen():
        yield 1
    ''')

INSTRUMENTED = SOURCE.replace("return x + 1", "MARK.append('hidden')\n        return x + 1") \
    .replace("return x + 2", "MARK.append('wrapped')\n        return x + 2") \
    .replace("return x + 3", "MARK.append('static')\n        return x + 3") \
    .replace("return x + k", "MARK.append('inner')\n        return x + k") \
    .replace("return super().__repr__()", "MARK.append('super')\n        return super().__repr__()")


@pytest.fixture
def module(tmp_path):
    path = tmp_path / "target_mod.py"
    path.write_text(SOURCE)
    mod = types.ModuleType("target_mod")
    mod.__file__ = str(path)
    exec(compile(SOURCE, str(path), "exec", dont_inherit=True), vars(mod))
    mod.MARK = []
    return mod


def _codes(mod):
    path = mod.__file__
    return (compile(SOURCE, path, "exec", dont_inherit=True), compile(INSTRUMENTED, path, "exec", dont_inherit=True))


def test_code_at_walks_the_names_from_the_module_down(module):
    original, _ = _codes(module)
    (hidden,) = code_at(original, ("A", "hidden"))
    assert hidden.co_name == "hidden" and code_at(original, ("A", "nope")) == []
    (inner,) = code_at(original, ("outer", "inner"))
    assert inner.co_freevars == ("k",)
    assert scope_name(("A", "hidden", None)) == "A.hidden" and scope_name((None, "outer", "inner")) == "outer.inner"


def test_functions_are_found_behind_a_closure_wraps_and_staticmethod(module):
    found = functions_in(vars(module.A)["hidden"])
    assert [f.__name__ for f in found] == ["f", "hidden"]  # the wrapper, then the function in its closure
    assert [f.__code__.co_name for f in functions_in(vars(module.A)["wrapped"])] == ["wrapper", "wrapped"]
    assert [f.__name__ for f in functions_in(vars(module.A)["static"])] == ["static"]
    assert functions_in(42) == [] and functions_in(property(lambda s: 1))[0].__name__ == "<lambda>"


@pytest.mark.parametrize("name,mark,call", [
    ("hidden", "hidden", lambda m: m.A().hidden(1)),
    ("wrapped", "wrapped", lambda m: m.A().wrapped(1)),
    ("static", "static", lambda m: m.A.static(1)),
    ("uses_super", "super", lambda m: m.A().uses_super()[:20]),
])
def test_a_method_is_swapped_in_and_back_and_keeps_its_original_code_object(module, name, mark, call):
    original, instrumented = _codes(module)
    before = call(module)
    swaps = plan_swaps(module, ("A", name, None), original, instrumented)
    olds = [s.old for s in swaps]
    assert [s.apply() for s in swaps] == [1]
    assert call(module) == before and module.MARK == [mark]
    assert [s.undo() for s in swaps] == [1]
    call(module)
    assert module.MARK == [mark] and all(s.restored() for s in swaps)
    assert [s.old for s in swaps] == olds


def test_a_closure_made_before_and_one_made_during_the_swap_both_go_back(module):
    original, instrumented = _codes(module)
    made_before = module.outer(10)
    swaps = plan_swaps(module, (None, "outer", "inner"), original, instrumented)
    assert [s.scope for s in swaps] == ["outer", "outer.inner"]
    counts = [s.apply() for s in swaps]
    assert counts == [1, 1]  # outer itself, and the closure that exists
    made_during = module.outer(20)
    assert made_before(1) == 11 and made_during(1) == 21 and module.MARK == ["inner", "inner"]
    assert [s.undo() for s in swaps] == [1, 2]  # the closure made meanwhile goes back too
    assert made_before(1) == 11 and made_during(1) == 21 and module.MARK == ["inner", "inner"]
    assert made_before.__code__ is made_during.__code__ is swaps[1].old


def test_a_function_changed_on_disk_since_import_is_refused(module):
    path = module.__file__
    changed = SOURCE.replace("return x + 1", "return x + 100")
    with pytest.raises(Refused, match="changed since the job imported it"):
        plan_swaps(module, ("A", "hidden", None), compile(changed, path, "exec"), compile(changed, path, "exec"))


def test_free_variables_that_differ_are_refused_before_anything_changes(module):
    original, _ = _codes(module)
    other = compile(SOURCE.replace("return x + k", "return x + k + len(MARK) + j"), module.__file__, "exec")
    other = compile(SOURCE.replace("def outer(k):", "def outer(k, j=0):").replace("return x + k", "return x + k + j"),
                    module.__file__, "exec")
    inner = module.outer(1)
    with pytest.raises(Refused, match="free variables"):
        plan_swaps(module, (None, "outer", "inner"), original, other)
    assert inner(1) == 2 and module.MARK == []


def test_generators_and_missing_names_are_refused(module):
    original, instrumented = _codes(module)
    with pytest.raises(Refused, match="generator"):
        plan_swaps(module, (None, "gen", None), original, instrumented)
    with pytest.raises(Refused, match="the file has no such function"):
        plan_swaps(module, ("A", "nope", None), original, instrumented)
    module.A = 3
    with pytest.raises(Refused, match="is not a class"):
        plan_swaps(module, ("A", "hidden", None), original, instrumented)


def test_a_function_no_decorator_lets_reach_is_said(module):
    original, instrumented = _codes(module)

    class Opaque:
        def __init__(self, fn):
            self._hidden = [fn]

    module.A.hidden = Opaque(vars(module.A)["hidden"])
    with pytest.raises(Refused, match="behind its decorators"):
        plan_swaps(module, ("A", "hidden", None), original, instrumented)


def test_in_flight_sees_a_frame_of_another_thread_running_the_code():
    started, release = threading.Event(), threading.Event()

    def busy():
        started.set()
        release.wait(10)

    thread = threading.Thread(target=busy)
    thread.start()
    started.wait(10)
    try:
        assert in_flight([busy.__code__], sys._current_frames())
        assert not in_flight([test_in_flight_sees_a_frame_of_another_thread_running_the_code.__code__.replace()],
                             sys._current_frames())
    finally:
        release.set()
        thread.join()


def test_swap_checks_generators_on_either_side():
    def plain():
        return 1

    def gen():
        yield 1

    with pytest.raises(Refused, match="generator"):
        Swap("x", plain.__code__, gen.__code__.replace(co_freevars=())).check()
    Swap("x", plain.__code__, plain.__code__).check()
    assert functools  # the module under test imports nothing of this test's own


def test_find_live_says_which_definition_of_a_name_the_job_runs(tmp_path):
    """A name defined twice (if/else): the live function is the second one, and its index points at the second
    definition of the instrumented text too (attach.decorate picks that definition's decorators by it)."""
    text = "import os\nif os.sep == '?':\n    def pick():\n        return 1\nelse:\n    def pick():\n        return 2\n"
    path = tmp_path / "twice.py"
    path.write_text(text)
    mod = types.ModuleType("twice")
    mod.__file__ = str(path)
    original = compile(text, str(path), "exec", dont_inherit=True)
    exec(original, vars(mod))
    index, fn = find_live(mod, (None, "pick", None), original)
    assert index == 1 and fn is mod.pick and len(code_at(original, ("pick",))) == 2
    with pytest.raises(Refused, match="the file has no such function"):
        find_live(mod, (None, "nowhere", None), original)


@pytest.mark.parametrize("target,call", [
    (("A", "hidden", None), lambda m: m.A().hidden(1)),
    (("A", "wrapped", None), lambda m: m.A().wrapped(1)),
    (("A", "static", None), lambda m: m.A.static(1)),
    ((None, "outer", None), lambda m: m.outer(1)(1)),
])
def test_without_gc_s_help_the_names_find_the_function_and_the_record_puts_it_back(module, monkeypatch, target, call):
    """As on free-threaded 3.13 once a second thread has run: ``gc.get_referrers`` returns none of the functions made
    before it (tests/test_attach_interpreters.py shows it there)."""
    original, instrumented = _codes(module)
    before = call(module)
    monkeypatch.setattr(swap_module.gc, "get_referrers", lambda *objects: [])
    (swap,) = plan_swaps(module, target, original, instrumented)
    assert swap.apply() == 1 and swap.installed() and not swap.restored()
    assert call(module) == before and len(module.MARK) == 1  # (outer's: the closure it made has the marked code)
    assert swap.undo() == 1 and not swap.installed() and swap.restored()
    call(module)
    assert len(module.MARK) == 1 and swap.functions[0].__code__ is swap.old


def test_a_closure_made_meanwhile_is_recorded_at_the_undo_and_checked_after(module):
    original, instrumented = _codes(module)
    outer, inner = plan_swaps(module, (None, "outer", "inner"), original, instrumented)
    outer.apply(), inner.apply()
    made = module.outer(5)
    assert inner.undo() == 1 and inner.since == [made] and made.__code__ is inner.old
    made.__code__ = inner.new  # put in again behind its back: installed, not restored, until the next undo
    assert inner.installed() and not inner.restored()
    assert put_back([outer, inner], 0, 0.01) == [] and inner.restored() and outer.restored()


def test_put_back_waits_for_a_call_running_the_recipe_s_code_and_says_it_when_it_does_not_end(module):
    original, instrumented = _codes(module)
    (swap,) = plan_swaps(module, ("A", "hidden", None), original, instrumented)
    swap.apply()
    started, release = threading.Event(), threading.Event()
    module.MARK = type("Blocking", (list,), {"append": lambda self, x: (started.set(), release.wait(10))})()
    thread = threading.Thread(target=module.A().hidden, args=(1,))
    thread.start()
    started.wait(10)
    try:
        assert put_back([swap], 0.2, 0.05) == ["a call still running the recipe's code"] and swap.restored()
    finally:
        release.set()
        thread.join(10)
    assert put_back([swap], 0.2, 0.05) == []


def test_calls_are_counted_where_sys_monitoring_is_and_said_unknown_where_not(module):
    original, instrumented = _codes(module)
    (swap,) = plan_swaps(module, ("A", "hidden", None), original, instrumented)
    swap.apply()
    calls = Calls()
    calls.start([c for c in swap.counted()])
    for _ in range(3):
        module.A().hidden(1)
    module.A().wrapped(1)  # not counted: only the instrumented code is watched
    calls.stop()
    module.A().hidden(1)
    calls.stop()  # twice: nothing more
    swap.undo()
    if not hasattr(sys, "monitoring"):
        assert calls.count is None  # 3.10, 3.11: the waiting line says what it said before
    else:
        assert calls.count == 3 and calls.tool is None and sys.monitoring.get_tool(Calls.TOOLS[0]) is None


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="sys.monitoring is 3.12+: the 3.14 tier of "
                    "tests/test_attach_interpreters.py counts there")
def test_calls_take_a_free_tool_id_and_none_when_both_are_taken():
    monitoring = sys.monitoring
    taken = [t for t in Calls.TOOLS if monitoring.get_tool(t) is None]
    for tool in taken:
        monitoring.use_tool_id(tool, "someone else")
    try:
        calls = Calls()
        calls.start([test_calls_take_a_free_tool_id_and_none_when_both_are_taken.__code__])
        assert calls.tool is None and calls.count is None
    finally:
        for tool in taken:
            monitoring.free_tool_id(tool)
