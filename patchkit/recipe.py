"""Recipe files: YAML in, a validated :class:`~patchkit.model.Recipe` out.

The format is strict: unknown keys, wrong types and unknown words are errors
that point at ``recipe.yaml:line:col`` and say what to do.  ``KEY=VALUE``
overrides from the command line are applied to the YAML data before it is
validated, so they go through exactly the same checks.
"""

from __future__ import annotations

import ast
import keyword
import os
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import yaml

from . import backends
from . import model as m
from . import replicas
from . import vocabulary as v
from .errors import Location, OverrideError, RecipeError
from .yamlpos import KEY, Marks
from .yamlpos import load as load_yaml

FORMAT_KEYS = {
    "id": "the recipe's name: the file name without .yaml",
    "description": "one paragraph: what the recipe captures",
    "target": "what it patches: package, distribution, versions, files",
    "backend": "the profiler backend: a name registered in patchkit.backends",
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
TARGET_KEYS = ("package", "distribution", "versions", "files", "instead", "tags")
POINT_KEYS = ("class", "method", "function", "nested", "at", "action", "call", "loop", "when", "guard", "count", "files",
              "reason")
LOOP_KEYS = ("iter", "target", "calls", "while")
OPTION_KEYS = ("choices", "default", "help")
EXAMPLE_KEYS = ("name", "options", "before", "after", "unchanged", "reason")

_ID_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_ID_CHARS = _ID_FIRST | frozenset("._-")
OVERRIDABLE = ("backend", "profiler", "schedule")


def is_identifier(name: Any) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def is_recipe_id(name: str) -> bool:
    """Lower-case letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit."""
    return bool(name) and name[0] in _ID_FIRST and _ID_CHARS.issuperset(name)


def is_dotted(name: Any) -> bool:
    """``a.b.c``: ASCII identifiers, no keywords, joined by dots."""
    return isinstance(name, str) and all(
        part.isascii() and part.isidentifier() and not keyword.iskeyword(part) for part in name.split(".")
    )


class _Reader:
    """Typed access to the YAML data, raising errors at the right line."""

    def __init__(self, data: Any, marks: Marks, path: str, overridden: Mapping[Tuple[Any, ...], str]):
        self.data, self.marks, self.path, self.overridden = data, marks, path, overridden

    def where(self, here: Tuple[Any, ...], key: bool = False) -> Location:
        probe = here + (KEY,) if key else here
        while probe and probe not in self.marks:
            probe = probe[:-1]
        line, col = self.marks.get(probe, (None, None))
        return Location(self.path, line, col)

    def fail(self, here: Tuple[Any, ...], message: str, hint: str, key: bool = False) -> RecipeError:
        for n in range(len(here), 0, -1):
            if here[:n] in self.overridden:
                return OverrideError(f"{self.overridden[here[:n]]}: {message}", Location("<command line>"), hint)
        return RecipeError(message, self.where(here, key), hint)

    def get(self, here: Tuple[Any, ...]) -> Any:
        value = self.data
        for part in here:
            value = value[part]
        return value

    def mapping(self, here: Tuple[Any, ...], allowed: Iterable[str], required: Iterable[str] = ()) -> Dict[str, Any]:
        value = self.get(here)
        name = ".".join(map(str, here)) or "the recipe"
        if not isinstance(value, dict):
            raise self.fail(here, f"{name} must be a mapping, not {_kind(value)}",
                            "write it as `key: value` lines indented under its name")
        allowed = tuple(allowed)
        for key in value:
            if key not in allowed:
                raise self.fail(here + (key,), f"unknown key {key!r} in {name}",
                                f"valid keys: {', '.join(allowed)}", key=True)
        for key in required:
            if key not in value:
                raise self.fail(here, f"{name} is missing the required key {key!r}",
                                f"add `{key}:`; see the recipe format in README.md")
        return value

    def string(self, here: Tuple[Any, ...], what: str = "a string") -> str:
        value = self.get(here)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(here, f"{_name(here)} must be {what}, not {_kind(value)}",
                            f"write {_name(here)} as {what}")
        return value

    def integer(self, here: Tuple[Any, ...], minimum: int) -> int:
        value = self.get(here)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(here, f"{_name(here)} must be an integer, not {_kind(value)}",
                            f"write a whole number of at least {minimum}")
        if value < minimum:
            raise self.fail(here, f"{_name(here)} must be at least {minimum}, not {value}",
                            f"use a whole number of at least {minimum}")
        return value

    def boolean(self, here: Tuple[Any, ...]) -> bool:
        value = self.get(here)
        if not isinstance(value, bool):
            raise self.fail(here, f"{_name(here)} must be true or false, not {_kind(value)}",
                            "write true or false")
        return value

    def word(self, here: Tuple[Any, ...], allowed: Sequence[str]) -> str:
        value = self.get(here)
        if not isinstance(value, str) or value not in allowed:
            raise self.fail(here, f"{_name(here)} must be one of {', '.join(allowed)}; got {value!r}",
                            _did_you_mean(value, allowed) + f"pick one of: {', '.join(allowed)}")
        return value

    def strings(self, here: Tuple[Any, ...], allowed: Optional[Sequence[str]] = None, nonempty: bool = True) -> List[str]:
        value = self.get(here)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or (nonempty and not value):
            raise self.fail(here, f"{_name(here)} must be a non-empty list, not {_kind(value)}",
                            "write a list such as [a, b]")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, str) or (allowed is not None and item not in allowed):
                sub = here + (i,) if isinstance(self.get(here), list) else here
                what = f"one of {', '.join(allowed)}" if allowed else "a string"
                raise self.fail(sub, f"{_name(here)} entries must be {what}; got {item!r}",
                                f"use only {what}")
            out.append(item)
        return out

    def expression(self, here: Tuple[Any, ...]) -> str:
        text = self.string(here, "a Python expression")
        return check_expression(text, lambda msg: self.fail(here, msg, "write one Python expression on one line, e.g. `self.actor_optimizer is None`"))


