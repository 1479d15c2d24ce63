"""What a kind of point must declare, and what the walk of patchkit/recipe/kinds/ refuses: a module that is not
one well-declared kind is a plain error naming the module and what it lacks, never a kind half there."""

from __future__ import annotations

import sys
import textwrap

import pytest

from patchkit.recipe.kinds import KindError, _kind_of
from patchkit.recipe.pointkind import CALL, DEF, Example, PointKind, problems


class Sound(PointKind):
    name = "sound"
    summary = "a kind declared in full"
    place = CALL
    VALID = (Example("s", {"at": "sound", "call": "f"}, after="t"),)
    INVALID = (Example("s", {"at": "sound", "call": "g"}, reason="no statement calling g"),)

    def find(self, scan, statement):
        return [scan.after(statement)]


def test_a_kind_declared_in_full_has_no_problem_and_its_place_gives_its_anchor_and_needs():
    kind = Sound()
    assert problems(kind, "somewhere.sound") == []
    assert (kind.anchor, kind.needs, kind.form, kind.what) == ("call", ("call",), "statement", "{at}")


@pytest.mark.parametrize("changes, words", [
    ({"name": "other"}, "its name 'other' is not its module's name"),
    ({"summary": ""}, "it has no summary"),
    ({"place": "inside"}, "its place 'inside' is not one of def, call, loop, loop_end, end"),
    ({"form": "comment"}, "its form 'comment' is not one of statement, decorator"),
    ({"actions": ("jump",)}, "its actions ('jump',) are not among start, step, refuse, range, mark"),
    ({"INVALID": ()}, "it needs a VALID and an INVALID example"),
    ({"VALID": (Example("s", {"at": "elsewhere"}, after="t"),)}, "must have `at: sound`"),
    ({"VALID": (Example("s", {"at": "sound"}, after="t", reason="r"),)}, "give either `after` or `reason`"),
])
def test_each_part_a_kind_lacks_is_named(changes, words):
    broken = type("Broken", (Sound,), changes)()
    assert any(words in p for p in problems(broken, "somewhere.sound")), problems(broken, "somewhere.sound")


def _module(tmp_path, monkeypatch, name, body):
    (tmp_path / f"{name}.py").write_text("from patchkit.recipe.pointkind import DEF, Example, PointKind\n\n"
                                         + textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


KIND = '''
class {cls}(PointKind):
    name = "{name}"
    summary = "s"
    place = DEF
    VALID = (Example("s", {{"at": "{name}"}}, after="t"),)
    INVALID = (Example("s", {{"at": "{name}"}}, reason="r"),)
{find}
'''
FIND = "\n    def find(self, scan, func):\n        return [scan.body_start(func)]\n"


def test_the_walk_takes_one_kind_a_module_and_refuses_anything_else(tmp_path, monkeypatch):
    good = _module(tmp_path, monkeypatch, "pk_good", KIND.format(cls="Good", name="pk_good", find=FIND))
    assert _kind_of(good).name == "pk_good" and _kind_of(good).place == DEF
    two = _module(tmp_path, monkeypatch, "pk_two", KIND.format(cls="A", name="pk_two", find=FIND)
                  + KIND.format(cls="B", name="pk_two", find=FIND))
    with pytest.raises(KindError, match="pk_two must define one subclass of PointKind; it defines 2"):
        _kind_of(two)
    none = _module(tmp_path, monkeypatch, "pk_none", "X = 1\n")
    with pytest.raises(KindError, match="it defines 0"):
        _kind_of(none)
    lazy = _module(tmp_path, monkeypatch, "pk_lazy", KIND.format(cls="Lazy", name="pk_lazy", find=""))
    with pytest.raises(KindError, match=r"pk_lazy: Lazy does not define find\(self, scan, anchor\)"):
        _kind_of(lazy)
    misnamed = _module(tmp_path, monkeypatch, "pk_misnamed", KIND.format(cls="M", name="other", find=FIND))
    with pytest.raises(KindError, match="pk_misnamed: its name 'other' is not its module's name"):
        _kind_of(misnamed)


def test_a_kind_that_wraps_whole_calls_refuses_async_functions_and_generators_in_its_own_words():
    from types import SimpleNamespace as NS

    from patchkit.recipe.pointkind import wraps_whole_calls

    is_async, is_generator = wraps_whole_calls("a timer", "stop")
    plain, coroutine = NS(asynchronous=False), NS(asynchronous=True)
    assert is_async.test(None, plain) == [] and is_async.test(None, coroutine) == [coroutine]
    assert is_generator.test(NS(yields=["y"]), plain) == ["y"] and is_generator.test(NS(yields=[]), plain) == []
    assert is_async.reason == "{qualname} is async; a timer wraps plain {scope}s only"
    assert is_generator.reason == ("{qualname} is a generator (yield {at}); a timer would stop when the generator "
                                   "is created, not when it finishes")
