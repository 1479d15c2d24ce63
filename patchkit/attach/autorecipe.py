"""The step ``attach --auto`` found, written as a recipe: read from the job's own files, as a stranger's.

A candidate names a file by the job's word (a code object's ``co_filename``: a job may say any path).  Only a
file the job can import is taken: the script it runs (``__main__``), or a module under one of the folders of its
``sys.path`` as :mod:`patchkit.attach.jobpath` rebuilds it from ``/proc`` (never from what the job says).  The
file, the ``__init__.py`` of each package above it and the distribution's metadata are read through
:func:`patchkit.attach.jobfiles.read` (no link, a regular file of root's or the job's user, not writable by every
user, bounded) into a private folder, and ``patchkit new`` writes the recipe from that copy
(:func:`patchkit.authoring.newrecipe.write_new`): a loop's ``loop_start`` point or the function's
``method_start``, each a step, so a span is one turn of the loop or one call of the function.  The recipe names
the job's package and file (or its script), so ``attach``, ``run`` and ``apply`` take it as it is.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import List, NamedTuple, Optional, Tuple

from patchkit.attach import jobfiles
from patchkit.attach.jobpath import JobPath
from patchkit.attach.process import AttachError
from patchkit.core.confined import within
from patchkit.core.errors import Location

MAX_INITS = 16


class Place(NamedTuple):
    """Where a file of the job's is, as a recipe names it."""

    folder: str  # the folder of the job's path that holds it (the script's folder for a script)
    relpath: str  # below it
    package: str  # the top-level package ("" for the job's script)


def place(job: JobPath, file: str) -> Optional[Place]:
    """The job's script, or a module inside a package under a folder of the job's path; None for anything else."""
    if not os.path.isabs(file) or not file.endswith(".py"):
        return None
    real = os.path.realpath(file)
    if job.script and real == os.path.realpath(job.script):
        return Place(os.path.dirname(real), os.path.basename(real), "")
    for entry in job.entries:
        top = os.path.realpath(entry)
        if within(real, top) and real != top:
            rel = os.path.relpath(real, top)
            parts = rel.split(os.sep)
            if len(parts) > 1 and all(p.isidentifier() for p in parts[:-1]):
                return Place(entry, rel.replace(os.sep, "/"), parts[0])
    return None


def source(job: JobPath, uid: int, file: str) -> Optional[str]:
    """The text of the job's file ``file`` when :func:`place` takes it and it passes the checks; else None."""
    found = place(job, file)
    if found is None:
        return None
    try:
        got = jobfiles.read(found.folder, found.relpath, uid)
    except AttachError:
        return None
    try:
        return got[1].decode("utf-8") if got else None
    except UnicodeDecodeError:
        return None


def qualname_at(text: str, firstlineno: int, said: str) -> str:
    """The qualified name of the function defined at ``firstlineno`` (its ``def`` or first decorator), as the
    file says it (Python 3.10's code objects know only their own name); ``said`` when none is there."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return said
    found: List[str] = []

    def walk(node, outer: Tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = [child.lineno] + [d.lineno for d in child.decorator_list]
                if firstlineno in lines and child.name == said.rsplit(".", 1)[-1]:
                    found.append(".".join(outer + (child.name,)))
                walk(child, outer + (child.name, "<locals>"))
            elif isinstance(child, ast.ClassDef):
                walk(child, outer + (child.name,))
            else:
                walk(child, outer)

    walk(tree, ())
    return found[0] if found else said


def recipe_name(qualname: str) -> str:
    """What a recipe's target names: ``Class.method``, ``function``, ``function.inner``."""
    return qualname.replace(".<locals>", "")


def recipe_id(qualname: str, folder: str) -> str:
    """``auto-<function>``, numbered past the files already in ``folder``."""
    words = re.sub(r"[^a-z0-9]+", "-", recipe_name(qualname).replace(".", "-").lower()).strip("-")[:60] or "step"
    base = f"auto-{words}"
    name, n = base, 1
    while os.path.lexists(os.path.join(folder, f"{name}.yaml")):
        n += 1
        name = f"{base}-{n}"
    return name


def copy_in(job: JobPath, uid: int, file: str, into: str) -> Tuple[Place, Path]:
    """The job's file, the ``__init__.py`` above it and its distribution's metadata, copied into ``into``;
    (its place, the copy).  :class:`AttachError` when the file is not one :func:`place` takes, or fails a check."""
    found = place(job, file)
    if found is None:
        raise AttachError(f"{file} is not the job's script nor a module on its sys.path: attach writes no recipe "
                          "for a file the job did not import", Location(file), "pick another candidate (--pick K)")
    wanted = [found.relpath]
    parts = found.relpath.split("/")[:-1]
    wanted += [f"{'/'.join(parts[:i])}/__init__.py" for i in range(1, len(parts) + 1)][:MAX_INITS]
    if found.package:
        wanted += jobfiles.metadata(found.folder, found.package)
    for i, rel in enumerate(wanted):
        got = jobfiles.read(found.folder, rel, uid)
        if got is None:
            if i == 0:
                raise AttachError(f"{file} is gone", Location(file), "attach again")
            continue
        dest = Path(into, rel)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(got[1])
    return found, Path(into, found.relpath)


AT = {"loop": ("loop", "loop_start"), "call": ("call", "after_call")}  # a candidate's kind -> its line's, the point


def point(target: str, candidate) -> str:
    """The point that makes each repetition of ``candidate`` one step, as ``patchkit points`` spells it: at the
    start of each turn of its loop (``loop_start``, with the selector ``points`` offers for that loop), right
    after its call (``after_call``), or at the start of its function (``method_start``)."""
    from patchkit.authoring.funcref import read_outline, resolve
    from patchkit.authoring.spec import spell

    if candidate.kind not in AT:
        return "at: method_start"
    kind, at = AT[candidate.kind]
    where = Location(candidate.file, candidate.line)
    for entry in read_outline(resolve(target))[0].entries:
        if entry.line == candidate.line and entry.kind == kind:
            fit = [p for p in entry.points if p.get("at") == at]
            if fit:
                return spell(fit[0])
            raise AttachError(f"the {kind} at line {candidate.line} of {candidate.file} takes no {at} point: "
                              f"{entry.note or 'no selector names it alone'}", where, "pick another candidate "
                              "(--pick K)")
    raise AttachError(f"no {kind} at line {candidate.line} of {candidate.file} in {candidate.qualname}", where,
                      "pick another candidate (--pick K)")


def write(candidate, job: JobPath, uid: int, output: Optional[str], backend: Optional[str]):
    """The recipe for ``candidate``, written to ``output`` (by default ``./auto-<function>.yaml``, numbered past
    the files there); ``patchkit new``'s :class:`~patchkit.authoring.newrecipe.Written`, and the point."""
    from patchkit.authoring.newrecipe import write_new

    private = tempfile.mkdtemp(prefix="patchkit-auto-")
    try:
        found, copy = copy_in(job, uid, candidate.file, private)
        target = f"{copy}::{recipe_name(candidate.qualname)}"
        rid = Path(output).stem if output else recipe_id(candidate.qualname, ".")
        real_script = Path(os.path.realpath(candidate.file)) if not found.package else None
        return write_new(rid, [f"{target} {point(target, candidate)}"], None, None, output, backend, real_script,
                         "patchkit attach --auto")
    finally:
        shutil.rmtree(private, ignore_errors=True)