MAX_GUARD_DEPTH = 40  # far beyond any real guard; deep nesting would exhaust the parsers' recursion


def check_expression(text: str, fail) -> str:
    """Parse a guard expression; return it as the one ASCII line that will be inserted."""
    text = text.strip()
    if not text.isascii():
        raise fail(f"a guard must be ASCII (the target file's encoding may not hold other characters): {text!r}; "
                   "write other characters in strings as \\u escapes")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise fail(f"not a valid Python expression: {text!r} ({exc.msg})") from None
    except (RecursionError, MemoryError):
        raise fail(f"the guard is nested too deeply ({len(text)} characters)") from None
    depth = {id(tree): 0}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)):
            raise fail(f"{type(node).__name__.lower()} is not allowed in a guard: {text!r}")
        for child in ast.iter_child_nodes(node):
            depth[id(child)] = depth[id(node)] + 1
            if depth[id(child)] > MAX_GUARD_DEPTH:
                raise fail(f"the guard is nested more than {MAX_GUARD_DEPTH} levels deep: {text[:60]!r}...")
    if any(not (" " <= ch <= "~") for ch in text) or "#" in text:  # tabs, form feeds, newlines, comments
        return ast.unparse(tree)
    return text


def _kind(value: Any) -> str:
    if value is None:
        return "empty"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number"}.get(type(value), type(value).__name__)


def _name(here: Tuple[Any, ...]) -> str:
    parts = [str(p) if not isinstance(p, int) else f"[{p}]" for p in here]
    return ".".join(parts).replace(".[", "[") or "value"


# ---------------------------------------------------------------- loading

