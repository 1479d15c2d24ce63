"""When a point does not resolve: the places of the same function that do, as the recipe lines that select them.

:func:`hint` is what a finder's "no statement calling X" or "no loop over X"
says to do: the nearest names (``difflib.get_close_matches``) among those
the function really has for that key (the dotted callees of its statements,
its loops' iterables, targets, innermost calls and ``while`` conditions),
each written as the recipe line that selects it with the line of the file
where it is, or, when none is close, the first few that exist.
:func:`names_hint` does the same for the ``class:``, ``method:``,
``function:`` and ``nested:`` names :mod:`.lookup` cannot find, and
:func:`target_hint` for the function ``patchkit points`` is asked for, as
its target names it (there the advice is what to type, not a recipe to
correct).
"""

from __future__ import annotations

from difflib import SequenceMatcher, get_close_matches
from typing import Dict, List, Sequence, Tuple

from patchkit.core.model import LoopSelector, Point
from patchkit.engine.points.scan import Scan

FEW = 5  # how many existing places a hint lists when none is close


IN_A_RECIPE = ("correct the point in the recipe", "`patchkit points` lists every place")  # what to do, after each


def _listed(choices: Sequence[Tuple[str, str, int]], wanted: str, what: str,
            advice: Tuple[str, str] = IN_A_RECIPE) -> str:
    """``did you mean `call: a` (line 3)?`` for the close names, else ``WHAT: `call: a` (line 3), ...``, each
    followed by what to do (``advice``: after a close name, after the list).

    ``choices``: (name, the recipe line that selects it, its line in the file)."""
    spelled: Dict[str, Tuple[str, int]] = {}
    for name, line_text, line in choices:
        spelled.setdefault(name, (line_text, line))
    if not spelled:
        return ""
    close = get_close_matches(wanted, list(spelled), n=3, cutoff=0.6)
    if close:
        return "did you mean " + " or ".join(f"`{spelled[c][0]}` (line {spelled[c][1]})" for c in close) + \
               "? " + advice[0]
    shown = sorted(spelled.values(), key=lambda item: item[1])[:FEW]
    more = f", and {len(spelled) - FEW} more" if len(spelled) > FEW else ""
    return f"{what}: " + ", ".join(f"`{text}` (line {n})" for text, n in shown) + more + "; " + advice[1]


def hint(scan: Scan, point: Point) -> str:
    """What to write instead, for a point whose call or loop the function does not have."""
    if point.call is not None:
        return _call_hint(scan, point.call)
    if point.loop:
        return _loop_hint(scan, point.loop[0])
    return ""


def _call_hint(scan: Scan, call: str) -> str:
    choices = [(s.call, f"call: {s.call}", scan.line(s.node)) for s in scan.statements if s.call]
    buried = [node for name, node, _around in scan.calls if name == call]
    if buried and not any(c[0] == call for c in choices):
        return (f"{call} is called at line {scan.line(buried[0])} inside an expression; a point goes next to a "
                f"statement whose value is the call (`x = {call}(...)` or `{call}(...)`); "
                + _listed(choices, "", f"the statements of {scan.qualname} call"))
    return _listed(choices, call, f"the statements of {scan.qualname} call")


def _loop_hint(scan: Scan, selector: LoopSelector) -> str:
    from patchkit.engine.points.loops import Callees, iterables, loop_selector, loop_targets

    if not scan.loops:
        return f"{scan.qualname} has no loop; `patchkit points` lists the places it has"
    key, wanted = next((k, v) for k, v in (("iter", selector.iter), ("target", selector.target),
                                           ("calls", selector.calls), ("while", selector.while_)) if v)
    names: List[Tuple[str, int]] = []
    for loop in scan.loops:
        line = scan.line(loop.node)
        if key == "iter":
            found = iterables(loop.node)
        elif key == "target":
            found = loop_targets(loop.node)
        elif key == "calls":
            found = [name for name, _node, around in scan.calls if around and around[-1] is loop.node]
        else:
            callees = Callees()
            if hasattr(loop.node, "test"):
                loop.node.test.visit(callees)
            found = [n for n in callees.names if n]
        names += [(name, f"loop: {{{key}: {name}}}", line) for name in found]
    close = _listed(names, wanted, "")
    if close.startswith("did you mean"):
        return close
    loops = []
    for lp in scan.loops:
        chosen = loop_selector(scan, lp)[0]
        if chosen:
            text = "loop: {" + ", ".join(f"{k}: {v}" for k, v in chosen.items()) + "}"
            loops.append((text, text, scan.line(lp.node)))
    return _listed(loops, "\0", f"the loops of {scan.qualname}")


def names_hint(key: str, name: str, names: Sequence[Tuple[str, int]], where: str) -> str:
    """For a ``class:``/``method:``/``function:``/``nested:`` name not found: the close ones, else those there."""
    return _listed([(n, f"{key}: {n}", line) for n, line in names], name, where)


def target_hint(qualname: str, names: Sequence[Tuple[str, int]]) -> str:
    """For ``patchkit points TARGET`` whose function is not there: the functions of the file nearest ``qualname``,
    as a target names them (``Class.method``), and what to type instead; there is no recipe to correct.

    Names are compared part by part (``Trainr.fit`` is near ``Trainer.fit``,
    not ``Trainer.update``); a name of another depth by its last part (``fit``
    is near ``Trainer.fit``), a shade behind.
    """
    wanted = qualname.split(".")

    def nearness(name: str) -> float:
        parts = name.split(".")
        if len(parts) == len(wanted):
            return min(SequenceMatcher(None, a, b).ratio() for a, b in zip(wanted, parts))
        return SequenceMatcher(None, wanted[-1], parts[-1]).ratio() - 0.01

    ranked = sorted(((nearness(n), n, line) for n, line in names), key=lambda item: -item[0])
    close = [(n, line) for near, n, line in ranked if near >= 0.6][:3]
    if close:
        return "did you mean " + " or ".join(f"`{n}` (line {line})" for n, line in close) + \
               f"? write it in the target in place of `{qualname}`"
    return _listed([(n, n, line) for n, line in names], "\0", "the functions here",
                   ("", f"write one of them in the target in place of `{qualname}`"))
