"""The same patchkit operation on every alive node of a Ray cluster.

verl trains on Ray clusters where every node has its own Python environment,
so a patch made on the head node alone profiles nothing on the workers.  Each
function here runs one task per alive node, pinned to it with Ray's
node-affinity scheduling (``soft=False``), and the task calls the same
:mod:`patchkit.api` function there.  Only plain data travels: the recipe id
(or a recipe file path that must exist on every node), the ``KEY=VALUE``
overrides and the backend; each node loads the recipe, reads its own
``PATCHKIT_ROOT`` and ``PATCHKIT_HOME`` and resolves its own targets.

``apply`` is all or nothing across the cluster: it first plans on every node
(nothing is written if any node cannot apply), then applies everywhere, and
if a node still fails it puts the nodes that changed something back as they
were (reverted, or re-applied with their earlier settings).

Ray is optional (``pip install "patchkit-profiler[ray]"``); it is imported only inside
these functions.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

from .errors import PatchkitError

INSTALL_HINT = ('pip install "patchkit-profiler[ray]" (Ray 2.9 or later; the same build here and in every node\'s '
                'environment: a wheel built from the checkout, or a path every node shares)')
CHANGED = ("patched", "updated")


def timeout() -> float:
    """Seconds to wait for every node's answer (``PATCHKIT_RAY_TIMEOUT``, default 300)."""
    return float(os.environ.get("PATCHKIT_RAY_TIMEOUT", "300") or 300)


class ClusterError(PatchkitError):
    """Ray is missing or unreachable, or the operation failed on some node."""

    title = "cluster"


@dataclass
class NodeResult:
    """What one node did.  ``state`` is ``failed`` (with the reason in ``message``) when ``ok`` is false."""

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

    @property
    def node(self) -> str:
        return f"{self.node_id[:12]} ({self.ip})"


# ---------------------------------------------------------------- on each node

def _on_node(op: str, args: Dict[str, Any]) -> Dict[str, Any]:
    """Runs inside a Ray worker on one node: plain data in, plain data out, never raises."""
    import ray

    from .ledger import Ledger, home

    ctx = ray.get_runtime_context()
    result = NodeResult(node_id=ctx.get_node_id(), ip=ray.util.get_node_ip_address(),
                        recipe=args.get("label", ""), state="", message="", home=str(home()))
    led = Ledger()  # the node's own PATCHKIT_HOME
    try:
        _OPS[op](result, led, **args.get("kwargs", {}))
    except PatchkitError as exc:
        result.ok, result.state, result.message = False, "failed", exc.render()
    except Exception as exc:  # the node's environment may be anything: report, never crash the driver
        result.ok, result.state, result.message = False, "failed", f"{type(exc).__name__}: {exc}"
    if led.recovered:  # an earlier run on this node was killed half-way and its change was put back
        result.message = "; ".join(["note: " + n for n in led.recovered] + [result.message])
    return asdict(result)


def _root_of(path: Path, relpath: str) -> str:
    text = str(path)
    return text[: -len(relpath)].rstrip(os.sep) if relpath and text.endswith(relpath) else str(path.parent)


def _node_plan(result: NodeResult, led, recipe: str, overrides: Sequence[str], backend: Optional[str],
               root: Optional[str], skip_version_check: bool = False) -> None:
    from . import api

    s = api.load(recipe, overrides, backend)
    plan = api.plan(s, root, skip_version_check)
    changed = sum(f.changes for f in plan.files)
    result.recipe, result.root, result.diff = s.id, str(plan.installed.root), plan.diff()
    result.state = "would change" if changed else "already applied"
    result.message = (f"{changed} file(s) would change, {len(plan.files) - changed} already applied "
                      f"({s.recipe.target.distribution} {plan.installed.shown} in {plan.installed.root})")
    result.version_skipped = plan.version_skipped