def read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RecipeError(f"cannot read recipe: {exc.strerror}", Location(str(path)),
                          "pass a built-in recipe id (see `patchkit list`) or the path of a .yaml file") from None
    if b"\x00" in raw:
        raise RecipeError("not a text file (it contains NUL bytes)", Location(str(path)),
                          "a recipe is a UTF-8 YAML file")
    if raw.startswith(b"\xef\xbb\xbf"):  # a byte order mark (by hand: the utf-8-sig codec is one more import)
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise RecipeError("not UTF-8 text", Location(str(path), line),
                          "save the recipe as UTF-8") from None


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
        raise RecipeError(f"a recipe must be a YAML mapping, not {_kind(data)}", Location(path, 1, 1),
                          "start the file with `id: <name>`; see the recipe format in README.md")
    options_data = data.get("options")
    original = data
    data, overridden, chosen = apply_overrides(data, overrides, options_data)
    r = _Reader(data, marks, path, overridden)
    r.mapping((), FORMAT_KEYS, REQUIRED)

    rid = r.string(("id",))
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
    options = _options(r) if "options" in data else ()
    roles = _roles(r, options) if "roles" in data else ()
    guard = r.expression(("guard",)) if "guard" in data else None
    points = _points(r, options)
    notes = tuple(r.strings(("notes",))) if "notes" in data else ()
    examples = _examples(r, options) if "examples" in data else ()

    choices = []
    for option in options:
        value = chosen.get(option.name, option.default)
        if value not in option.choices:
            raise OverrideError(f"{option.name}={value}: not one of {', '.join(option.choices)}",
                                Location("<command line>"),
                                _did_you_mean(value, option.choices, option.name + "=")
                                + f"use {option.name}=" + "|".join(option.choices))
        choices.append((option.name, value))

    recipe = m.Recipe(id=rid, description=description.strip(), target=target, backend=backend,
                      profiler=profiler, schedule=schedule, options=options, roles=roles, guard=guard,
                      points=points, notes=notes, examples=examples, path=path)
    settings = m.Settings(recipe=recipe, choices=tuple(choices), overrides=tuple(overrides))
    if not settings.active_points():
        raise RecipeError("no point is in use with the chosen options " + str(dict(choices)), Location(path),
                          "give at least one point a `when:` that matches, or none at all")
    runtime = settings.runtime_settings()
    for problem in backends.validate(runtime):  # what the backend itself checks (no torch import)
        blamed = _blamed_overrides(problem, runtime, original, overridden, rid)
        if blamed:
            raise OverrideError(f"{' '.join(blamed)}: {problem}", Location("<command line>"),
                                "change the value on the command line, or leave it out to keep the recipe's")
        raise r.fail(("profiler",) if "profiler" in data else (), problem,
                     "change the value in the recipe or override it, e.g. profiler.save_path=./outputs/x")
    return settings


def _blamed_overrides(problem: str, runtime: Dict[str, Any], original: Mapping[str, Any],
                      overridden: Mapping[Tuple[Any, ...], str], rid: str) -> List[str]:
    """The overrides (as typed) without which the backend would not report ``problem``."""
    blamed = []
    for parts, text in overridden.items():
        name = parts[-1]
        if name not in runtime:
            continue
        section = original.get(parts[0]) if len(parts) == 2 else original
        default = default_save_path(rid) if name == "save_path" else backends.DEFAULTS[name]
        own = section.get(name, default) if isinstance(section, dict) else default
        if problem not in backends.validate(dict(runtime, **{name: own})):
            blamed.append(text)
    return blamed


def _backend(r: _Reader) -> str:
    """A registered backend's name, whose module imports."""
    name = r.word(("backend",), backends.names())
    try:
        backends.get(name)  # a backend module imports only the standard library (see patchkit.backends)
    except (ImportError, TypeError) as exc:
        raise r.fail(("backend",), f"backend {name!r} cannot be used: {exc}",
                     "install what provides its module, or pick another: " + ", ".join(backends.names())) from None
    return name


