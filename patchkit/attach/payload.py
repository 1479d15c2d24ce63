"""What goes into the job: the recipe planned as ``diff`` plans it, made into the agent's request, and the private
folder it travels in.

:func:`settings` loads the recipe with a window of exactly ``--steps`` steps from the first call of the
instrumented code (its schedule replaced, as data, by the steps ``0..N-1``; a schedule of the user's own is
refused, since the window starts at the attach).  :func:`request` plans it here, with the engine (:func:`patchkit.state.planning.plan`):
each module's instrumented text, the sha256 of the file it was made from, and the functions its points are
in.  A file that has the recipe's lines already (applied) is refused.  A point that decorates its function
(``on_exit``, a range around the method) cannot be added by swapping code: its target travels apart, with the
text of the decorators the engine put above its ``def`` (:func:`decorators`), which the job puts where it holds
the function (:mod:`patchkit.runtime.attach.decorate`); a nested function or a property's is refused here.

:func:`folder` writes the request into a new private folder (``patchkit-attach-<pid>-*`` under the temporary
folder, 0700, or 0711 when root attaches to another user's job): ``request-<id>.json`` (0600, owned by the
job's user, who must read it; its sha256 travels with the code that reads it and is checked first) and
``out/`` (0700, the job's user's), where the agent writes its status.  The folder is removed after use, taken
back first (:mod:`patchkit.attach.sweep`); what the agent writes is read by :mod:`patchkit.attach.channel`.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from patchkit.attach.process import AttachError, Process
from patchkit.core.errors import Location
from patchkit.core.model import MARKER, Schedule, Settings

FORMAT = 1
MAX_STEPS = 1000  # as `patchkit capture`: a profiler keeps every event of its window in memory
DECORATING = ("on_exit", "method")


def settings(recipe: str, overrides: Sequence[str], backend: Optional[str], steps: int) -> Settings:
    """The recipe with a window of ``steps`` steps, counted from the first call of the instrumented code: its
    schedule replaced, as data, by exactly those steps."""
    from patchkit.recipe.load import load

    own = [o for o in overrides if o.partition("=")[0].strip().startswith("schedule.")]
    if own:
        raise AttachError(f"{own[0]}: attach records the next --steps steps from the moment it gets in; a schedule "
                          "of your own does not apply", Location("<command line>"), "drop the schedule.* settings and "
                          "give --steps N")
    if not 1 <= steps <= MAX_STEPS:
        raise AttachError(f"--steps: attach records 1 to {MAX_STEPS} steps", Location("<command line>"),
                          "ask for a few steps: the profiler keeps every event of the window in the job's memory")
    s = load(recipe, list(overrides), backend)
    window = Schedule(steps=tuple(range(steps)), trigger="schedule")  # the recipe's periodic keys go, as defaults
    return s._replace(recipe=s.recipe._replace(schedule=window))


def request(s: Settings, steps: int, root: Optional[str] = None, versions=(False, None)) -> Dict[str, Any]:
    """The agent's request, without what is particular to one process (its id, channel, import folder)."""
    from patchkit.engine.lines import LINES, header_lines
    from patchkit.hook.editfree import module_name
    from patchkit.state.planning import plan

    p = plan(s, root, *versions, scopes_only=True)  # the job swaps the target functions alone
    modules: List[Dict[str, Any]] = []
    for f in p.files:
        if not f.changes or f"# {MARKER}:" in f.text:
            raise AttachError(f"{f.path} has the lines of {s.id} (or another recipe's) already (applied): a job "
                              "started since runs them", Location(str(f.path)),
                              f"ask it with `patchkit capture {s.id}` (applied with schedule.trigger=manual), or "
                              "`patchkit revert` and attach")
        targets = _targets(pt for pt in f.points if pt.at not in DECORATING)
        decorated = _targets(pt for pt in f.points if pt.at in DECORATING)
        name = "__main__" if s.recipe.target.script else module_name(f.relpath)  # a script runs as __main__
        modules.append({"name": name, "file": str(f.path), "relpath": f.relpath,
                        "sha256": hashlib.sha256(f.data).hexdigest(), "instrumented": f.result.text,
                        "targets": [list(t) for t in targets], "live": _live(f, targets),
                        "decorated": [[list(t), decorators(s.id, f, t)] for t in decorated]})
    return {"format": FORMAT, "recipe": s.id, "lines": LINES, "steps": steps, "modules": modules,
            "header": "".join(line + "\n" for line in header_lines(s)),
            "save_path": s.recipe.profiler.save_path, "version": p.installed.shown,
            "version_note": p.version_note, "version_skipped": p.version_skipped}