def _node_apply(result: NodeResult, led, recipe: str, overrides: Sequence[str], backend: Optional[str],
                root: Optional[str], skip_version_check: bool = False) -> None:
    from . import api

    s = api.load(recipe, overrides, backend)
    result.recipe = s.id
    for st in api.status(ledger=led):  # the recipe's settings before this apply, to go back to if another node fails
        applied = st.record.recipes.get(s.id) if st.record is not None else None
        if applied is not None:
            result.previous[st.record.path] = {"overrides": list(applied.overrides), "recipe_path": applied.recipe_path}
    outcomes = api.apply(s, root, ledger=led, skip_version_check=skip_version_check)
    changed = [o for o in outcomes if o.state in CHANGED]
    result.changed = bool(changed)
    result.root = _root_of(outcomes[0].path, outcomes[0].relpath) if outcomes else ""
    result.state = ("updated" if any(o.state == "updated" for o in changed) else "patched") if changed else "already applied"
    result.message = _files(outcomes, result.state, "relpath") + f" in {result.root}; traces go to {s.recipe.profiler.save_path}"
    if result.changed:
        from .environment import runtime_missing

        missing = runtime_missing(Path(result.root))
        if missing:
            result.message += f"; warning: {missing}"


def _node_rollback(result: NodeResult, led, recipe: str, root: str, previous: Dict[str, Any]) -> None:
    """Undo this node's part of a cluster apply that failed elsewhere."""
    from . import api

    result.recipe = recipe
    earlier = [p for path, p in previous.items() if path.startswith(root.rstrip(os.sep) + os.sep)]
    if earlier:  # it was applied before with other settings: put those back
        s = api.load(earlier[0]["recipe_path"], earlier[0]["overrides"])
        api.apply(s, root, ledger=led, skip_version_check=True)  # it was applied here already: put it back as it was
        result.state, result.message = "rolled back", f"earlier settings of {recipe} put back in {root}"
    else:
        outcomes = api.revert([recipe], False, root, ledger=led)
        result.state = "rolled back"
        result.message = _files(outcomes, "", "relpath") + f" in {root}"


def _node_revert(result: NodeResult, led, recipes: Sequence[str], everything: bool, root: Optional[str],
                 force: bool = False) -> None:
    from . import api

    result.recipe = "all" if everything else ",".join(recipes)
    if not everything:
        base = str(Path(root).expanduser().resolve()).rstrip(os.sep) + os.sep if root else ""
        present = {rid for st in api.status(ledger=led, root=root) if st.path.startswith(base) for rid in st.recipes}
        if not present & set(recipes):
            result.state, result.message = "nothing to revert", "not applied on this node" + (f" under {root}" if root else "")
            return
    outcomes = api.revert(recipes, everything, root, ledger=led, **({"force": True} if force else {}))
    states = {o.state for o in outcomes}
    result.state = (states.pop() if len(states) == 1 else "reverted") if outcomes else "nothing to revert"
    result.message = _files(outcomes, result.state, "path") if outcomes else "nothing was applied"


def _files(outcomes, state: str, name: str) -> str:
    """``a.py (4 lines), b.py (already applied)``: each file, with its state where it differs from ``state``."""
    parts = []
    for o in outcomes:
        extra = [x for x in (o.state if o.state != state else "", o.detail) if x]
        parts.append(str(getattr(o, name)) + (f" ({'; '.join(extra)})" if extra else ""))
    return ", ".join(parts)


def _node_status(result: NodeResult, led, root: Optional[str] = None) -> None:
    from . import api

    rows = api.status(ledger=led, root=root)
    result.files = [st.to_json() for st in rows]
    result.recipe = ",".join(sorted({rid for f in result.files for rid in f["recipes"]}))
    states = sorted({f["state"] for f in result.files})
    result.state = ", ".join(states) if states else "nothing applied"
    result.message = f"{len(rows)} file(s)" if rows else ""


_OPS = {"plan": _node_plan, "apply": _node_apply, "rollback": _node_rollback,
        "revert": _node_revert, "status": _node_status}


# ---------------------------------------------------------------- on the driver

def _import_ray():
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: F401  (Ray >= 2.9)
    except ImportError:
        raise ClusterError("--ray needs Ray, which is not installed in this environment", hint=INSTALL_HINT) from None
    return ray