def _target(r: _Reader) -> m.Target:
    t = r.mapping(("target",), TARGET_KEYS, ("package", "files"))
    package = r.string(("target", "package"))
    if not is_identifier(package):
        raise r.fail(("target", "package"), f"package {package!r} is not a top-level import name",
                     "write the name you would `import`, e.g. vllm_ascend")
    distribution = r.string(("target", "distribution")) if "distribution" in t else package
    versions = r.string(("target", "versions")) if "versions" in t else ""
    if versions:
        from .versions import check as check_versions

        try:
            check_versions(versions)
        except ValueError as exc:
            raise r.fail(("target", "versions"), f"not a PEP 440 version specifier: {versions!r} ({exc})",
                         "write e.g. \">=0.4,<0.8\"") from None
    files = r.strings(("target", "files"))
    for i, f in enumerate(files):
        _check_relative(r, ("target", "files", i), f)
    instead = r.string(("target", "instead")) if "instead" in t else ""
    if instead and not is_recipe_id(instead):
        raise r.fail(("target", "instead"), f"instead {instead!r} is not a recipe id", "name the recipe to use outside this range")
    tags = tuple(r.strings(("target", "tags"))) if "tags" in t else ()
    return m.Target(package=package, distribution=distribution, versions=versions, files=tuple(files), instead=instead,
                    tags=tags)


def _check_relative(r: _Reader, here: Tuple[Any, ...], f: str) -> None:
    p = Path(f)
    if p.is_absolute() or f.startswith(("/", "\\")) or (f[1:2] == ":" and f[:1].isascii() and f[:1].isalpha()):
        raise r.fail(here, f"target file {f!r} is absolute", "write paths relative to the package root, e.g. verl/workers/actor/dp_actor.py")
    if ".." in p.parts or "\\" in f:
        raise r.fail(here, f"target file {f!r} leaves the root", "write a path inside the root, with / separators and no '..'")
    if not f.endswith(".py"):
        raise r.fail(here, f"target file {f!r} is not a .py file", "point at a Python source file")


def default_save_path(rid: str) -> str:
    """Where a recipe's traces go when it says nothing: a folder of its own."""
    return f"{v.DEFAULTS['save_path']}/{rid}"


def _profiler(r: _Reader) -> m.Profiler:
    p = r.mapping(("profiler",), v.PROFILER_KEYS)
    values = {k: _setting(r, ("profiler", k), v.SETTING[k]) for k in p}
    values.setdefault("save_path", default_save_path(r.data["id"]))
    return m.Profiler(**values)


def _schedule(r: _Reader) -> m.Schedule:
    s = r.mapping(("schedule",), v.SCHEDULE_KEYS)
    return m.Schedule(**{k: _setting(r, ("schedule", k), v.SETTING[k]) for k in s})


def _setting(r: _Reader, here: Tuple[Any, ...], setting: v.Setting) -> Any:
    """One profiler or schedule value, read as its kind in the vocabulary says."""
    kind = setting.kind
    if kind == v.WORD:
        return r.word(here, setting.values)
    if kind == v.WORDS:
        return tuple(r.strings(here, setting.values))
    if kind == v.FLAG:
        return r.boolean(here)
    if kind == v.COUNT:
        return r.integer(here, setting.minimum)
    if kind == v.PATH:
        path = r.string(here)
        if "\x00" in path:
            raise r.fail(here, f"{_name(here)} contains a NUL byte", "use a plain directory path")
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
            raise r.fail(here, f"{_name(here)} must be `all` or a list of ranks, not {value!r}",
                         f"write {setting.name}: all, or {setting.name}: [0, 1]")
        return tuple(sorted(set(value)))
    raise ValueError(f"{setting.key}: no reader for the kind {kind!r}")  # pragma: no cover


