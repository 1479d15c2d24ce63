"""``patchkit attach --ray ADDRESS --match TEXT --auto``: every node watches its own processes, the step is found
where it is clear, and its recipe comes back to the driver, which then attaches it on every node as ``--ray`` does.

One task pinned to each alive node runs :func:`_here`: the processes whose command line holds TEXT are watched
(:class:`patchkit.attach.auto.Watching`, as on one machine, the driver itself left out), each one's candidates
listed, and the first process whose step is clear has its recipe written there, from its own files, into a
private folder; the node answers with plain data: its lines, and the recipe's text.  Ctrl-C on the driver
cancels the tasks without force: each watcher is asked out, nothing of any job changed.

What a node answers is untrusted (:func:`checked`): bounded text only, and a name that is a recipe id (never a
path).  The recipe a node wrote is taken only as
``attach --auto`` writes one (:func:`taken`): it loads as a recipe, it has exactly one point, a step at the
start of a loop's turn, of a function or after a call, with no guard, no condition and no option, so no node
can hand the others code of its own to run.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

TEXT, LONG, MANY = 300, 64 << 10, 200  # a name, a recipe's text, lines of one node
FOUND, UNCLEAR, NOTHING, FAILED = "found", "no step", "nothing matched", "failed"
AT = ("loop_start", "method_start", "after_call")


def _here(job: Dict[str, Any]) -> Dict[str, Any]:
    """In a Ray worker on one node: its processes watched, its step found, the recipe's text.  Never raises."""
    import ray

    from patchkit.attach import auto, autorecipe
    from patchkit.attach.process import machine, matching

    out: Dict[str, Any] = {"node_id": ray.get_runtime_context().get_node_id(), "state": FAILED, "lines": [],
                           "recipe": "", "name": ""}
    try:
        here = machine()
        found = matching(job["match"], [job["driver"]] if here and job.get("machine") == here else [])
        if not found:
            out.update(state=NOTHING, lines=[f"no process has {job['match']!r} in its command line"])
            return out
        s = auto.Watching([p.pid for p in found], job["seconds"])
        s.prepare(pass_over=True)
        if not auto.watch(s):
            out.update(state=FAILED, lines=["interrupted: each watcher was asked out; nothing changed"])
            return out
        props = auto.found(s)
        index = []
        for p in props:
            i, why = auto.chosen(p, job["pick"])
            index.append(i)
            out["lines"] += auto.listing(p, i, why, s.watches[p.pid])
        props, index = auto.clear_first(props, index)
        if not props or index[0] is None:
            out.update(state=UNCLEAR)
            return out
        with tempfile.TemporaryDirectory(prefix="patchkit-auto-node-") as private:
            c = props[0].found.candidates[index[0]]
            name = job.get("name") or autorecipe.recipe_id(c.qualname, private)  # the id the driver saves it as
            written = autorecipe.write(c, props[0].job, props[0].uid, os.path.join(private, f"{name}.yaml"),
                                       job["backend"] or ("npu" if s.watches[props[0].pid].npu else "torch"))
            out.update(state=FOUND, recipe=written.path.read_text(encoding="utf-8"), name=name)
    except BaseException as exc:  # noqa: BLE001 - the node's environment may be anything: said, never raised
        out.update(state=FAILED, lines=out["lines"] + [f"{type(exc).__name__}: {exc}"])
    return out


def checked(data: Any) -> Dict[str, Any]:
    """A node's answer as bounded text; anything else a failure."""
    if not isinstance(data, dict) or data.get("state") not in (FOUND, UNCLEAR, NOTHING, FAILED):
        return {"state": FAILED, "lines": ["the node answered with something else: check its patchkit"],
                "recipe": "", "name": ""}
    from patchkit.recipe.reader import is_recipe_id

    lines = data.get("lines") if isinstance(data.get("lines"), list) else []
    name = data.get("name")
    return {"state": data["state"], "lines": [ln[:TEXT * 4] for ln in lines[:MANY] if isinstance(ln, str)],
            "recipe": data["recipe"] if isinstance(data.get("recipe"), str) and len(data["recipe"]) <= LONG else "",
            "name": name if isinstance(name, str) and len(name) <= TEXT and is_recipe_id(name) else ""}


def watch_every_node(address: str, job: Dict[str, Any]) -> Tuple[List[Tuple[str, Dict[str, Any]]], bool]:
    """(each alive node's name and answer, in the nodes' order; whether the driver was interrupted)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from patchkit.cluster.ray import alive_nodes, connect

    with connect(address) as ray:
        nodes = alive_nodes(ray)
        task = ray.remote(_here)
        refs = [task.options(name="patchkit attach --auto", num_cpus=0, max_retries=0, scheduling_strategy=(
            NodeAffinitySchedulingStrategy(n["node_id"], soft=False))).remote(job) for n in nodes]
        names = [f"{n['node_id'][:12]} ({n['ip']})" for n in nodes]
        try:
            answers = ray.get(refs)
            stopped = False
        except KeyboardInterrupt:
            for ref in refs:
                ray.cancel(ref, force=False)
            answers, stopped = [{"state": FAILED, "lines": ["interrupted"]}] * len(refs), True
        except Exception as exc:  # noqa: BLE001 - a task that failed: said as that node's
            answers, stopped = [{"state": FAILED, "lines": [f"{type(exc).__name__}: {exc}"]}] * len(refs), False
    return [(name, checked(a)) for name, a in zip(names, answers)], stopped


def taken(text: str, save: str) -> Optional[str]:
    """Why the recipe a node wrote is not taken; None when it is one ``attach --auto`` writes (then it is
    written to ``save``, never over a file there)."""
    from patchkit.core.errors import PatchkitError
    from patchkit.recipe.load import load_recipe

    folder = tempfile.mkdtemp(prefix="patchkit-auto-recipe-")
    path = os.path.join(folder, os.path.basename(save))
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        try:
            settings = load_recipe(Path(path))
        except PatchkitError as exc:
            return f"it does not load: {exc.message}"
        points = settings.recipe.points
        if len(points) != 1 or points[0].at not in AT or points[0].action != "step" or points[0].guard \
                or points[0].when or settings.recipe.roles or settings.recipe.options or settings.recipe.guard:
            return "it is not a recipe attach --auto writes (one step point, no guard, no condition, no option)"
    finally:
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)
    fd = os.open(save, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return None
