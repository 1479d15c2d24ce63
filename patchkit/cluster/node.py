"""What one Ray node does for a ``--ray`` command: the same :mod:`patchkit` call, on its own files.

Only plain data travels: the recipe id (or a recipe file path that must
exist on every node), the ``KEY=VALUE`` overrides and the backend in; a
:class:`NodeResult` out.  Each node loads the recipe, reads its own
``PATCHKIT_ROOT`` and ``PATCHKIT_HOME`` and resolves its own targets.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from patchkit.core.errors import PatchkitError
from patchkit.core.outcome import Outcome, Shown


class NodeState(Shown):
    """What a ``--ray`` command did on one node (revert and status report their files' own states)."""

    WOULD_CHANGE = "would change"  # diff
    ALREADY_APPLIED = "already applied"
    PATCHED = "patched"
    UPDATED = "updated"
    NOT_APPLIED = "not applied"  # apply: another node's plan failed, so nothing was written here
    ROLLED_BACK = "rolled back"  # apply failed on another node: this node's change was undone
    ROLLBACK_FAILED = "rollback failed"
    LEFT_AS_IT_WAS = "left as it was"  # apply failed on another node; nothing had changed here
    REVERTED = "reverted"  # revert: files with different outcomes
    NOTHING_TO_REVERT = "nothing to revert"
    NOTHING_APPLIED = "nothing applied"  # status
    FAILED = "failed"


@dataclass
class NodeResult:
    """What one node did.  ``state`` is :attr:`NodeState.FAILED` (with the reason in ``message``) when ``ok`` is
    false; otherwise a :class:`NodeState`, or what all its files say (revert), or their states joined (status)."""

    node_id: str
    ip: str
    recipe: str
    state: str
    message: str
    ok: bool = True
    changed: bool = False  # apply: this node's files were written
    root: str = ""  # the folder the node resolved the package in (apply, diff)
    home: str = ""  # the node's PATCHKIT_HOME
    diff: str = ""  # diff: the node's patch
    files: List[Dict[str, Any]] = field(default_factory=list)  # status: the node's records
    previous: Dict[str, Any] = field(default_factory=dict)  # apply: the recipe's settings before, per file
    version_skipped: str = ""  # diff, apply with --skip-version-check: the refusal this node let through
    version_note: str = ""  # diff, apply: this node's version is past the recipe's proven range, or has none

    @property
    def node(self) -> str:
        return f"{self.node_id[:12]} ({self.ip})"


def on_node(op: str, args: Dict[str, Any]) -> Dict[str, Any]:
    """Runs inside a Ray worker on one node: plain data in, plain data out, never raises."""
    import ray

    from patchkit.state.ledger import Ledger, home

    ctx = ray.get_runtime_context()
    result = NodeResult(node_id=ctx.get_node_id(), ip=ray.util.get_node_ip_address(),
                        recipe=args.get("label", ""), state="", message="", home=str(home()))
    led = Ledger()  # the node's own PATCHKIT_HOME
    try:
        _OPS[op](result, led, **args.get("kwargs", {}))
    except PatchkitError as exc:
        result.ok, result.state, result.message = False, NodeState.FAILED, exc.render()
    except Exception as exc:  # the node's environment may be anything: report, never crash the driver
        result.ok, result.state, result.message = False, NodeState.FAILED, f"{type(exc).__name__}: {exc}"
    if led.recovered:  # an earlier run on this node was killed half-way and its change was put back
        result.message = "; ".join(["note: " + n for n in led.recovered] + [result.message])
    return asdict(result)


def _root_of(path: Path, relpath: str) -> str:
    text = str(path)
    return text[: -len(relpath)].rstrip(os.sep) if relpath and text.endswith(relpath) else str(path.parent)


def _node_plan(result: NodeResult, led, recipe: str, overrides: Sequence[str], backend: Optional[str],
               root: Optional[str], skip_version_check: bool = False, strict_versions: Optional[bool] = None) -> None:
    import patchkit

    s = patchkit.load(recipe, overrides, backend)
    plan = patchkit.plan(s, root, skip_version_check, strict_versions)
    changed = sum(f.changes for f in plan.files)
    result.recipe, result.root, result.diff = s.id, str(plan.installed.root), plan.diff()
    result.state = NodeState.WOULD_CHANGE if changed else NodeState.ALREADY_APPLIED
    result.message = (f"{changed} file(s) would change, {len(plan.files) - changed} already applied "
                      f"({s.recipe.target.distribution} {plan.installed.shown} in {plan.installed.root})")
    result.version_skipped, result.version_note = plan.version_skipped, plan.version_note


def _node_apply(result: NodeResult, led, recipe: str, overrides: Sequence[str], backend: Optional[str],
                root: Optional[str], skip_version_check: bool = False, strict_versions: Optional[bool] = None) -> None:
    import patchkit

    s = patchkit.load(recipe, overrides, backend)
    result.recipe = s.id
    for st in patchkit.status(ledger=led):  # the recipe's settings before this apply, to go back to if one fails
        applied = st.record.recipes.get(s.id) if st.record is not None else None
        if applied is not None:
            result.previous[st.record.path] = {"overrides": list(applied.overrides), "recipe_path": applied.recipe_path}
    outcomes = patchkit.apply(s, root, ledger=led, skip_version_check=skip_version_check,
                              strict_versions=strict_versions,
                              planned=lambda p: setattr(result, "version_note", p.version_note))
    changed = [o for o in outcomes if o.state.written]
    result.changed = bool(changed)
    result.root = _root_of(outcomes[0].path, outcomes[0].relpath) if outcomes else ""
    if changed:
        result.state = NodeState.UPDATED if any(o.state is Outcome.UPDATED for o in changed) else NodeState.PATCHED
    else:
        result.state = NodeState.ALREADY_APPLIED
    result.message = _files(outcomes, result.state, "relpath") + f" in {result.root}; traces go to {s.recipe.profiler.save_path}"
    if result.changed:
        from patchkit.state.environment import runtime_missing

        missing = runtime_missing(Path(result.root))
        if missing:
            result.message += f"; warning: {missing}"


def _node_rollback(result: NodeResult, led, recipe: str, root: str, previous: Dict[str, Any]) -> None:
    """Undo this node's part of a cluster apply that failed elsewhere."""
    import patchkit

    result.recipe = recipe
    earlier = [p for path, p in previous.items() if path.startswith(root.rstrip(os.sep) + os.sep)]
    if earlier:  # it was applied before with other settings: put those back
        s = patchkit.load(earlier[0]["recipe_path"], earlier[0]["overrides"])
        patchkit.apply(s, root, ledger=led, skip_version_check=True)  # applied here already: put it back as it was
        result.state, result.message = NodeState.ROLLED_BACK, f"earlier settings of {recipe} put back in {root}"
    else:
        outcomes = patchkit.revert([recipe], False, root, ledger=led)
        result.state = NodeState.ROLLED_BACK
        result.message = _files(outcomes, "", "relpath") + f" in {root}"


def _node_revert(result: NodeResult, led, recipes: Sequence[str], everything: bool, root: Optional[str],
                 force: bool = False) -> None:
    import patchkit

    result.recipe = "all" if everything else ",".join(recipes)
    if not everything:
        base = str(Path(root).expanduser().resolve()).rstrip(os.sep) + os.sep if root else ""
        present = {rid for st in patchkit.status(ledger=led, root=root) if st.path.startswith(base)
                   for rid in st.recipes}
        if not present & set(recipes):
            result.state, result.message = NodeState.NOTHING_TO_REVERT, "not applied on this node" + (f" under {root}" if root else "")
            return
    outcomes = patchkit.revert(recipes, everything, root, ledger=led, **({"force": True} if force else {}))
    said = {o.label for o in outcomes}  # what every file says, when they all say the same
    result.state = (said.pop() if len(said) == 1 else NodeState.REVERTED) if outcomes else NodeState.NOTHING_TO_REVERT
    result.message = _files(outcomes, result.state, "path") if outcomes else "nothing was applied"


def _files(outcomes, state: str, name: str) -> str:
    """``a.py (4 lines), b.py (already applied)``: each file, with its state where it differs from ``state``."""
    parts = []
    for o in outcomes:
        extra = [x for x in (o.label if o.label != state else "", o.detail) if x]
        parts.append(str(getattr(o, name)) + (f" ({'; '.join(extra)})" if extra else ""))
    return ", ".join(parts)


def _node_status(result: NodeResult, led, root: Optional[str] = None) -> None:
    import patchkit

    rows = patchkit.status(ledger=led, root=root)
    result.files = [st.to_json() for st in rows]
    result.recipe = ",".join(sorted({rid for f in result.files for rid in f["recipes"]}))
    states = sorted({f["state"] for f in result.files})
    result.state = ", ".join(states) if states else NodeState.NOTHING_APPLIED
    result.message = f"{len(rows)} file(s)" if rows else ""


_OPS = {"plan": _node_plan, "apply": _node_apply, "rollback": _node_rollback,
        "revert": _node_revert, "status": _node_status}
