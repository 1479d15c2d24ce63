"""``patchkit new``: a recipe file for points in code no recipe covers, checked before it is written.

Each ``--point`` is ``TARGET`` (a function, :mod:`patchkit.authoring.funcref`)
and the point's keys as ``patchkit points`` spells them
(:mod:`patchkit.authoring.spec`).  The recipe's target comes from where the
functions are (their package, distribution and files; or the script, a
file in no package, which a job runs as ``__main__``), its version range
from the installed version (``==`` it: later ones pass with a note), its settings from the defaults or
from ``--from RECIPE``, and its example from the real function, run
through the engine.  Before the file is written the recipe is read back by
the loader, its example is run, and every point is applied, in memory, to
the real file: a recipe that would not work is not written.  An existing
file is never replaced.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from patchkit.core.errors import AnchorError, Location, PatchkitError, RecipeError, TargetError
from patchkit.core.model import CannotApply, Settings
from patchkit.core.vocabulary import DEFAULTS, SCHEDULE_KEYS, SETTINGS
from patchkit.authoring.backendpick import pick
from patchkit.authoring.scaffold import Draft, render
from patchkit.authoring.funcref import FunctionRef, read_outline, resolve

PROFILER_SHOWN = ("level", "contents", "export_type", "analysis", "save_path", "ranks", "mstx")
PERIODIC = ("wait", "warmup", "active", "repeat", "skip_first")


class Written(NamedTuple):
    path: Path
    ref: FunctionRef
    points: Tuple[Dict[str, Any], ...]
    versions: str
    described: Tuple[str, ...]
    shown: str  # the path as the user would type it next
    root: str = ""  # the --root the next commands need ("" when they find the target without one)


class _Asked(NamedTuple):
    spec: str  # the --point argument as given
    ref: FunctionRef
    point: Dict[str, Any]  # scope keys first, then the point's own
    source: str


def write_new(recipe_id: str, point_specs: Sequence[str], start_from: Optional[str], root: Optional[str],
              output: Optional[str], backend: Optional[str], script_as: Optional[Path] = None,
              by: str = "patchkit new") -> Written:
    """Write the recipe ``recipe_id`` to ``output`` (default ``./ID.yaml``); raise without writing on any problem.
    ``script_as``: the script the recipe names, where the points were read from a copy of it; ``by``: the command
    its first line says wrote it."""
    from patchkit.recipe.reader import is_recipe_id

    if not is_recipe_id(recipe_id):
        raise RecipeError(f"{recipe_id!r} is not a valid recipe id",
                          hint="use lower-case letters, digits, '-', '.' and '_' (e.g. my-logprob)")
    path = Path(output) if output else Path(f"{recipe_id}.yaml")
    if path.stem != recipe_id or path.suffix != ".yaml":
        raise RecipeError(f"a recipe's file name is its id: {path.name} is not {recipe_id}.yaml", Location(str(path)),
                          f"write -o DIR/{recipe_id}.yaml, or choose the id {path.stem}")
    _refuse_existing(path)
    asked = [_asked(spec, root) for spec in point_specs]
    first = asked[0].ref
    others = sorted({_owner(a.ref) for a in asked} - {_owner(first)})
    if others:
        raise RecipeError(f"the points are in {_owner(first)} and {', '.join(others)}; a recipe patches one package "
                          "or one script", hint="write one recipe for each")
    script = _script_path(script_as or first.path, path) if not first.package else ""
    text, settings = _drafted(recipe_id, asked, start_from, backend, script, by)
    _check(text, path)
    _write(path, text)
    version_range = settings.recipe.target.versions
    from patchkit.authoring.spec import spell

    shown = str(path) if path.is_absolute() or os.sep in str(path) else f".{os.sep}{path}"
    return Written(path, first, tuple(a.point for a in asked), version_range,
                   tuple(f"{a.ref.qualname}: {spell(a.point)}" for a in asked), shown,
                   "" if script else _root_needed(first, root))


def _owner(ref: FunctionRef) -> str:
    return f"the package {ref.package}" if ref.package else f"the script {ref.path}"


def _script_path(script: Path, recipe: Path) -> str:
    """The script as the recipe names it: from the recipe file's folder when it is inside it, else absolute."""
    folder = Path(os.path.realpath(recipe.parent if str(recipe.parent) else "."))
    real = Path(os.path.realpath(script))
    return real.relative_to(folder).as_posix() if folder in real.parents else real.as_posix()


