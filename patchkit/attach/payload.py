"""What goes into the job: the recipe planned as ``diff`` plans it, made into the agent's request, and the private
folder it travels in.

:func:`settings` loads the recipe with a window of exactly ``--steps`` steps from the first call of the
instrumented code (``schedule.steps=[0..N-1]``; a schedule of the user's own is refused, since the window
starts at the attach).  :func:`request` plans it here, with the engine (:func:`patchkit.state.planning.plan`):
each module's instrumented text, the sha256 of the file it was made from, and the functions its points are
in.  A file that has the recipe's lines already (applied) is refused, as is a point that decorates its
function (``on_exit``, a range around the method): a decorator cannot be added by swapping code.

:func:`folder` writes the request into a new private folder (``patchkit-attach-<pid>-*`` under the temporary
folder, 0700, or 0711 when root attaches to another user's job): ``request-<id>.json`` (0600, owned by the
job's user, who must read it; its sha256 travels with the code that reads it and is checked first) and
``out/`` (0700, the job's user's), where the agent writes its status.  The folder is removed after use.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import tempfile
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from patchkit.attach.process import AttachError, Process
from patchkit.core.errors import Location
from patchkit.core.model import MARKER, Settings

FORMAT = 1
MAX_STEPS = 1000  # as `patchkit capture`: a profiler keeps every event of its window in memory
DECORATING = ("on_exit", "method")


def settings(recipe: str, overrides: Sequence[str], backend: Optional[str], steps: int) -> Settings:
    """The recipe with a window of ``steps`` steps, counted from the first call of the instrumented code."""
    from patchkit.recipe.load import load

    own = [o for o in overrides if o.partition("=")[0].strip().startswith("schedule.")]
    if own:
        raise AttachError(f"{own[0]}: attach records the next --steps steps from the moment it gets in; a schedule "
                          "of your own does not apply", Location("<command line>"), "drop the schedule.* settings and "
                          "give --steps N")
    if not 1 <= steps <= MAX_STEPS:
        raise AttachError(f"--steps: attach records 1 to {MAX_STEPS} steps", Location("<command line>"),
                          "ask for a few steps: the profiler keeps every event of the window in the job's memory")
    window = [f"schedule.steps={list(range(steps))}", "schedule.trigger=schedule"]
    return load(recipe, list(overrides) + window, backend)


def request(s: Settings, steps: int, root: Optional[str] = None, versions=(False, None)) -> Dict[str, Any]:
    """The agent's request, without what is particular to one process (its id, channel, import folder)."""
    from patchkit.engine.lines import LINES, header_lines
    from patchkit.hook.editfree import module_name
    from patchkit.state.planning import plan

    p = plan(s, root, *versions)
    modules: List[Dict[str, Any]] = []
    for f in p.files:
        if not f.changes or f"# {MARKER}:" in f.text:
            raise AttachError(f"{f.path} has the lines of {s.id} (or another recipe's) already (applied): a job "
                              "started since runs them", Location(str(f.path)),
                              f"ask it with `patchkit capture {s.id}` (applied with schedule.trigger=manual), or "
                              "`patchkit revert` and attach")
        decorating = [pt for pt in f.points if pt.at in DECORATING]
        if decorating:
            pt = decorating[0]
            raise AttachError(f"{s.id} decorates {pt.scope} (at: {pt.at}): a decorator cannot be added to a running "
                              "job by swapping code", Location(str(f.path)),
                              "profile it with `patchkit run` or `patchkit apply`, or use a point inside the method")
        targets = sorted({(pt.cls, pt.method, pt.nested) for pt in f.points}, key=lambda t: tuple(x or "" for x in t))
        modules.append({"name": module_name(f.relpath), "file": str(f.path), "relpath": f.relpath,
                        "sha256": hashlib.sha256(f.data).hexdigest(), "instrumented": f.result.text,
                        "targets": [list(t) for t in targets]})
    return {"format": FORMAT, "recipe": s.id, "lines": LINES, "steps": steps, "modules": modules,
            "header": "".join(line + "\n" for line in header_lines(s)),
            "save_path": s.recipe.profiler.save_path, "version": p.installed.shown,
            "version_note": p.version_note, "version_skipped": p.version_skipped}


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
        shutil.rmtree(base, ignore_errors=True)
        raise


def withdraw(f: Folder) -> None:
    """The request taken away: code still queued in the job finds nothing to run."""
    for name in os.listdir(f.base):
        if name != "out":
            try:
                os.unlink(os.path.join(f.base, name))
            except OSError:
                pass


def remove(f: Folder) -> None:
    shutil.rmtree(f.base, ignore_errors=True)
