"""Recipe files: YAML in, a validated :class:`~patchkit.core.model.Recipe` out.

The format is strict: unknown keys, wrong types and unknown words are errors
that point at ``recipe.yaml:line:col`` and say what to do.  ``KEY=VALUE``
overrides from the command line are applied to the YAML data before it is
validated, so they go through exactly the same checks.

This module reads the recipe as a whole and its target, profiler and
schedule; :mod:`patchkit.recipe.reader` gives typed access to the YAML with
errors at the right line, :mod:`patchkit.recipe.parts` reads options, roles
and examples, :mod:`patchkit.recipe.points` the points, and
:mod:`patchkit.recipe.overrides` applies ``KEY=VALUE``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from patchkit.runtime import backends
from patchkit.core import model as m
from patchkit.recipe import parts
from patchkit.recipe import points as recipe_points
from patchkit.recipe import replicas, script
from patchkit.core import vocabulary as v
from patchkit.core.errors import Location, OverrideError, RecipeError
from patchkit.recipe.respell import respell
from patchkit.recipe.overrides import apply_overrides
from patchkit.recipe.files import read_text, recipe_path  # noqa: F401  (where the command line reads a RECIPE argument)
from patchkit.recipe.reader import Reader, check_relative, did_you_mean, is_identifier, is_recipe_id, kind_of, name_of
from patchkit.recipe.yamlpos import Marks, shorten
from patchkit.recipe.yamlpos import load as load_yaml

FORMAT_KEYS = {
    "id": "the recipe's name: the file name without .yaml",
    "description": "one paragraph: what the recipe captures",
    "target": "what it patches: package, distribution, versions, files; or a script",
    "backend": "the profiler backend: a name registered in patchkit.runtime.backends",
    "profiler": ", ".join(v.PROFILER_KEYS),
    "schedule": ", ".join(v.SCHEDULE_KEYS),
    "options": "named choices set as name=value on the command line",
    "roles": "role name -> expression telling that role apart at run time",
    "guard": "an expression that must hold for a step to count",
    "points": "where the start and step calls go",
    "notes": "known conflicts, printed by show and apply",
    "examples": "before/after sources the tests and `patchkit test` run",
}
REQUIRED = ("id", "description", "target", "points")
TARGET_KEYS = ("package", "distribution", "versions", "files", "instead", "tags", "excluded", "script")
DISTRIBUTION_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,198}[A-Za-z0-9])?")  # PEP 508, at most 200 characters


# ---------------------------------------------------------------- loading

def load_recipe(path: Path, overrides: Sequence[str] = (), check_id: bool = True) -> m.Settings:
    """Read, override and validate one recipe file."""
    text = read_text(path)
    data, marks = load_yaml(text, str(path))
    return parse_recipe(data, marks, str(path), overrides, expected_id=path.stem if check_id else None)


def parse_recipe(data: Any, marks: Marks, path: str, overrides: Sequence[str] = (),
                 expected_id: Optional[str] = None) -> m.Settings:
    if data is None:
        raise RecipeError("the recipe is empty", Location(path), "a recipe is a YAML mapping; see README.md")
    if not isinstance(data, dict):
        raise RecipeError(f"a recipe must be a YAML mapping, not {kind_of(data)}", Location(path, 1, 1),
                          "start the file with `id: <name>`; see the recipe format in README.md")
    options_data = data.get("options")
    original = data
    data, overridden, chosen = apply_overrides(data, overrides, options_data)
    r = respell(Reader(data, marks, path, overridden))  # other tools' spellings become patchkit's names
    data, overridden = r.data, r.overridden
    r.mapping((), FORMAT_KEYS, REQUIRED)

    rid = r.name(("id",), "id")
    if not is_recipe_id(rid):
        raise r.fail(("id",), f"id {rid!r} is not a valid recipe id",
                     "use lower-case letters, digits, '-', '.' and '_' (e.g. verl-fsdp-update)")
    if expected_id is not None and rid != expected_id:
        raise r.fail(("id",), f"id {rid!r} does not match the file name {expected_id + '.yaml'!r}",
                     f"set `id: {expected_id}` or rename the file to {rid}.yaml")
    description = r.string(("description",))

    target = _target(r)
    backend = _backend(r) if "backend" in data else backends.DEFAULT
    profiler = _profiler(r) if "profiler" in data else m.Profiler(save_path=default_save_path(rid))
    replicas.check(r, target, profiler)
    schedule = _schedule(r) if "schedule" in data else m.Schedule()
    options = parts.options(r) if "options" in data else ()
    roles = parts.roles(r, options) if "roles" in data else ()
    guard = r.expression(("guard",)) if "guard" in data else None
    points = recipe_points.points(r, options)
    script.check_points(r, target, points)
    notes = tuple(r.strings(("notes",))) if "notes" in data else ()
    examples = parts.examples(r, options) if "examples" in data else ()

    choices = []
    for option in options:
        value = chosen.get(option.name, option.default)
        if value not in option.choices:
            raise OverrideError(f"{option.name}={shorten(value)}: not one of {', '.join(option.choices)}",
                                Location("<command line>"),
                                did_you_mean(value, option.choices, option.name + "=")
                                + f"use {option.name}=" + "|".join(option.choices))
        choices.append((option.name, value))

    recipe = m.Recipe(id=rid, description=description.strip(), target=target, backend=backend,
                      profiler=profiler, schedule=schedule, options=options, roles=roles, guard=guard,
                      points=points, notes=notes, examples=examples, path=path, warnings=tuple(r.warnings))
    settings = m.Settings(recipe=recipe, choices=tuple(choices), overrides=tuple(overrides))
    if not settings.active_points():
        raise RecipeError("no point is in use with the chosen options " + str(dict(choices)), Location(path),
                          "give at least one point a `when:` that matches, or none at all")
    runtime = settings.runtime_settings()
    for problem in backends.validate(runtime):  # what the backend itself checks (no torch import)
        blamed = _blamed_overrides(problem, runtime, _spelt_as_patchkit(original, marks, path), overridden, rid)
        if blamed:
            raise OverrideError(f"{' '.join(blamed)}: {problem}", Location("<command line>"),
                                "change the value on the command line, or leave it out to keep the recipe's")
        raise r.fail(("profiler",) if "profiler" in data else (), problem,
                     "change the value in the recipe or override it, e.g. profiler.save_path=./outputs/x")
    return settings


def _spelt_as_patchkit(original: Any, marks: Marks, path: str) -> Any:
    """The recipe as written (no override) in patchkit's names, or as written where an override fixes it."""
    try:
        return respell(Reader(original, marks, path, {})).data
    except RecipeError:
        return original


