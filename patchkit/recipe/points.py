"""A recipe's points: where in which function each start, step or refusal goes."""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

import yaml

from patchkit.core import model as m
from patchkit.core import vocabulary as v
from patchkit.recipe.kinds import KINDS
from patchkit.recipe.pointkind import PointKind
from patchkit.recipe import parts as recipe_parts
from patchkit.recipe.reader import Reader, check_relative, is_dotted, is_identifier

POINT_KEYS = ("class", "method", "function", "nested", "at", "action", "call", "loop", "when", "guard", "count", "files",
              "reason", "name")
LABELLED = ("range", "mark")  # the actions that take `name:`
LOOP_KEYS = ("iter", "target", "calls", "while")
MAX_POINTS = 1000  # the shipped recipes have at most a dozen; each point is one more scan of the target
_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def flow(value: Any) -> str:
    """A value as a recipe writes it on one line (YAML flow style): `{iter: batches}`, `[npu, cpu]`, quoted only where
    YAML would read it otherwise."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    if isinstance(value, bool) or value is None:
        return yaml.safe_dump(value).splitlines()[0]
    text = str(value)
    if isinstance(value, int) or (_PLAIN.match(text) and yaml.safe_load(text) == text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'




def points(r: Reader, options: Tuple[m.Option, ...]) -> Tuple[m.Point, ...]:
    pts = r.get(("points",))
    if not isinstance(pts, list) or not pts:
        raise r.fail(("points",), "points must be a non-empty list", "list where the start and step calls go")
    if len(pts) > MAX_POINTS:
        raise r.fail(("points",), f"the recipe has {len(pts)} points; a recipe has at most {MAX_POINTS}",
                     "a recipe needs a few points (start, step, maybe a refusal); split the rest into other recipes")
    out = []
    for i in range(len(pts)):
        here = ("points", i)
        p = r.mapping(here, POINT_KEYS, ("at",))
        for key in ("class", "method", "function", "nested"):
            if key not in p:
                continue
            name = r.name(here + (key,), key)
            if not is_identifier(name):
                raise r.fail(here + (key,), f"{key} {name!r} is not a Python name", f"write the {key} name as it is in the source")
        cls, method = _scope(r, here, p)
        at = r.word(here + ("at",), KINDS)  # a kind named imports only its module; a wrong name lists them all
        kind = KINDS[at]
        action = r.word(here + ("action",), v.ACTIONS) if "action" in p else v.DEFAULT_ACTION
        if action not in kind.actions:
            raise r.fail(here + ("action",), f"`at: {at}` allows `action: {' | '.join(kind.actions)}`, not {action}",
                         "remove `action:` from this point" if v.DEFAULT_ACTION in kind.actions else
                         f"use `action: {kind.actions[0]}`, or another `at:`")
        _check_needs(r, here, p, kind)
        call = r.name(here + ("call",), "call") if "call" in kind.needs else None
        if call is not None and not is_dotted(call):
            raise r.fail(here + ("call",), f"call {call!r} is not a dotted name", "write e.g. self._optimizer_step")
        loop: Tuple[m.LoopSelector, ...] = _loop(r, here + ("loop",)) if "loop" in kind.needs else ()
        reason = None
        if action == "refuse":
            if "guard" not in p or "reason" not in p:
                raise r.fail(here, "`action: refuse` needs `guard:` (when to keep the capture off) and `reason:`",
                             "e.g. guard: self.profiler_config.profile, reason: the framework's own profiler is on")
            reason = r.string(here + ("reason",))
        elif "reason" in p:
            raise r.fail(here + ("reason",), "`reason:` only goes with `action: refuse`", "remove it", key=True)
        label = _label(r, here, p, action)
        when = recipe_parts.when(r, here + ("when",), options) if "when" in p else ()
        count: Optional[int] = 1
        if "count" in p:
            if p["count"] == "any":
                count = None
            else:
                count = r.integer(here + ("count",), 1)
        files = ()
        if "files" in p:
            files = tuple(r.strings(here + ("files",)))
            for j, f in enumerate(files):
                check_relative(r, here + ("files", j), f)
        guard = r.expression(here + ("guard",)) if "guard" in p else None
        out.append(m.Point(cls=cls, method=method, at=at, action=action, call=call, loop=loop,
                           when=when, guard=guard, count=count, files=files, where=r.where(here),
                           nested=p.get("nested"), reason=reason, name=label))
    return tuple(out)


NEEDS_HINT = {"call": "add e.g. `call: self.model_runner.execute_model` (the dotted callee)",
              "loop": "add e.g. `loop: {iter: micro_batches}` (iter, target, calls or while)"}


def _check_needs(r: Reader, here: Tuple[Any, ...], p: Dict[str, Any], kind: PointKind) -> None:
    """The keys a kind needs are there; keys only other kinds take are not."""
    for key in NEEDS_HINT:
        if key in kind.needs and key not in p:
            raise r.fail(here, f"`at: {kind.name}` needs `{key}:`", NEEDS_HINT[key])
        if key in p and key not in kind.needs:
            takers = " / ".join(k.name for k in KINDS.values() if key in k.needs)
            raise r.fail(here + (key,), f"`{key}:` only goes with {takers}, not {kind.name}",
                         f"remove `{key}:` or change `at:`", key=True)


def _label(r: Reader, here: Tuple[Any, ...], p: Dict[str, Any], action: str) -> Optional[str]:
    """A range's or mark's ``name:``: its label in the trace, one printable ASCII line."""
    if action not in LABELLED:
        if "name" in p:
            raise r.fail(here + ("name",), f"`name:` goes with `action: range` or `mark`, not {action}", "remove it",
                         key=True)
        return None
    if "name" not in p:
        raise r.fail(here, f"`action: {action}` needs `name:` (its label in the trace)", "add e.g. `name: forward`")
    label = r.string(here + ("name",), "a label")
    if not label.isascii() or not label.isprintable() or len(label) > 200:
        raise r.fail(here + ("name",), f"name {label[:40]!r} must be one line of printable ASCII, at most 200 characters",
                     "write a short label such as forward or rollout.decode")
    return label


def _scope(r: Reader, here: Tuple[Any, ...], p: Dict[str, Any]) -> Tuple[Optional[str], str]:
    """``class`` with ``method``, or ``function`` (a module-level def): exactly one of the two."""
    either = ("name where the line goes: `class: Worker` with `method: execute_model`, "
              "or `function: train` for a module-level function")
    if "function" in p:
        other = next((k for k in ("class", "method") if k in p), None)
        if other:
            raise r.fail(here + (other,), "a point names either `function:` or `class:` with `method:`, not both",
                         "keep only `function:` for a module-level function, or remove `function:` for a method",
                         key=True)
        return None, p["function"]
    if "class" in p and "method" in p:
        return p["class"], p["method"]
    if "class" in p:
        raise r.fail(here + ("class",), "`class:` needs `method:` (the method of that class the point goes in)",
                     "add `method: NAME`; " + either, key=True)
    if "method" in p:
        raise r.fail(here + ("method",), "`method:` needs `class:` (the class that defines the method)",
                     "add `class: NAME`, or write `function: NAME` for a module-level function", key=True)
    raise r.fail(here, "a point needs `class:` and `method:`, or `function:`", either)


def _loop(r: Reader, here: Tuple[Any, ...]) -> Tuple[m.LoopSelector, ...]:
    value = r.get(here)
    alternatives = value if isinstance(value, list) else [value]
    if not alternatives:
        raise r.fail(here, "loop must name a loop", "write e.g. `loop: {iter: micro_batches}`")
    out = []
    for i in range(len(alternatives)):
        sub = here + (i,) if isinstance(value, list) else here
        sel = r.mapping(sub, LOOP_KEYS)
        if not sel:
            raise r.fail(sub, "a loop selector needs iter, target, calls or while", "write e.g. `{iter: micro_batches}`")
        for key in sel:
            name = r.name(sub + (key,), f"loop {key}")
            ok = is_dotted(name) if key in ("calls", "iter", "while") else is_identifier(name)
            if not ok:
                raise r.fail(sub + (key,), f"loop {key} {name!r} is not a valid name", "write a Python name (calls: a dotted name)")
        out.append(m.LoopSelector(**{("while_" if k == "while" else k): v for k, v in sel.items()}))
    return tuple(out)