def _root_needed(ref: FunctionRef, root: Optional[str]) -> str:
    """The ``--root`` that ``diff`` and ``apply`` need to find the package where ``new`` found it: the one given,
    else the folder above a package that this environment does not hold there (a checkout beside the command)."""
    if root:
        return root
    from patchkit.core.model import Target
    from patchkit.state.targets import locate

    assert ref.installed is not None
    try:
        found = locate(Target(ref.package, ref.distribution, "", ()))
    except PatchkitError:
        found = None
    top, here = ref.installed.root.resolve(), Path.cwd().resolve()
    # the current folder is on sys.path for `python -m patchkit`, not for the `patchkit` command
    if found is not None and found.package_dir.resolve() == ref.installed.package_dir.resolve() and top != here:
        return ""
    return "." if top == here else os.path.relpath(top, here) if here in top.parents else str(top)


def _refuse_existing(path: Path) -> None:
    if path.exists() or path.is_symlink():
        raise RecipeError(f"{path} exists; patchkit new never replaces a file", Location(str(path)),
                          "choose another id or -o FILE, or move the file away first")


def _asked(spec: str, root: Optional[str]) -> _Asked:
    from patchkit.authoring.spec import parse

    target, _, rest = spec.strip().partition(" ")
    if not rest.strip():
        raise RecipeError(f"--point {spec!r} names no point after the target",
                          hint='write --point "TARGET at: ..." as `patchkit points TARGET` prints it')
    ref = resolve(target, root)
    if not ref.package and ref.module:  # a top-level module found by its name: imported, not run as a script
        raise TargetError(f"{ref.path} is the module {ref.module}, in no package: a recipe patches a package's file "
                          "or a script", Location(str(ref.path)),
                          f"if the job runs it (python {ref.path.name}), name it as {ref.path.name}::{ref.qualname}")
    found, source = read_outline(ref)
    point = {**found.scope, **parse(rest)}
    return _Asked(spec, ref, point, source)


def _drafted(recipe_id: str, asked: List[_Asked], start_from: Optional[str], backend: Optional[str], script: str,
             by: str = "patchkit new"):
    """The recipe's text with its example, and its settings, read back by the loader (``script``: the target is
    that script, as the recipe names it)."""
    first = asked[0].ref
    files = list(dict.fromkeys(a.ref.relpath for a in asked))
    _one_file_per_name(asked)
    points = []
    for a in asked:
        extra = {"files": [a.ref.relpath]} if a.ref.relpath != files[0] else {}
        points.append({**a.point, **extra})
    base = _base(start_from)
    version = first.installed.version if first.installed else None
    dist = first.distribution
    what = f"the script {first.path.name}" if script else f"{dist} {version or '(version unknown)'}"
    origin = (f"Written by `{by}` from {what}"
              + (f", starting from the settings of {base.id}" if base else "") + ".")
    draft = Draft(
        id=recipe_id,
        description="",
        package=first.package, distribution=dist,
        versions=f"=={version}" if version else "",
        versions_note=(f"proven on the version installed where this was written ({dist} {version}); later releases "
                       "are patched when every point fits, with a note: check them with `patchkit diff --root` before "
                       "widening it" if version else
                       f"no versions: {dist} has no version here (no installed metadata, none declared in the tree), "
                       "so any version is patched where every point fits"),
        files=(files[0],), backend=backend or (base.recipe.backend if base else pick(first).backend),
        profiler=_profiler(recipe_id, base), schedule=_schedule(base), points=tuple(points),
        notes=base.recipe.notes if base else (), origin=origin, script=script)
    settings = _fits(_load(render(draft)[0], draft, asked), asked)
    from patchkit.recipe.kinds import describe

    draft = draft._replace(description="; ".join(describe(p) for p in settings.recipe.points)
                           + (f" ({what})." if script else f" ({dist}: {', '.join(files)})."))
    examples = []
    for a in asked:
        cls, function = (a.point.get("class"), a.point.get("method") or a.point.get("function"))
        name = f"{a.ref.qualname} as in {what if script else dist + ' ' + (version or '')}".rstrip()
        if any(e[0] == name for e in examples):
            continue
        from patchkit.authoring.excerpt import example

        mine = [p for p in settings.active_points() if p.cls == cls and p.method == function]
        try:
            before, after = example(a.source, settings, cls, function, mine)
        except (ValueError, LookupError) as exc:
            raise AnchorError(f"--point {a.spec!r}: {exc}", Location(str(a.ref.path)),
                              "`patchkit points` lists the places of the function") from None
        examples.append((name, before, after))
    draft = draft._replace(examples=tuple(examples))
    text = render(draft)[0]
    return text, _load(text, draft, asked)