def _options(r: _Reader) -> Tuple[m.Option, ...]:
    opts = r.get(("options",))
    if not isinstance(opts, dict) or not opts:
        raise r.fail(("options",), "options must be a mapping of option names",
                     "write e.g. `granularity: {choices: [mini, micro], default: mini}`")
    out = []
    for name in opts:
        here = ("options", name)
        if not is_identifier(name) or name in OVERRIDABLE:
            raise r.fail(here, f"option name {name!r} is not a valid name", "use a plain lower-case word such as granularity", key=True)
        o = r.mapping(here, OPTION_KEYS, ("choices", "default"))
        choices = r.strings(here + ("choices",))
        for i, c in enumerate(choices):
            if not is_identifier(c):
                raise r.fail(here + ("choices", i), f"choice {c!r} is not a plain word", "use letters, digits and _")
        default = r.string(here + ("default",))
        if default not in choices:
            raise r.fail(here + ("default",), f"default {default!r} is not one of the choices {choices}",
                         "pick the default among the choices")
        out.append(m.Option(name, tuple(choices), default, r.string(here + ("help",)) if "help" in o else ""))
    return tuple(out)


def _roles(r: _Reader, options: Tuple[m.Option, ...]) -> Tuple[Tuple[str, str], ...]:
    roles = r.get(("roles",))
    if not isinstance(roles, dict) or not roles:
        raise r.fail(("roles",), "roles must map each role name to an expression",
                     "write e.g. `ref: self.actor_optimizer is None`")
    out = []
    for name in roles:
        if not is_identifier(name):
            raise r.fail(("roles", name), f"role name {name!r} is not a plain word", "use letters, digits and _", key=True)
        out.append((name, r.expression(("roles", name))))
    option = next((o for o in options if o.name == "role"), None)
    if option is None:
        raise r.fail(("roles",), "roles need an option named `role` that picks one of them or all",
                     "add `options: {role: {choices: [" + ", ".join(n for n, _ in out) + ", all], default: all}}`")
    for choice in option.choices:
        if choice != "all" and choice not in dict(out):
            raise r.fail(("options", "role", "choices"), f"role {choice!r} has no expression under roles",
                         f"add `{choice}: <expression>` under roles, or remove the choice")
    return tuple(out)


def _points(r: _Reader, options: Tuple[m.Option, ...]) -> Tuple[m.Point, ...]:
    pts = r.get(("points",))
    if not isinstance(pts, list) or not pts:
        raise r.fail(("points",), "points must be a non-empty list", "list where the start and step calls go")
    out = []
    for i in range(len(pts)):
        here = ("points", i)
        p = r.mapping(here, POINT_KEYS, ("at",))
        for key in ("class", "method", "function", "nested"):
            if key not in p:
                continue
            name = r.string(here + (key,))
            if not is_identifier(name):
                raise r.fail(here + (key,), f"{key} {name!r} is not a Python name", f"write the {key} name as it is in the source")
        cls, method = _scope(r, here, p)
        at = r.word(here + ("at",), v.POSITIONS)
        action = r.word(here + ("action",), v.ACTIONS) if "action" in p else v.DEFAULT_ACTION
        call = None
        if at in v.CALL_POSITIONS:
            if "call" not in p:
                raise r.fail(here, f"`at: {at}` needs `call:` (the dotted callee, e.g. self._optimizer_step)",
                             "add `call: self.model_runner.execute_model` or similar")
            call = r.string(here + ("call",))
            if not is_dotted(call):
                raise r.fail(here + ("call",), f"call {call!r} is not a dotted name", "write e.g. self._optimizer_step")
        elif "call" in p:
            raise r.fail(here + ("call",), f"`call:` only goes with after_call / before_call, not {at}",
                         "remove `call:` or change `at:`", key=True)
        loop: Tuple[m.LoopSelector, ...] = ()
        if at in v.LOOP_POSITIONS:
            if "loop" not in p:
                raise r.fail(here, f"`at: {at}` needs `loop:` (iter, target or calls)",
                             "add e.g. `loop: {iter: micro_batches}`")
            loop = _loop(r, here + ("loop",))
        elif "loop" in p:
            raise r.fail(here + ("loop",), f"`loop:` only goes with loop positions, not {at}",
                         "remove `loop:` or change `at:`", key=True)
        if at == "on_exit" and action != "step":
            raise r.fail(here + ("action",), "on_exit points step; they start the capture themselves",
                         "remove `action:` from this point")
        reason = None
        if action == "refuse":
            if "guard" not in p or "reason" not in p:
                raise r.fail(here, "`action: refuse` needs `guard:` (when to keep the capture off) and `reason:`",
                             "e.g. guard: self.profiler_config.profile, reason: the framework's own profiler is on")
            reason = r.string(here + ("reason",))
        elif "reason" in p:
            raise r.fail(here + ("reason",), "`reason:` only goes with `action: refuse`", "remove it", key=True)
        when = _when(r, here + ("when",), options) if "when" in p else ()
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
                _check_relative(r, here + ("files", j), f)
        guard = r.expression(here + ("guard",)) if "guard" in p else None
        out.append(m.Point(cls=cls, method=method, at=at, action=action, call=call, loop=loop,
                           when=when, guard=guard, count=count, files=files, where=r.where(here),
                           nested=p.get("nested"), reason=reason))
    return tuple(out)


