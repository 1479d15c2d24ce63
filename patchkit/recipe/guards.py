"""Guards and role expressions: a restricted Python expression, checked when the recipe is read.

A guard is pasted into the target file as Python, so ``validate`` must be
able to say that it only reads values: it may use names, attributes,
subscripts, literals (strings, numbers, booleans, ``None``, and tuples,
lists and sets of them), comparisons, ``and`` / ``or`` / ``not``,
``x if c else y``, unary ``-``/``+`` and the arithmetic ``+ - * / // %``.
Calls are refused, except a few builtins that only look things up
(:data:`CALLS`), with plain arguments: ``getattr(x, "name", default)`` and
``hasattr(x, "name")`` with a constant attribute name, ``isinstance(x, T)``,
``type(x)``, ``len(x)``, ``dir()``.  No lambda, comprehension, f-string,
walrus, ``**``, starred value or keyword argument, and no dunder name or
attribute (``__import__``, ``__class__``...) but :data:`DUNDERS`, the names
of a class.  The check is on Python's own parse tree (``ast``, ``eval``
mode); libcst parses the same text again when the line is written.

A guard that passes may still raise where the line runs (an attribute a
release lacks): the line hands it to the runtime as a lambda, which reads
that as false.  :func:`uncertain_chains` names the reads ``validate`` warns
about.
"""

from __future__ import annotations

import ast
from typing import Callable, Dict, List, Tuple

MAX_DEPTH = 40  # far beyond any real guard; deep nesting would exhaust the parsers' recursion
MAX_CHARS = 1000  # one readable line; the shipped recipes' longest is under 70
CALLS = {"getattr": (2, 3), "hasattr": (2, 2), "isinstance": (2, 2), "type": (1, 1), "len": (1, 1), "dir": (0, 1)}
DUNDERS = frozenset({"__name__", "__qualname__"})  # type(self).__name__: which class this is
ALLOWED = ("names, attributes, subscripts, literals (str, int, float, bool, None, tuples/lists/sets of them), "
           "comparisons, and/or/not, `x if c else y`, unary -, arithmetic + - * / // %, and the calls "
           + ", ".join(f"{name}()" for name in CALLS))

_PLAIN = (ast.Expression, ast.Name, ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.Set,
          ast.Compare, ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.IfExp, ast.Load, ast.Constant, ast.Call,
          ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod,
          ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot, ast.In, ast.NotIn)
_WHAT: Dict[type, str] = {
    ast.Lambda: "a lambda", ast.NamedExpr: "an assignment expression (:=)", ast.JoinedStr: "an f-string",
    ast.ListComp: "a comprehension", ast.SetComp: "a comprehension", ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator expression", ast.Yield: "yield", ast.YieldFrom: "yield", ast.Await: "await",
    ast.Starred: "a starred value (*x)", ast.Dict: "a dict", ast.Pow: "the power operator **",
    ast.LShift: "a shift (<<)", ast.RShift: "a shift (>>)", ast.MatMult: "the @ operator", ast.BitAnd: "the & operator",
    ast.BitOr: "the | operator", ast.BitXor: "the ^ operator", ast.Invert: "the ~ operator",
    ast.keyword: "a keyword argument",
}
_CONSTANTS = (str, bytes, int, float, bool, type(None))


def check_expression(text: str, fail: Callable[[str], Exception]) -> str:
    """Check a guard; return it as the one ASCII line that will be inserted.  ``fail(message)`` makes the error."""
    text = text.strip()
    if len(text) > MAX_CHARS:
        raise fail(f"the guard is {len(text)} characters long; a guard is one line of at most {MAX_CHARS}")
    if not text.isascii():
        raise fail(f"a guard must be ASCII (the target file's encoding may not hold other characters): {text!r}; "
                   "write other characters in strings as \\u escapes")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise fail(f"not a valid Python expression: {text!r} ({exc.msg})") from None
    except (RecursionError, MemoryError):
        raise fail(f"the guard is nested too deeply ({len(text)} characters)") from None
    depth = {id(tree): 0}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            depth[id(child)] = depth[id(node)] + 1
            if depth[id(child)] > MAX_DEPTH:
                raise fail(f"the guard is nested more than {MAX_DEPTH} levels deep: {text[:60]!r}...")
    if isinstance(tree.body, ast.Tuple):  # `a, b` is always true, and would split the line's call in two
        raise fail(f"a tuple is not a condition (it is always true): {text!r}; join conditions with `and` or `or`")
    refused = _refused(tree.body)
    if refused:
        raise fail(f"{refused} is not allowed in a guard: {text!r}")
    if any(not (" " <= ch <= "~") for ch in text) or "#" in text:  # tabs, form feeds, newlines, comments
        return ast.unparse(tree)
    return text


def _refused(node: ast.AST) -> str:
    """What in ``node`` a guard may not hold (the first found, callee before arguments), or ``""``."""
    if not isinstance(node, _PLAIN):
        return _WHAT.get(type(node), f"`{type(node).__name__}`")
    if isinstance(node, ast.Name) and _dunder(node.id):
        return f"the name {node.id}"
    if isinstance(node, ast.Attribute) and _dunder(node.attr) and node.attr not in DUNDERS:
        return f"the attribute .{node.attr}"
    if isinstance(node, ast.Constant) and not isinstance(node.value, _CONSTANTS):
        return f"the literal {type(node.value).__name__}"
    if isinstance(node, ast.Call):
        refused = _call(node)
        if refused:
            return refused
    for child in ast.iter_child_nodes(node):
        refused = _refused(child)
        if refused:
            return refused
    return ""


def _call(node: ast.Call) -> str:
    """A call of one of :data:`CALLS`, with plain positional arguments and a constant attribute name."""
    func = node.func
    if not isinstance(func, ast.Name):
        return _refused(func) or f"a call of `{ast.unparse(func)}`"
    if func.id not in CALLS:
        return f"a call of {func.id}()"
    if node.keywords:
        return "a keyword argument"
    low, high = CALLS[func.id]
    if not low <= len(node.args) <= high:
        return f"{func.id}() with {len(node.args)} arguments"
    if func.id in ("getattr", "hasattr"):
        name = node.args[1]
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.isidentifier()):
            return f"{func.id}() with an attribute name that is not a constant string"
        if _dunder(name.value) and name.value not in DUNDERS:
            return f"{func.id}() of the attribute {name.value}"
    return ""


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def uncertain_chains(text: str) -> List[Tuple[str, str]]:
    """The attribute chains a (checked) guard reads that may not exist: an attribute of an attribute
    (``self.config.use_dynamic_bsz``), each with the same read written so that a missing one is ``None``
    (``getattr(self.config, "use_dynamic_bsz", None)``).

    The first attribute of a name is the target's own (``self.role``: the recipe names the class); what it
    holds (a config, a model) may differ between releases and classes.  Such a guard is not wrong: where the
    attribute is missing it raises when the line runs, and the runtime reads that as false.
    """
    found: List[Tuple[int, str, str]] = []
    inner = set()
    for node in ast.walk(ast.parse(text.strip(), mode="eval")):
        if not isinstance(node, ast.Attribute) or id(node) in inner:
            continue
        hops, base = [], node
        while isinstance(base, ast.Attribute):
            inner.add(id(base.value))
            hops.append(base.attr)
            base = base.value
        if len(hops) < 2:
            continue
        hops.reverse()
        safe = f"{ast.unparse(base)}.{hops[0]}"
        for attr in hops[1:]:
            safe = f'getattr({safe}, "{attr}", None)'
        found.append((node.col_offset, ast.unparse(node), safe))
    return [(chain, safe) for _, chain, safe in sorted(found)]
