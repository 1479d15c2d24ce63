"""Every data shape patchkit passes between its layers, as ``typing.NamedTuple`` records."""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple, Union

from patchkit.core.errors import Location
from patchkit.core.vocabulary import SETTINGS as _SETTINGS

# The users' vocabulary (DESIGN.md) is the table in patchkit.core.vocabulary; these names are its, kept
# here for the modules that read them from the model.  Backend names: patchkit.runtime.backends.names().
from patchkit.core.vocabulary import ACTIONS, CONTENTS, DEFAULTS, EXPORT_TYPES, LEVELS, SCHEDULE_KEYS  # noqa: F401

MARKER = "patchkit"


class Script(NamedTuple):
    """A target that is a script (``python train.py``): its code runs as ``__main__``, in no package, with no
    version.  ``path`` as the recipe writes it; a relative one is taken from ``base`` (the recipe file's folder),
    or from ``--root`` (the folder holding the script) when one is given."""

    path: str
    base: str  # an absolute folder
    where: Optional[Location] = None  # the recipe's ``script:`` line, for errors

    @property
    def name(self) -> str:
        """The script's file name: the one file a script recipe patches (``target.files``)."""
        return self.path.rsplit("/", 1)[-1]


class Target(NamedTuple):
    package: str  # "" for a script
    distribution: str
    versions: str  # the releases the recipe is proven on ("" for any: code with no version)
    files: Tuple[str, ...]
    instead: str = ""  # the recipe to use outside ``versions``: offered first when its own range takes the version
    tags: Tuple[str, ...] = ()  # git tags or branches supported, for source checkouts without metadata
    excluded: str = ""  # releases refused whatever their structure (a PEP 440 specifier)
    excluded_reason: str = ""  # why, said with the refusal
    script: Optional[Script] = None  # a script, not a package: package "", distribution the script's file name

    @property
    def shown(self) -> str:
        """What the target is, for people: ``the script train.py``, or the distribution's name."""
        return f"the script {self.script.path}" if self.script else self.distribution


class Profiler(NamedTuple):
    """The ``profiler:`` section; its fields are the vocabulary's profiler keys, with their defaults."""

    level: str = DEFAULTS["level"]
    contents: Tuple[str, ...] = DEFAULTS["contents"]
    export_type: str = DEFAULTS["export_type"]
    analysis: bool = DEFAULTS["analysis"]
    save_path: str = DEFAULTS["save_path"]
    ranks: Union[str, Tuple[int, ...]] = DEFAULTS["ranks"]
    mstx: bool = DEFAULTS["mstx"]
    replicas: Union[str, Tuple[int, ...]] = DEFAULTS["replicas"]
    replica_size: int = DEFAULTS["replica_size"]
    aic_metrics: str = DEFAULTS["aic_metrics"]
    l2_cache: bool = DEFAULTS["l2_cache"]
    op_attr: bool = DEFAULTS["op_attr"]
    data_simplification: bool = DEFAULTS["data_simplification"]
    record_op_args: bool = DEFAULTS["record_op_args"]
    gc_detect_threshold: Optional[float] = DEFAULTS["gc_detect_threshold"]
    host_sys: Tuple[str, ...] = DEFAULTS["host_sys"]
    sys_io: bool = DEFAULTS["sys_io"]
    sys_interconnection: bool = DEFAULTS["sys_interconnection"]


class Schedule(NamedTuple):
    """The ``schedule:`` section; its fields are the vocabulary's schedule keys, with their defaults."""

    wait: int = DEFAULTS["wait"]
    warmup: int = DEFAULTS["warmup"]
    active: int = DEFAULTS["active"]
    repeat: int = DEFAULTS["repeat"]
    skip_first: int = DEFAULTS["skip_first"]
    steps: Tuple[int, ...] = DEFAULTS["steps"]  # not empty: exactly these steps, instead of the periodic keys
    trigger: str = DEFAULTS["trigger"]  # manual: windows only when `patchkit capture` asks


class Option(NamedTuple):
    name: str
    choices: Tuple[str, ...]
    default: str
    help: str = ""