def _scope(r: _Reader, here: Tuple[Any, ...], p: Dict[str, Any]) -> Tuple[Optional[str], str]:
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


def _loop(r: _Reader, here: Tuple[Any, ...]) -> Tuple[m.LoopSelector, ...]:
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
            name = r.string(sub + (key,))
            ok = is_dotted(name) if key in ("calls", "iter", "while") else is_identifier(name)
            if not ok:
                raise r.fail(sub + (key,), f"loop {key} {name!r} is not a valid name", "write a Python name (calls: a dotted name)")
        out.append(m.LoopSelector(**{("while_" if k == "while" else k): v for k, v in sel.items()}))
    return tuple(out)


def _when(r: _Reader, here: Tuple[Any, ...], options: Tuple[m.Option, ...]) -> Tuple[Tuple[str, str], ...]:
    names = {o.name: o for o in options}
    if not names:
        raise r.fail(here, f"{_name(here)} names option values, but the recipe declares no options",
                     "declare them under `options:` or remove this key", key=True)
    w = r.mapping(here, names)
    out = []
    for name, value in w.items():
        if value not in names[name].choices:
            raise r.fail(here + (name,), f"{value!r} is not a choice of option {name}",
                         f"use one of: {', '.join(names[name].choices)}")
        out.append((name, value))
    return tuple(out)


def _examples(r: _Reader, options: Tuple[m.Option, ...]) -> Tuple[m.Example, ...]:
    exs = r.get(("examples",))
    if not isinstance(exs, list):
        raise r.fail(("examples",), "examples must be a list", "write `- name: ...` entries")
    out = []
    for i in range(len(exs)):
        here = ("examples", i)
        e = r.mapping(here, EXAMPLE_KEYS, ("name", "before"))
        before = r.string(here + ("before",), "a block of Python source")
        has_after = "after" in e
        unchanged = r.boolean(here + ("unchanged",)) if "unchanged" in e else False
        if has_after == unchanged:
            raise r.fail(here, "an example needs either `after:` or `unchanged: true`",
                         "give the expected source, or say that the input must stay unchanged")
        chosen = _when(r, here + ("options",), options) if "options" in e else ()
        out.append(m.Example(name=r.string(here + ("name",)), before=before,
                             after=r.string(here + ("after",), "a block of Python source") if has_after else None,
                             options=chosen, reason=r.string(here + ("reason",)) if "reason" in e else None,
                             where=r.where(here)))
    return tuple(out)


# ---------------------------------------------------------------- the built-in recipes

def builtin_dir() -> Path:
    """The shipped recipes; in a source checkout, the top-level recipes/ folder."""
    try:
        import patchkit.recipes
    except ImportError:
        return Path(__file__).resolve().parent.parent / "recipes"
    return Path(patchkit.recipes.__file__).parent


def builtin_ids() -> List[str]:
    return sorted(p.stem for p in builtin_dir().glob("*.yaml"))


