"""Immutable named records, declared like ``typing.NamedTuple`` but cheap to define.

``typing.NamedTuple`` compiles every annotation and ``collections.namedtuple``
evaluates a constructor for each class: with some thirty data shapes that was
a third of the time `patchkit diff` takes.  A :class:`Record` subclass lists
its fields as annotations, with defaults as plain values, and gets a tuple
with read-only named fields, positional and keyword construction, defaults,
``_fields``, ``_replace``, equality, hashing, pickling and a readable repr::

    class Span(Record):
        path: str
        line: int = 1

Annotations are never evaluated (the modules use ``from __future__ import
annotations``), so they cost nothing and may name any type.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Dict, Tuple


class _RecordType(type):
    def __new__(mcls, name: str, bases: tuple, ns: Dict[str, Any]):
        if bases == (tuple,):  # Record itself
            return super().__new__(mcls, name, bases, ns)
        if any(getattr(base, "_fields", ()) for base in bases):
            raise TypeError(f"{name}: a record cannot extend another record's fields")
        fields = tuple(ns.get("__annotations__", ()))
        defaults: Dict[str, Any] = {}
        for index, field in enumerate(fields):
            if field.startswith("_"):
                raise TypeError(f"{name}: field names cannot start with an underscore: {field!r}")
            if field in ns:
                defaults[field] = ns[field]
            elif defaults:
                raise TypeError(f"{name}: field {field!r} without a default follows fields with defaults")
            ns[field] = property(itemgetter(index), doc=f"Field {index}: {field}")
        ns["__slots__"] = ()  # no instance dict: records cannot grow attributes
        ns["_fields"], ns["_defaults"] = fields, defaults
        return super().__new__(mcls, name, bases, ns)


class Record(tuple, metaclass=_RecordType):
    """Base of the records: subclass it and annotate the fields."""

    __slots__ = ()
    _fields: Tuple[str, ...]
    _defaults: Dict[str, Any]

    def __new__(cls, /, *args: Any, **kwargs: Any):  # `/`: a field may be called cls
        fields = cls._fields
        if len(args) == len(fields) and not kwargs:
            return tuple.__new__(cls, args)
        if len(args) > len(fields):
            raise TypeError(f"{cls.__name__}() takes {len(fields)} arguments but {len(args)} were given")
        values = list(args)
        for field in fields[len(args):]:
            if field in kwargs:
                values.append(kwargs.pop(field))
            elif field in cls._defaults:
                values.append(cls._defaults[field])
            else:
                raise TypeError(f"{cls.__name__}() missing required argument: {field!r}")
        if kwargs:
            extra = next(iter(kwargs))
            raise TypeError(f"{cls.__name__}() got an unexpected or repeated argument {extra!r}")
        return tuple.__new__(cls, values)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f}={v!r}' for f, v in zip(self._fields, self))})"

    def __getnewargs__(self) -> tuple:
        return tuple(self)

    def _replace(self, /, **changes: Any):
        unknown = changes.keys() - set(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        return type(self)(*(changes.get(f, v) for f, v in zip(self._fields, self)))

    def _asdict(self) -> Dict[str, Any]:
        return dict(zip(self._fields, self))