class LoopSelector(NamedTuple):
    """Which loop: all given fields must hold. ``iter`` unwraps enumerate/zip."""

    iter: Optional[str] = None
    target: Optional[str] = None
    calls: Optional[str] = None
    while_: Optional[str] = None  # a while loop whose condition calls this (YAML key ``while``)

    def describe(self) -> str:
        parts = []
        if self.iter:
            parts.append(f"over {self.iter}")
        if self.target:
            parts.append(f"with target {self.target}")
        if self.calls:
            parts.append(f"innermost calling {self.calls}")
        if self.while_:
            parts.append(f"(while) whose condition calls {self.while_}")
        return " ".join(parts)


class Point(NamedTuple):
    """Where one line goes: in ``cls.method``, or with ``cls`` None in the module-level function ``method``."""

    cls: Optional[str]  # None: a module-level function (the recipe's ``function:``)
    method: str  # the method's name, or the function's
    at: str
    action: str = "step"
    call: Optional[str] = None
    loop: Tuple[LoopSelector, ...] = ()
    when: Tuple[Tuple[str, str], ...] = ()
    guard: Optional[str] = None
    count: Optional[int] = 1  # None: one or more
    files: Tuple[str, ...] = ()
    where: Optional[Location] = None
    nested: Optional[str] = None  # a function defined inside the method (or function)
    reason: Optional[str] = None  # for action refuse: what to say
    name: Optional[str] = None  # for actions range and mark: the label in the trace

    @property
    def function(self) -> Optional[str]:
        """The module-level function's name, for a point that names no class."""
        return self.method if self.cls is None else None

    @property
    def scope(self) -> str:
        head = self.method if self.cls is None else f"{self.cls}.{self.method}"
        return head + (f".{self.nested}" if self.nested else "")


class Example(NamedTuple):
    name: str
    before: str
    after: Optional[str] = None  # None: must stay unchanged
    options: Tuple[Tuple[str, str], ...] = ()
    reason: Optional[str] = None
    where: Optional[Location] = None


class Recipe(NamedTuple):
    id: str
    description: str
    target: Target
    backend: str
    profiler: Profiler
    schedule: Schedule
    options: Tuple[Option, ...] = ()
    roles: Tuple[Tuple[str, str], ...] = ()
    guard: Optional[str] = None
    points: Tuple[Point, ...] = ()
    notes: Tuple[str, ...] = ()
    examples: Tuple[Example, ...] = ()
    path: str = "<recipe>"
    warnings: Tuple[str, ...] = ()  # what the recipe may get wrong but loads ("PATH:LINE:COL: message"): validate says it

    def option(self, name: str) -> Optional[Option]:
        return next((o for o in self.options if o.name == name), None)


class Settings(NamedTuple):
    """A recipe with its options chosen and overrides applied: what the engine needs."""

    recipe: Recipe
    choices: Tuple[Tuple[str, str], ...] = ()
    overrides: Tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.recipe.id

    def choice(self, name: str) -> Optional[str]:
        return dict(self.choices).get(name)

    def active_points(self) -> Tuple[Point, ...]:
        chosen = dict(self.choices)
        return tuple(p for p in self.recipe.points if all(chosen.get(k) == v for k, v in p.when))

    def runtime_settings(self) -> Dict[str, Any]:
        """The keyword arguments of ``patchkit.runtime.configure``, in a stable order."""
        r = self.recipe
        out: Dict[str, Any] = {"backend": r.backend}
        for setting in _SETTINGS:
            value = getattr(r.profiler if setting.section == "profiler" else r.schedule, setting.name)
            out[setting.name] = tuple(value) if isinstance(value, list) else value
        return out


class Insertion(NamedTuple):
    """One line patchkit adds: before 0-based line ``index`` of the original text."""

    index: int
    text: str  # without newline


class Applied(NamedTuple):
    text: str
    insertions: Tuple[Insertion, ...]


class AlreadyApplied(NamedTuple):
    text: str


class CannotApply(NamedTuple):
    reason: str
    line: Optional[int] = None
    col: Optional[int] = None
    hint: str = ""  # what to do, when the engine knows better than "the file has another shape"


TransformResult = Union[Applied, AlreadyApplied, CannotApply]