def _one_file_per_name(asked: List[_Asked]) -> None:
    """A recipe's example holds the points whose class (or function) it defines: one name, one file."""
    where: Dict[str, str] = {}
    for a in asked:
        name = a.point.get("class") or a.point.get("function")
        if where.setdefault(name, a.ref.relpath) != a.ref.relpath:
            raise RecipeError(f"the points name {name} in {where[name]} and in {a.ref.relpath}: a recipe's examples "
                              "cannot tell two of one name apart", hint="write one recipe for each of the two files")


def _base(start_from: Optional[str]) -> Optional[Settings]:
    if not start_from:
        return None
    from patchkit.recipe.load import load

    return load(start_from)


def _profiler(recipe_id: str, base: Optional[Settings]) -> Dict[str, Any]:
    shown = {name: DEFAULTS[name] for name in PROFILER_SHOWN}
    if base is not None:
        given = base.recipe.profiler._asdict()
        shown = {name: given[name] for name in PROFILER_SHOWN}
        shown.update({s.name: given[s.name] for s in SETTINGS if s.section == "profiler"
                      and s.name not in shown and given[s.name] != s.default})
    shown["save_path"] = f"./outputs/patchkit/{recipe_id}"
    return {k: list(v) if isinstance(v, tuple) else v for k, v in shown.items()}


def _schedule(base: Optional[Settings]) -> Dict[str, Any]:
    schedule = base.recipe.schedule._asdict() if base else {k: DEFAULTS[k] for k in SCHEDULE_KEYS}
    if schedule.get("trigger") == "manual":
        return {"trigger": "manual"}
    if schedule.get("steps"):
        return {"steps": list(schedule["steps"])}
    return {k: schedule[k] for k in PERIODIC}


def _load(text: str, draft: Draft, asked: List[_Asked]) -> Settings:
    """The recipe read back by the loader, from a scratch file named as the recipe; an error names the --point."""
    from patchkit.recipe.load import load_recipe

    starts = render(draft)[1]
    with tempfile.TemporaryDirectory(prefix="patchkit-new-") as scratch:
        path = Path(scratch) / f"{draft.id}.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            return load_recipe(path)
        except PatchkitError as exc:
            line = exc.where.line if exc.where is not None and exc.where.path == str(path) else None
            index = max((i for i, start in enumerate(starts) if line is not None and line >= start), default=None)
            whose = f"--point {asked[index].spec!r}: " if index is not None and index < len(asked) else ""
            raise RecipeError(whose + exc.message, hint=exc.hint) from None


def _check(text: str, path: Path) -> None:
    """The recipe as it will be written reads back and its example passes."""
    from patchkit.engine.examples import run_examples
    from patchkit.recipe.load import load_recipe

    with tempfile.TemporaryDirectory(prefix="patchkit-new-") as scratch:
        scratch_path = Path(scratch) / path.name
        scratch_path.write_text(text, encoding="utf-8")
        settings = load_recipe(scratch_path)
        failed = [o for o in run_examples(settings) if not o.ok]
    if failed:  # a bug in patchkit, never the user's: say so
        raise AnchorError(f"internal error: the example written for {failed[0].example.name} fails: "
                          f"{failed[0].message}", hint="please report this with the target file")


def _fits(settings: Settings, asked: List[_Asked]) -> Settings:
    """Every point applied, alone, to the real file; an error names the --point (the scratch recipe is no place)."""
    from patchkit.engine.codemod import transform

    plain = settings.recipe._replace(points=tuple(p._replace(where=None) for p in settings.recipe.points))
    settings = settings._replace(recipe=plain)
    for a, point in zip(asked, plain.points):
        result = transform(a.source, settings, [point], str(a.ref.path))
        if isinstance(result, CannotApply):
            raise AnchorError(f"--point {a.spec!r}: {result.reason}", Location(str(a.ref.path), result.line, result.col),
                              result.hint or "`patchkit points` lists the places of the function and their points")
    return settings


def _write(path: Path, text: str) -> None:
    """Create ``path`` with ``text``, all at once, never over an existing file (a link fails if it is there)."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise RecipeError(f"no folder {folder} to write {path.name} in", Location(str(path)), "create it first")
    try:
        fd, scratch = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(scratch, 0o644)
        try:
            os.link(scratch, path)
        except FileExistsError:
            _refuse_existing(path)
            raise
        except OSError:  # a file system without hard links: create the file, only if it is not there
            _create(path, text)
    finally:
        os.unlink(scratch)


def _create(path: Path, text: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except FileExistsError:
        _refuse_existing(path)
        raise
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _cannot_write(path: Path, exc: OSError) -> RecipeError:
    return RecipeError(f"cannot write {path.name} in {path.parent or '.'}: {exc.strerror}", Location(str(path)),
                       "write it elsewhere with -o DIR/NAME.yaml, or check the folder's permissions")