def _live(f, targets) -> List[list]:
    """For each target, the statements its running call takes from a line trace (:mod:`.livepoints`)."""
    from patchkit.attach.livepoints import triggers

    text = f.data.decode("utf-8", "replace")
    return [[list(t), [list(x) for x in triggers(text, f.result.text, t)]] for t in targets]


def _targets(points) -> List[tuple]:
    return sorted({(pt.cls, pt.method, pt.nested) for pt in points}, key=lambda t: tuple(x or "" for x in t))


def decorators(rid: str, f, target) -> List[List[List[Any]]]:
    """For each definition of a decorated target in the instrumented text (in the file's order, as the job's
    :func:`patchkit.runtime.attach.swap.code_at` finds them), its patchkit decorators as ``[line, expression]``, outermost
    first.  Refused here, before anything is injected: a nested function and a property's."""
    import ast

    from patchkit.engine.lines import RUNTIME

    cls, method, nested = target
    scope = ".".join(n for n in target if n)
    where = Location(str(f.path))
    if nested:
        raise AttachError(f"{rid} decorates {scope}, a nested function: each call of {method} makes a new one, which "
                          "attach cannot decorate", where, "profile it with `patchkit run` or `patchkit apply`, or use "
                          "a point inside the function")
    text = f.result.text
    tree = ast.parse(text)
    owners = list(_defined(tree, cls, (ast.ClassDef,))) if cls else [tree]
    found = []
    for owner in owners:
        for node in _defined(owner, method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [ast.unparse(d) for d in node.decorator_list]
            if any(n in ("property", "cached_property") or n.endswith((".setter", ".getter", ".deleter",
                                                                       ".cached_property")) for n in names):
                raise AttachError(f"{rid} decorates {scope}, a property's function: attach does not put a decorator "
                                  "under a property", where, "profile it with `patchkit run` or `patchkit apply`, "
                                  "or use a point inside it")
            found.append([[d.lineno, ast.get_source_segment(text, d)] for d in node.decorator_list
                          if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute)
                          and isinstance(d.func.value, ast.Name) and d.func.value.id == RUNTIME])
    return found


def _defined(node, name, kinds):
    """The definitions named ``name`` directly in ``node``'s scope (inside if/try/with blocks, not other scopes)."""
    import ast

    for child in ast.iter_child_nodes(node):
        if isinstance(child, kinds) and child.name == name:
            yield child
        elif isinstance(child, (ast.stmt, ast.excepthandler)) and not isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield from _defined(child, name, kinds)


class Folder(NamedTuple):
    """One process's request folder."""

    base: str
    out: str  # the agent's channel: status.json, detach
    request: str
    digest: str  # sha256 of the request's bytes
    id: str


def _owned_by_job(proc: Process) -> bool:
    return os.geteuid() == 0 and proc.uid != 0


def folder(proc: Process, spec: Dict[str, Any], runtime_from: str) -> Folder:
    """The private folder holding the request for ``proc``; removed again on any failure."""
    rid = secrets.token_hex(8)
    base = tempfile.mkdtemp(prefix=f"patchkit-attach-{proc.pid}-")
    try:
        out = os.path.join(base, "out")
        os.mkdir(out, 0o700)
        data = json.dumps(dict(spec, id=rid, pid=proc.pid, channel=out, runtime_from=runtime_from,
                               attacher=os.getpid())).encode("utf-8")
        request = os.path.join(base, f"request-{rid}.json")
        fd = os.open(request, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if _owned_by_job(proc):  # the job's user reads the request and writes its status: nobody else can
                gid = proc.gids[0] if proc.gids else proc.uid
                os.fchown(handle.fileno(), proc.uid, gid)
                os.chown(out, proc.uid, gid)
                os.chmod(base, 0o711)
        return Folder(base, out, request, hashlib.sha256(data).hexdigest(), rid)
    except BaseException:
        from patchkit.attach import sweep

        sweep.remove(base)
        raise


def withdraw(f: Folder) -> None:
    """The request taken away: code still queued in the job finds nothing to run (:func:`patchkit.attach.sweep.withdraw`)."""
    from patchkit.attach import sweep

    sweep.withdraw(f.base)


def remove(f: Folder) -> str:
    """The request folder gone, taken back from the job's user first (:func:`patchkit.attach.sweep.remove`); "" when
    it is, else one line saying what is left.  An agent writing its last status into ``out/`` meanwhile, or the
    job's user filling it, does not keep it."""
    from patchkit.attach import sweep

    return sweep.remove(f.base)