@contextlib.contextmanager
def connect(address: str) -> Iterator[Any]:
    """Connected to the cluster at ``address`` (``auto``: the one this machine belongs to); yields ``ray``.

    A connection the caller already made is used as it is and left open.
    """
    ray = _import_ray()
    if ray.is_initialized():
        yield ray
        return
    _probe(address)
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:
        raise ClusterError(f"cannot connect to the Ray cluster at {address}: {exc}",
                           hint="start it (`ray start --head`) or pass its address as shown by `ray status`; "
                                "`--ray auto` finds a cluster this machine is part of") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def _probe(address: str, seconds: float = 10.0) -> None:
    """Fail fast on a HOST:PORT nobody listens on: ray.init would retry it for many minutes."""
    import socket

    if "://" in address or ":" not in address:
        return  # auto, ray://... (Ray Client has its own timeout), a bare name Ray resolves itself
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=seconds).close()
    except OSError as exc:
        raise ClusterError(f"cannot connect to the Ray cluster at {address}: {exc.strerror or exc}",
                           hint="check the address (the head node's GCS address, as `ray status` prints it), "
                                "or use `--ray auto` on a node of the cluster") from None


def alive_nodes(ray) -> List[Dict[str, str]]:
    nodes = [{"node_id": n["NodeID"], "ip": n.get("NodeManagerAddress", "?")} for n in ray.nodes() if n.get("Alive")]
    if not nodes:
        raise ClusterError("the Ray cluster has no alive node", hint="check `ray status`")
    return sorted(nodes, key=lambda n: (n["ip"], n["node_id"]))