def _blamed_overrides(problem: str, runtime: Dict[str, Any], original: Mapping[str, Any],
                      overridden: Mapping[Tuple[Any, ...], str], rid: str) -> List[str]:
    """The overrides (as typed) without which the backend would not report ``problem``."""
    blamed = []
    for keys, text in overridden.items():
        name = keys[-1]
        if name not in runtime:
            continue
        section = original.get(keys[0]) if len(keys) == 2 else original
        default = default_save_path(rid) if name == "save_path" else backends.DEFAULTS[name]
        own = section.get(name, default) if isinstance(section, dict) else default
        if problem not in backends.validate(dict(runtime, **{name: own})):
            blamed.append(text)
    return blamed


def _backend(r: Reader) -> str:
    """A registered backend's name, whose module imports."""
    name = r.word(("backend",), backends.names())
    try:
        backends.get(name)  # a backend module imports only the standard library (see patchkit.runtime.backends)
    except (ImportError, TypeError) as exc:
        raise r.fail(("backend",), f"backend {name!r} cannot be used: {exc}",
                     "install what provides its module, or pick another: " + ", ".join(backends.names())) from None
    return name


def _target(r: Reader) -> m.Target:
    t = r.mapping(("target",), TARGET_KEYS)
    if "script" in t:
        return script.target(r, t)
    r.mapping(("target",), TARGET_KEYS, ("package", "files"))
    package = r.name(("target", "package"), "package")
    if not is_identifier(package):
        raise r.fail(("target", "package"), f"package {package!r} is not a top-level import name",
                     "write the name you would `import`, e.g. vllm_ascend")
    distribution = r.name(("target", "distribution"), "distribution") if "distribution" in t else package
    if "distribution" in t and not DISTRIBUTION_NAME.fullmatch(distribution):
        raise r.fail(("target", "distribution"), f"distribution {distribution!r} is not a distribution name",
                     "write the name pip installs, e.g. vllm-ascend (letters, digits, '.', '_' and '-')")
    versions = _specifier(r, ("target", "versions")) if "versions" in t else ""
    excluded, reason = _excluded(r) if "excluded" in t else ("", "")
    files = r.strings(("target", "files"))
    for i, f in enumerate(files):
        check_relative(r, ("target", "files", i), f)
    instead = r.name(("target", "instead"), "instead") if "instead" in t else ""
    if instead and not is_recipe_id(instead):
        raise r.fail(("target", "instead"), f"instead {instead!r} is not a recipe id", "name the recipe to use outside this range")
    tags = tuple(r.strings(("target", "tags"))) if "tags" in t else ()
    return m.Target(package=package, distribution=distribution, versions=versions, files=tuple(files), instead=instead,
                    tags=tags, excluded=excluded, excluded_reason=reason)


def _specifier(r: Reader, here: Tuple[Any, ...]) -> str:
    """A PEP 440 version specifier patchkit can match on, or an error at its line and column."""
    from patchkit.recipe.versions import check as check_versions

    text = r.string(here)
    try:
        check_versions(text)
    except ValueError as exc:
        raise r.fail(here, f"not a PEP 440 version specifier: {text!r} ({exc})",
                     "write e.g. \">=0.4,<=0.7.1\"") from None
    return text