def recipe_path(ref: str) -> Path:
    """A built-in id or a path to a recipe file."""
    if ref.endswith((".yaml", ".yml")) or os.sep in ref or "/" in ref:
        path = Path(ref)
        if not path.is_file():
            raise RecipeError(f"no recipe file {ref}", Location(ref), "check the path, or use a built-in id from `patchkit list`")
        return path
    path = builtin_dir() / f"{ref}.yaml"
    if not path.is_file():
        from difflib import get_close_matches

        close = get_close_matches(ref, builtin_ids(), n=1)
        hint = f"did you mean {close[0]}?" if close else "see `patchkit list` for the built-in recipes"
        raise RecipeError(f"no built-in recipe {ref!r}", None, hint)
    return path


def load(ref: str, overrides: Sequence[str] = (), backend: Optional[str] = None) -> m.Settings:
    extra = [f"backend={backend}"] if backend else []
    return load_recipe(recipe_path(ref), list(overrides) + extra)


def all_recipes() -> List[m.Settings]:
    return [load(rid) for rid in builtin_ids()]


# ---------------------------------------------------------------- overrides

def apply_overrides(data: Dict[str, Any], overrides: Sequence[str], options: Any):
    """Apply ``KEY=VALUE`` overrides; return the new data, what each path came from, and option choices."""
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    option_names = [k for k in options if isinstance(k, str)] if isinstance(options, dict) else []  # others: bad names, reported later
    overridden: Dict[Tuple[Any, ...], str] = {}
    chosen: Dict[str, str] = {}
    for text in overrides:
        key, sep, raw = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise OverrideError(f"{text!r} is not KEY=VALUE", Location("<command line>"),
                                "write overrides as schedule.active=3 or granularity=micro")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            raise OverrideError(f"{text}: the value is not valid YAML", Location("<command line>"),
                                "quote it, e.g. profiler.save_path='./out dir'") from None
        parts = replicas.SHORT_KEYS.get(key, tuple(key.split(".")))
        if len(parts) == 1 and parts[0] in option_names:
            if not isinstance(value, str):
                value = str(value).lower() if isinstance(value, bool) else str(value)
            chosen[parts[0]] = value
            continue
        valid = _valid_override_keys(option_names)
        if parts[0] == "backend" and len(parts) == 1:
            data["backend"] = value
        elif len(parts) == 2 and parts[1] in v.SETTING and v.SETTING[parts[1]].section == parts[0]:
            section = data.get(parts[0])
            section = dict(section) if isinstance(section, dict) else {}
            section[parts[1]] = value
            data[parts[0]] = section
        else:
            close = _close_keys(key, valid)
            guess = f"did you mean {' or '.join(f'{k}={raw.strip()}' for k in close)}? " if close else ""
            raise OverrideError(f"unknown override key {key!r}", Location("<command line>"),
                                guess + "valid keys: " + ", ".join(valid))
        overridden[parts] = text
    return data, overridden, chosen


def _valid_override_keys(option_names: Sequence[str]) -> List[str]:
    settings = [s.key for section in v.SECTIONS for s in v.SETTINGS if s.section == section]
    return ["backend"] + settings + list(option_names)


def _close_keys(key: str, valid: Sequence[str]) -> List[str]:
    """Valid keys a mistyped one may have meant: same last part (``wait`` -> ``schedule.wait``), or spelt alike."""
    from difflib import get_close_matches

    last = key.rsplit(".", 1)[-1]
    tails: Dict[str, List[str]] = {}
    for k in valid:
        tails.setdefault(k.rsplit(".", 1)[-1], []).append(k)
    found = list(tails.get(last, ()))
    if not found:
        found += get_close_matches(key, valid, n=1)
        for tail in get_close_matches(last, list(tails), n=1, cutoff=0.75):
            found += tails[tail]
    return list(dict.fromkeys(found))[:3]


def _did_you_mean(value: Any, allowed: Sequence[str], prefix: str = "") -> str:
    """``"did you mean level1? "`` for a word spelt close to an allowed one, else ``""``."""
    from difflib import get_close_matches

    close = get_close_matches(value, allowed, n=1, cutoff=0.75) if isinstance(value, str) else []
    return f"did you mean {prefix}{close[0]}? " if close else ""
