"""The function a point names: ``class:`` + ``method:``, or ``function:``, maybe with ``nested:``.

Classes and functions are looked up among the module's top-level
statements only, methods among the statements of the class body, and a
nested function in the blocks of its function (not inside another def or
class).  A name that is not there gives a reason, the line to show, and a
hint with the closest names (or the other spelling of the point, when the
name is a method where a function was named, or the other way round).
:func:`functions` names every function a point can name, for ``patchkit
points`` to offer the nearest.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import libcst as cst

from patchkit.engine.points.positions import Positions


class Missing(Exception):
    """The function is not there (``absent``: no definition of that name; else defined more than once)."""

    def __init__(self, reason: str, line: Optional[int] = None, col: Optional[int] = None, hint: str = "",
                 absent: bool = False):
        super().__init__(reason)
        self.reason, self.line, self.col, self.hint, self.absent = reason, line, col, hint, absent


def _name(node: cst.CSTNode) -> str:
    return node.name.value


def _defs(body: Sequence[cst.CSTNode]) -> List[cst.FunctionDef]:
    return [n for n in body if isinstance(n, cst.FunctionDef)]


def _members(cls: cst.ClassDef) -> Sequence[cst.CSTNode]:
    return cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()


def find_function(module: cst.Module, cls: Optional[str], method: str, nested: Optional[str],
                  positions: Positions) -> Tuple[cst.FunctionDef, Tuple[cst.CSTNode, ...]]:
    """The function, and the definitions on the way to it from the module (the class, the method)."""
    if cls is None:
        func = _function(module, method, positions)
        holders: Tuple[cst.CSTNode, ...] = (func,)
    else:
        owner = _class(module, cls, positions)
        func = _method(module, owner, method, positions)
        holders = (owner, func)
    if nested:
        func = _nested(func, nested, method if cls is None else f"{cls}.{method}", positions)
    return func, holders


def _function(module: cst.Module, name: str, positions: Positions) -> cst.FunctionDef:
    top = _defs(module.body)
    funcs = [f for f in top if _name(f) == name]
    if not funcs:
        owners = [_name(c) for c in module.body if isinstance(c, cst.ClassDef)
                  and any(_name(f) == name for f in _defs(_members(c)))]
        hint = (f"{name} is a method of class {owners[0]} here: write `class: {owners[0]}` and `method: {name}` "
                "instead of `function:`" if owners else _did_you_mean("function", name, top, positions,
                                                                     "the module-level functions here"))
        raise Missing(f"no function {name} at the top level of the file", hint=hint, absent=True)
    if len(funcs) > 1:
        raise Missing(f"the file defines {name} {len(funcs)} times at the top level, at lines "
                      + ", ".join(str(positions.line(f)) for f in funcs), positions.line(funcs[1]))
    return funcs[0]


def _class(module: cst.Module, name: str, positions: Positions) -> cst.ClassDef:
    classes = [n for n in module.body if isinstance(n, cst.ClassDef)]
    named = [c for c in classes if _name(c) == name]
    if not named:
        raise Missing(f"no class {name} at the top level of the file",
                      hint=_did_you_mean("class", name, classes, positions, "the classes here"), absent=True)
    if len(named) > 1:
        raise Missing(f"found {len(named)} classes named {name}, at lines "
                      + ", ".join(str(positions.line(c)) for c in named), positions.line(named[1]))
    return named[0]


def _method(module: cst.Module, owner: cst.ClassDef, name: str, positions: Positions) -> cst.FunctionDef:
    methods = _defs(_members(owner))
    funcs = [f for f in methods if _name(f) == name]
    cls = _name(owner)
    if not funcs:
        hint = (f"{name} is a module-level function here: write `function: {name}` instead of `class:` and `method:`"
                if any(_name(f) == name for f in _defs(module.body))
                else _did_you_mean("method", name, methods, positions, f"the methods of {cls}"))
        start = positions.start(owner)
        raise Missing(f"class {cls} has no method {name}", start.line, start.column + 1, hint, absent=True)
    if len(funcs) > 1:
        raise Missing(f"class {cls} defines {name} {len(funcs)} times, at lines "
                      + ", ".join(str(positions.line(f)) for f in funcs), positions.line(funcs[1]))
    return funcs[0]


class _NestedDefs(cst.CSTVisitor):
    """The functions defined in a function's blocks, at any depth, but not inside another def or class."""

    def __init__(self) -> None:
        super().__init__()
        self.found: List[cst.FunctionDef] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.found.append(node)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        return False  # no def in there


def _nested(func: cst.FunctionDef, name: str, where: str, positions: Positions) -> cst.FunctionDef:
    defs = _NestedDefs()
    func.body.visit(defs)
    found = [f for f in defs.found if _name(f) == name]
    if not found:
        raise Missing(f"{where} defines no nested function {name}", positions.line(func),
                      hint=_did_you_mean("nested", name, defs.found, positions, f"the functions {where} defines"),
                      absent=True)
    if len(found) > 1:
        raise Missing(f"{where} defines {name} {len(found)} times, at lines "
                      + ", ".join(str(positions.line(f)) for f in found), positions.line(found[1]))
    return found[0]


def functions(module: cst.Module, positions: Positions) -> List[Tuple[str, int]]:
    """Every function a point can name in the module, as ``patchkit points`` names it (``f``, ``C.m``, ``f.inner``,
    ``C.m.inner``), with the line of its name."""
    found: List[Tuple[str, cst.FunctionDef]] = [(_name(f), f) for f in _defs(module.body)]
    for cls in (n for n in module.body if isinstance(n, cst.ClassDef)):
        found += [(f"{_name(cls)}.{_name(f)}", f) for f in _defs(_members(cls))]
    out = []
    for qualname, func in found:
        out.append((qualname, positions.line(func.name)))
        inner = _NestedDefs()
        func.body.visit(inner)
        out += [(f"{qualname}.{_name(f)}", positions.line(f.name)) for f in inner.found]
    return out


def _did_you_mean(key: str, name: str, nodes: Sequence[cst.CSTNode], positions: Positions, what: str) -> str:
    """``did you mean `key: closest` (line N)?`` among the names of ``nodes``, else the first few of them."""
    from patchkit.engine.points.nearest import names_hint

    return names_hint(key, name, [(_name(n), positions.line(n.name)) for n in nodes], what)