def _excluded(r: Reader) -> Tuple[str, str]:
    """``target.excluded``: a specifier, or ``{versions: SPEC, reason: TEXT}``; the reason is said with the refusal."""
    here = ("target", "excluded")
    if not isinstance(r.get(here), dict):
        return _specifier(r, here), ""
    r.mapping(here, ("versions", "reason"), ("versions", "reason"))
    return _specifier(r, here + ("versions",)), r.string(here + ("reason",))


def default_save_path(rid: str) -> str:
    """Where a recipe's traces go when it says nothing: a folder of its own."""
    return f"{v.DEFAULTS['save_path']}/{rid}"


def _profiler(r: Reader) -> m.Profiler:
    p = r.mapping(("profiler",), v.PROFILER_KEYS)
    values = {k: _setting(r, ("profiler", k), v.SETTING[k]) for k in p}
    values.setdefault("save_path", default_save_path(r.data["id"]))
    return m.Profiler(**values)


def _schedule(r: Reader) -> m.Schedule:
    s = r.mapping(("schedule",), v.SCHEDULE_KEYS)
    typed = {k: s[k] for k in ("steps", "trigger") if ("schedule", k) in r.overridden and k in s}
    mine = [k for k in s if ("schedule", k) not in r.overridden]  # the recipe's own keys
    if "steps" in typed and typed["steps"] != [] or typed.get("trigger") == "manual":
        # a list of steps, or the manual trigger, on the command line replaces the recipe's periodic schedule
        # (and its steps); steps=[] and trigger=schedule, the periodic schedule, keep the recipe's wait, active...
        mine = [k for k in mine if k not in v.PERIODIC + ("steps",)]
    keys = [k for k in s if k in mine or ("schedule", k) in r.overridden]
    values = {k: _setting(r, ("schedule", k), v.SETTING[k]) for k in keys}
    if values.get("trigger") == "manual":
        both = [k for k in v.PERIODIC + ("steps",) if k in values]
        if both:
            raise r.fail(("schedule", both[0]), f"schedule.trigger manual records the steps `patchkit capture` asks "
                         f"for; it does not combine with {', '.join('schedule.' + k for k in both)}",
                         "keep trigger: manual, or a schedule of your own")
    both = [k for k in v.PERIODIC if k in values] if values.get("steps") else []
    if both:
        raise r.fail(("schedule", both[0]), f"schedule.steps picks the recorded steps itself; it does not combine "
                     f"with {', '.join('schedule.' + k for k in both)}",
                     "keep schedule.steps, or the periodic schedule (wait, warmup, active, repeat, skip_first)")
    return m.Schedule(**values)


def _setting(r: Reader, here: Tuple[Any, ...], setting: v.Setting) -> Any:
    """One profiler or schedule value, read as its kind in the vocabulary says."""
    kind = setting.kind
    if kind == v.WORD:
        return r.word(here, setting.values)
    if kind == v.WORDS:
        return tuple(r.strings(here, setting.values, nonempty=bool(setting.default)))
    if kind == v.THRESHOLD:
        value = r.get(here)
        if value is None or value == "none":
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise r.fail(here, f"{name_of(here)} must be a number of milliseconds (0 or more) or none, not {value!r}",
                         f"write {setting.name}: 10, or {setting.name}: none")
        return value
    if kind == v.FLAG:
        return r.boolean(here)
    if kind == v.COUNT:
        return r.integer(here, setting.minimum)
    if kind == v.PATH:
        path = r.string(here)
        if "\x00" in path:
            raise r.fail(here, f"{name_of(here)} contains a NUL byte", "use a plain directory path")
        if len(path) > 4096 or any(len(part.encode("utf-8", "surrogatepass")) > 255 for part in path.split("/")):
            raise r.fail(here, f"{name_of(here)} is too long ({len(path)} characters)",
                         "use a real folder: at most 4096 characters, each part of it at most 255 bytes")
        return path
    if kind == v.RANKS:
        value = r.get(here)
        if value == "all":
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, list) or not value or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value
        ):
            raise r.fail(here, f"{name_of(here)} must be `all` or a list of ranks, not {value!r}",
                         f"write {setting.name}: all, or {setting.name}: [0, 1]")
        return tuple(sorted(set(value)))
    if kind == v.STEPS:
        value = r.get(here)
        value = [value] if isinstance(value, int) and not isinstance(value, bool) else value
        if not isinstance(value, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                                  for n in value):
            raise r.fail(here, f"{name_of(here)} must be a list of step numbers (0 or more), not {value!r}",
                         f"write {setting.name}: [1, 2, 5]")
        return tuple(sorted(set(value)))
    raise ValueError(f"{setting.key}: no reader for the kind {kind!r}")  # pragma: no cover


# ---------------------------------------------------------------- the built-in recipes

def load(ref: str, overrides: Sequence[str] = (), backend: Optional[str] = None) -> m.Settings:
    extra = [f"backend={backend}"] if backend else []
    return load_recipe(recipe_path(ref), list(overrides) + extra)


def all_recipes() -> List[m.Settings]:
    from patchkit.recipe.catalogue import builtin_ids

    return [load(rid) for rid in builtin_ids()]