def _run(ray, op: str, nodes: List[Dict[str, str]], label: str, kwargs_for) -> List[NodeResult]:
    """One task per node, each pinned to it; collect one result per node, failures included."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(_on_node)
    refs = []
    for n in nodes:
        strategy = NodeAffinitySchedulingStrategy(node_id=n["node_id"], soft=False)
        # num_cpus=0: runs on a head node started with --num-cpus=0 too; no retries: apply must not run twice
        refs.append(task.options(num_cpus=0, max_retries=0, scheduling_strategy=strategy)
                    .remote(op, {"label": label, "kwargs": kwargs_for(n)}))
    limit = timeout()
    _ready, pending = ray.wait(refs, num_returns=len(refs), timeout=limit)
    results = []
    for n, ref in zip(nodes, refs):
        if ref in pending:
            ray.cancel(ref, force=True)
            results.append(NodeResult(n["node_id"], n["ip"], label, "failed",
                                      f"no answer within {limit:g} s (PATCHKIT_RAY_TIMEOUT); "
                                      "check this node with `patchkit status --ray`", ok=False))
            continue
        try:
            data = ray.get(ref)
        except Exception as exc:  # the task could not run there: node died, patchkit missing, ...
            results.append(NodeResult(n["node_id"], n["ip"], label, "failed", _task_failure(exc), ok=False))
            continue
        results.append(NodeResult(**data))
    return results


def _task_failure(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    last = next((ln for ln in reversed(text) if ln.strip()), type(exc).__name__)
    if "No module named 'patchkit'" in str(exc):
        return f"patchkit is not installed in this node's environment ({last.strip()}); {INSTALL_HINT}"
    return f"the task could not run: {type(exc).__name__}: {last.strip()}"


def _root_arg(root: Optional[str]) -> Optional[str]:
    """--root names the same folder on every node: make a relative one absolute here, keep ~ for each node."""
    if root is None or root.startswith("~") or os.path.isabs(root):
        return root
    return os.path.abspath(root)


def _recipe_kwargs(recipe: str, overrides: Sequence[str], backend: Optional[str], root: Optional[str],
                   skip_version_check: bool = False):
    kwargs = {"recipe": recipe, "overrides": list(overrides), "backend": backend, "root": _root_arg(root)}
    if skip_version_check:  # only when asked: a node with an older patchkit then fails on it rather than checking
        kwargs["skip_version_check"] = True
    return kwargs


def plan(address: str, recipe: str, overrides: Sequence[str] = (), backend: Optional[str] = None,
         root: Optional[str] = None, skip_version_check: bool = False) -> List[NodeResult]:
    """``api.plan`` on every node: what apply would change there (``.diff``); writes nothing."""
    kwargs = _recipe_kwargs(recipe, overrides, backend, root, skip_version_check)
    with connect(address) as ray:
        return _run(ray, "plan", alive_nodes(ray), recipe, lambda n: kwargs)


diff = plan


def apply(address: str, recipe: str, overrides: Sequence[str] = (), backend: Optional[str] = None,
          root: Optional[str] = None, skip_version_check: bool = False) -> List[NodeResult]:
    """Apply on every node, or on none: plan everywhere first, then apply, and undo it where it worked if a node fails.

    The failing nodes come back with ``ok`` false and their reason; the others
    say ``not applied`` (the plan failed elsewhere), ``rolled back``, or
    ``left as it was`` (nothing had changed there).
    """
    kwargs = _recipe_kwargs(recipe, overrides, backend, root, skip_version_check)
    with connect(address) as ray:
        nodes = alive_nodes(ray)
        planned = _run(ray, "plan", nodes, recipe, lambda n: kwargs)
        if not all(r.ok for r in planned):
            for r in planned:
                if r.ok:
                    r.state, r.message = "not applied", "another node cannot apply; nothing was written here"
            return planned
        applied = _run(ray, "apply", nodes, recipe, lambda n: kwargs)
        skipped = {r.node_id: r.version_skipped for r in planned}
        for r in applied:
            r.version_skipped = r.version_skipped or skipped.get(r.node_id, "")
        if all(r.ok for r in applied):
            return applied
        undo = [r for r in applied if r.ok and r.changed]
        by_id = {r.node_id: r for r in undo}
        rolled = _run(ray, "rollback", [n for n in nodes if n["node_id"] in by_id], recipe,
                      lambda n: {"recipe": by_id[n["node_id"]].recipe, "root": by_id[n["node_id"]].root,
                                 "previous": by_id[n["node_id"]].previous}) if undo else []
        for r in rolled:
            if not r.ok:
                r.state = "rollback failed"
        rolled_by_id = {r.node_id: r for r in rolled}
        out = []
        for r in applied:
            if r.node_id in rolled_by_id:
                out.append(rolled_by_id[r.node_id])
            elif r.ok:
                r.state, r.message = "left as it was", f"{r.state} before this command; " + r.message
                out.append(r)
            else:
                out.append(r)
        return out


def revert(address: str, recipes: Sequence[str] = (), everything: bool = False,
           root: Optional[str] = None, force: bool = False) -> List[NodeResult]:
    """``api.revert`` on every node; a node where the recipe is not applied says ``nothing to revert``."""
    if not recipes and not everything:
        raise PatchkitError("say which recipes to revert, or --all", hint="patchkit revert --ray ADDRESS RECIPE... or --all")
    kwargs = {"recipes": list(recipes), "everything": everything, "root": _root_arg(root), "force": force}
    label = "all" if everything else ",".join(recipes)
    with connect(address) as ray:
        return _run(ray, "revert", alive_nodes(ray), label, lambda n: kwargs)


def status(address: str, root: Optional[str] = None) -> List[NodeResult]:
    """``api.status`` on every node: each node's records under its own PATCHKIT_HOME (``.files``), and the
    patchkit lines no record of it explains under ``root`` (default: the node's PATCHKIT_ROOT or environment)."""
    kwargs = {"root": _root_arg(root)}
    with connect(address) as ray:
        return _run(ray, "status", alive_nodes(ray), "", lambda n: kwargs)


# ---------------------------------------------------------------- the command line's --ray

def _echo(message: str, err: bool = False) -> None:
    import click

    click.echo(message, err=err)


def _line(r: NodeResult) -> str:
    message = " ".join(r.message.replace("\n  hint:", "; hint:").split("\n"))
    if r.version_skipped:
        message += f"; version check skipped (--skip-version-check): {r.version_skipped}"
    return f"{r.node}  {r.recipe or '-'}  {r.state}" + (f": {message}" if message else "")


def _fail_if_any(results: List[NodeResult], what: str) -> None:
    failed = [r for r in results if not r.ok]
    if not failed:
        return
    reasons = "; ".join(f"node {r.node_id} ({r.ip}): {r.message.splitlines()[0] if r.message else r.state}"
                        for r in failed)
    raise ClusterError(f"{what} failed on {len(failed)} of {len(results)} node(s): {reasons}",
                       hint="fix that node's environment (see the line for it above), then run the command again")


def apply_command(address: str, recipe: str, overrides: Sequence[str], root: Optional[str],
                  backend: Optional[str], skip_version_check: bool = False) -> None:
    from . import api

    s = api.load(recipe, overrides, backend)  # a bad override fails here, before the cluster is touched
    results = apply(address, recipe, overrides, backend, root, skip_version_check)
    for r in results:
        _echo(_line(r))
    ok = all(r.ok for r in results)
    if ok:
        changed = sum(r.changed for r in results)
        _echo(f"{s.id}: applied on {len(results)} node(s) ({changed} changed); undo with "
              f"`patchkit revert --ray {address} {s.id}`", err=True)
        for note in s.recipe.notes:  # only after a success, like apply without --ray
            _echo(f"note: {note}", err=True)
    if any(r.state == "rollback failed" for r in results):
        what = f"apply {s.id} (and putting back the nodes it changed; see `patchkit status --ray {address}`)"
    else:
        what = f"apply {s.id} (no node keeps a change from this command)"
    _fail_if_any(results, what)


def diff_command(address: str, recipe: str, overrides: Sequence[str], root: Optional[str],
                 backend: Optional[str], output: Optional[str], stat: bool, skip_version_check: bool = False) -> None:
    import sys

    from . import api
    from .diff import colour
    from .diff import stat as diffstat

    api.load(recipe, overrides, backend)
    results = plan(address, recipe, overrides, backend, root, skip_version_check)
    groups: Dict[str, List[NodeResult]] = {}
    for r in results:
        if r.ok and r.diff:
            groups.setdefault(r.diff, []).append(r)
    parts = []
    for text, rs in groups.items():  # nodes with the same patch share it
        head = f"# node(s) {', '.join(r.node for r in rs)}\n"
        if stat:
            parts.append(head + diffstat(_split_diff(text)))
        else:
            parts.append(head + text)
    combined = "".join(parts)
    if output and not stat:
        Path(output).write_text(combined, encoding="utf-8", newline="")
        _echo(f"wrote {output}", err=True)
    elif combined:
        _echo((colour(combined) if sys.stdout.isatty() and not stat else combined).rstrip("\n"))
    for r in results:
        _echo(_line(r), err=True)
    _fail_if_any(results, f"diff {recipe}")


def _split_diff(text: str):
    """``(relpath, patch)`` per file of a unified diff with ``a/``/``b/`` paths."""
    files, current, lines = [], None, []
    for line in text.splitlines(keepends=True):
        if line.startswith("--- a/"):
            if current is not None:
                files.append((current, "".join(lines)))
            current, lines = line[len("--- a/"):].rstrip("\n"), []
        lines.append(line)
    if current is not None:
        files.append((current, "".join(lines)))
    return files


def revert_command(address: str, recipes: Sequence[str], everything: bool, root: Optional[str],
                   force: bool = False) -> None:
    results = revert(address, recipes, everything, root, force)
    for r in results:
        _echo(_line(r))
    _fail_if_any(results, "revert")


def status_command(address: str, as_json: bool, root: Optional[str] = None) -> None:
    import json

    results = status(address, root)
    if as_json:
        _echo(json.dumps({"nodes": [{"node_id": r.node_id, "ip": r.ip, "ok": r.ok, "home": r.home,
                                     "state": r.state, "message": r.message, "files": r.files}
                                    for r in results]}, indent=2))
    else:
        for r in results:
            if not r.ok or not r.files:
                _echo(_line(r))
            for f in r.files:
                warn = "" if f["backup"] == "ok" else "  [no record: no backup]" if f["backup"] is None \
                    else "  [backup missing or corrupted]"
                _echo(f"{r.node}  {','.join(f['recipes'])}  {f['state']}: {f['path']} "
                      f"({f['distribution']} {f['version']}){warn}")
    _fail_if_any(results, "status")
