"""patchkit.record.Record: the named-tuple contract the data shapes rely on."""

from __future__ import annotations

import copy
import pickle
from typing import Optional

import pytest

from patchkit.model import Point
from patchkit.record import Record


class Span(Record):
    """A place."""

    path: str
    line: int = 1
    note: Optional[str] = None

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def test_fields_positions_keywords_and_defaults():
    span = Span("a.py", note="x")
    assert span == ("a.py", 1, "x") and tuple(span) == ("a.py", 1, "x")
    assert (span.path, span.line, span.note) == ("a.py", 1, "x")
    assert Span("a.py", 3, "y") == Span(path="a.py", line=3, note="y")
    assert Span._fields == ("path", "line", "note") and Span.__doc__ == "A place."
    assert span.where() == "a.py:1"
    path, line, note = span
    assert (path, line, note) == ("a.py", 1, "x")


def test_equality_hash_repr_replace_asdict():
    span = Span("a.py", 2)
    assert hash(span) == hash(Span("a.py", 2)) and {span: 1}[Span("a.py", 2)] == 1
    assert repr(span) == "Span(path='a.py', line=2, note=None)"
    assert span._replace(line=5) == Span("a.py", 5) and span == Span("a.py", 2)
    assert span._asdict() == {"path": "a.py", "line": 2, "note": None}
    with pytest.raises(TypeError, match="no field 'lines'"):
        span._replace(lines=5)


def test_pickle_and_copy_keep_the_type():
    span = Span("a.py", 2, "n")
    for clone in (pickle.loads(pickle.dumps(span)), copy.copy(span), copy.deepcopy(span)):
        assert type(clone) is Span and clone == span


def test_immutable_and_without_an_instance_dict():
    span = Span("a.py")
    with pytest.raises(AttributeError):
        span.line = 2
    with pytest.raises(AttributeError):
        span.extra = 1
    assert not hasattr(span, "__dict__")


@pytest.mark.parametrize("call, message", [
    (lambda: Span(), "missing required argument: 'path'"),
    (lambda: Span("a", 1, None, 4), "takes 3 arguments but 4 were given"),
    (lambda: Span("a", lines=2), "unexpected or repeated argument 'lines'"),
    (lambda: Span("a", path="b"), "unexpected or repeated argument 'path'"),
])
def test_wrong_arguments_are_type_errors(call, message):
    with pytest.raises(TypeError, match=message):
        call()


def test_a_field_may_be_called_cls():
    point = Point(cls="Worker", method="run", at="method_start")
    assert point.cls == "Worker" and point._replace(cls="Other").cls == "Other"


def test_declaration_mistakes_are_caught():
    with pytest.raises(TypeError, match="without a default follows"):
        class Bad(Record):
            a: int = 1
            b: int
    with pytest.raises(TypeError, match="underscore"):
        class Hidden(Record):
            _a: int
    with pytest.raises(TypeError, match="cannot extend"):
        class More(Span):
            extra: int = 0
