"""The recipe reference (``docs/reference.md``), generated from patchkit's own declarations, and its MkDocs hook.

``reference.md`` is a short hand-written introduction and generated
sections, each between ``<!-- patchkit-reference: NAME -->`` and
``<!-- patchkit-reference: /NAME -->``.  The sections are made from the code:

* ``kinds``: the point kinds (``KINDS``, found in ``patchkit/recipe/kinds/``: name, summary, the keys each needs,
  the actions it allows, and its VALID and INVALID examples);
* ``actions``: a point's ``action:`` words (``patchkit.core.vocabulary.ACTIONS``)
  and the kinds that allow each;
* ``settings``: every profiler and schedule setting (``vocabulary.SETTINGS``)
  with its type, allowed values, default and help;
* ``spellings``: the users' own spellings patchkit reads as its names (``patchkit.core.spellings``):
  torch_npu's enum members for values, verl's, MindSpeed-RL's and torch_npu's names for keys;
* ``backends``: the backends (``patchkit.runtime.backends``: every module of
  that folder, and any registered), each with its description (its module's
  docstring), the settings it uses and those it declares ``UNUSED``, and the
  code ``patchkit show`` prints for it.

The page is committed with its sections filled in, so that it reads as it is
(on GitHub, in an editor, where the README links to it).  After a change to a
kind, a setting, a spelling or a backend, write it again::

    python docs/hooks/reference.py            # rewrite docs/reference.md
    python docs/hooks/reference.py --check    # exit 1 when it differs from what the code makes

``tests/test_docs.py`` fails while the page differs.  When the site is built,
this hook fills the sections again, so the site always shows the code's
declarations.  A marker this hook does not know, or one missing from the
page, fails the build, as does a kind of setting it has no wording for: the
reference is never silently short.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, NamedTuple

import yaml
from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]  # the checkout: mkdocs.yml and the patchkit package
PAGE = "reference.md"
MARKER = re.compile(r"<!-- patchkit-reference: (\w+) -->")
ANY_MARKER = re.compile(r"<!-- patchkit-reference: /?\w+ -->\n?")
SECTION = re.compile(r"(<!-- patchkit-reference: (\w+) -->\n).*?(<!-- patchkit-reference: /\2 -->)", re.S)
EXAMPLE_KEY = "my-recipe"  # the recipe id the backends' code is shown for


class Declarations(NamedTuple):
    vocabulary: Any  # patchkit.core.vocabulary
    kinds: Dict[str, Any]  # name -> Kind
    backends: Any  # patchkit.runtime.backends
    spellings: Any = None  # patchkit.core.spellings


def declarations() -> Declarations:
    """patchkit's declarations, from this checkout: the settings table, the point kinds and the backends."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    try:
        vocabulary = importlib.import_module("patchkit.core.vocabulary")
        kinds = importlib.import_module("patchkit.recipe.kinds").KINDS
        backends = importlib.import_module("patchkit.runtime.backends")  # finds the backends of its folder
        spellings = importlib.import_module("patchkit.core.spellings")
    except Exception as exc:  # noqa: BLE001  (any import failure is a build error, said with its cause)
        raise PluginError(f"reference: cannot import patchkit's declarations: {type(exc).__name__}: {exc}") from exc
    return Declarations(vocabulary, dict(kinds), backends, spellings)


# ---------------------------------------------------------------------------
# small pieces


def code(text: Any) -> str:
    """``text`` as inline code (backticks inside are matched by a longer fence)."""
    text = str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def cell(text: str) -> str:
    """Text for a table cell: no line breaks, no bare pipes."""
    return " ".join(text.split()).replace("|", "\\|")


def value(v: Any) -> str:
    """A setting's value as a recipe writes it (YAML)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "none"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    return str(v)


def block(text: str, lang: str) -> List[str]:
    return [f"```{lang}", text.rstrip("\n"), "```", ""]


def from_rest(text: str) -> str:
    """A docstring as Markdown: reST inline literals and roles made code spans, ``::`` a colon."""
    text = re.sub(r":[a-z]+:`~?\.?([^`]+)`", r"`\1`", text)
    text = re.sub(r"``(.+?)``", lambda m: code(" ".join(m.group(1).split())), text, flags=re.S)
    return re.sub(r"::\n", ":\n", text)


def flow(v: Any) -> str:
    """``v`` in YAML's one-line (flow) style."""
    text = yaml.safe_dump(v, default_flow_style=True, sort_keys=False, width=1_000_000).strip()
    return text[:-3].rstrip() if text.endswith("\n...") else text  # a lone scalar ends its document


def full_point(point: Dict[str, Any]) -> Dict[str, Any]:
    """A kind's example point as a recipe writes it: in ``class A``, method ``run``, unless it names a function."""
    return dict(point) if "function" in point else {"class": "A", "method": "run", **point}


def point_yaml(point: Dict[str, Any]) -> str:
    """The point as a recipe's ``points:`` list holds it, one key a line."""
    lines = ["points:"]
    for n, (key, v) in enumerate(full_point(point).items()):
        lines.append(f"{'  - ' if n == 0 else '    '}{key}: {flow(v)}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# the sections


def kinds_section(d: Declarations) -> str:
    default_action = d.vocabulary.DEFAULT_ACTION
    out = ["## Point kinds", "",
           "A point's `at:` names one of these kinds. Each is shown with the examples it declares; the tests "
           "run every one of them. In the examples the recipe's id is `k`, and the lines patchkit adds at the "
           "top of the module (the runtime's import and its settings) are left out.", "",
           "| `at:` | where the line goes | needs | actions |", "|---|---|---|---|"]
    for kind in d.kinds.values():
        needs = ", ".join(code(f"{n}:") for n in kind.needs) or "—"
        actions = ", ".join(code(a) for a in kind.actions)
        out.append(f"| [{code(kind.name)}](#at-{kind.name}) | {cell(kind.summary)} | {needs} | {actions} |")
    out.append("")
    for kind in d.kinds.values():
        needs = ", ".join(code(f"{n}:") for n in kind.needs)
        actions = ", ".join(code(a) + (" (the default)" if a == default_action else "") for a in kind.actions)
        out += [f"### {code(kind.name)} {{#at-{kind.name}}}", "",
                f"{kind.summary[:1].upper()}{kind.summary[1:]}.", "",
                f"- **Needs:** {needs or 'no key beyond `class:` and `method:`, or `function:`'}",
                f"- **Actions:** {actions}", ""]
        for n, ex in enumerate(kind.VALID, 1):
            out += [f"**Example{f' {n}' if len(kind.VALID) > 1 else ''}.** The point", ""]
            out += block(point_yaml(ex.point), "yaml")
            out += ["on", ""] + block(ex.source, "python") + ["gives", ""] + block(ex.after, "python")
        for ex in kind.INVALID:
            out += [f"**Refused.** The point {code(flow(full_point(ex.point)))} on", ""] + block(ex.source, "python")
            out += [f"is refused with a reason that says {code(ex.reason)}.", ""]
    return "\n".join(out)


def actions_section(d: Declarations) -> str:
    v = d.vocabulary
    out = ["## Actions", "",
           f"A point's `action:` says what its line does; the default is {code(v.DEFAULT_ACTION)}. "
           "How `range` and `mark` label code inside a window is in "
           "[Recipe format](recipes.md#ranges-and-marks).", "",
           "| `action:` | allowed at |", "|---|---|"]
    for action in v.ACTIONS:
        where = [code(k.name) for k in d.kinds.values() if action in k.actions]
        out.append(f"| {code(action)} | {', '.join(where) or 'no kind yet'} |")
    out.append("")
    return "\n".join(out)


def _type_words(v: Any) -> Dict[str, Any]:
    return {
        v.WORD: lambda s: "one word",
        v.WORDS: lambda s: "a list of words (or one word)",
        v.FLAG: lambda s: "`true` or `false`",
        v.COUNT: lambda s: f"an integer ≥ {s.minimum}",
        v.PATH: lambda s: "a path",
        v.RANKS: lambda s: "`all`, or a list of integers ≥ 0 (or one)",
        v.STEPS: lambda s: "a list of integers ≥ 0 (or one)",
        v.THRESHOLD: lambda s: "a number ≥ 0, or `none`",
    }


def settings_section(d: Declarations) -> str:
    v = d.vocabulary
    words = _type_words(v)
    out = ["## Settings", "",
           "Set in a recipe under `profiler:` or `schedule:`, or on the command line as `KEY=VALUE`, the value "
           "read as YAML (`profiler.level=level1`, `profiler.ranks=[0]`). `patchkit show RECIPE` prints a "
           "recipe's own values.", ""]
    for section in v.SECTIONS:
        out += [f"### `{section}`", "",
                "| key | type | allowed values | default | what it does |", "|---|---|---|---|---|"]
        for s in v.SETTINGS:
            if s.section != section:
                continue
            if s.kind not in words:
                raise PluginError(f"reference: the setting {s.key} is of kind {s.kind!r}, which "
                                  f"docs/hooks/reference.py has no words for: add them to _type_words")
            allowed = ", ".join(code(x) for x in s.values) or "—"
            out.append(f"| {code(s.key)} | {words[s.kind](s)} | {allowed} | {code(value(s.default))} "
                       f"| {cell(s.help)} |")
        out.append("")
    return "\n".join(out)


def _key_does(sp: Any, k: Any) -> str:
    """What another tool's key does, in words."""
    if k.does == sp.RENAME:
        return f"{code('profiler.' + k.key)}, the same value"
    if k.does == sp.MEMBER:
        return (f"`true` puts {code(k.word)} in {code('profiler.' + k.key)} (its default if the recipe gives "
                "none), `false` takes it out")
    if k.does == sp.ALL:
        return f"`true` is {code('profiler.' + k.key + ': all')}; `false` leaves {code(k.key + ':')} to say which"
    if k.does == sp.ALWAYS:
        return f"`true` is accepted and changes nothing; `false` is refused: {cell(k.why)}"
    raise PluginError(f"reference: the spelling {k.spelling} does {k.does!r}, which docs/hooks/reference.py "
                      "has no words for: add them to _key_does")


def spellings_section(d: Declarations) -> str:
    sp = d.spellings
    nested = ".".join(sp.NESTED)
    out = ["## Other tools' spellings {#spellings}", "",
           "Settings copied from torch_npu code or from a verl or MindSpeed-RL config are read as patchkit's "
           "own names when the recipe is loaded, in a recipe file and in `KEY=VALUE` alike; everything after "
           "the loader, `patchkit show` included, sees only patchkit's names. A spelling in neither table is "
           "an error at its line, with the nearest accepted name.", "",
           "### torch_npu's names of values", "",
           f"Each torch_npu member may be written as torch_npu code does (after {code(sp.TORCH_NPU + '.')} or "
           "not), bare, or as the string torch_npu stores.", "",
           "| setting | patchkit's word | torch_npu's member | also read as |", "|---|---|---|---|"]
    for m in sp.MEMBERS:
        first, *rest = m.spellings()
        out.append(f"| {code('profiler.' + m.setting)} | {code(m.word)} | {code(first)} | "
                   f"{', '.join(code(x) for x in rest)} |")
    out += ["", "### Other tools' names of keys", "",
            f"Written under `profiler:`, or as `profiler.NAME=VALUE`. verl's {code(nested)} block is read as "
            f"if its keys were written under `profiler:` (on the command line: {code('profiler.' + nested + '.KEY')}"
            "). Where two names set one key, the one typed on the command line wins; in a recipe, writing both "
            "is an error.", "",
            "| written | whose name | read as |", "|---|---|---|"]
    for k in sp.KEYS:
        out.append(f"| {code(k.spelling)} | {k.tool} | {_key_does(sp, k)} |")
    out.append("")
    return "\n".join(out)


def backends_section(d: Declarations) -> str:
    v, b = d.vocabulary, d.backends
    out = ["## Backends", "",
           f"A recipe's `backend:` (default {code(b.DEFAULT)}), or `backend=NAME` / `--backend NAME` on the "
           "command line. Every backend takes the settings above; where a backend has no equivalent of one, "
           "`patchkit show` says so and the setting is not used. The code shown for each is what "
           f"`patchkit show` prints for a recipe {code(EXAMPLE_KEY)} with the default settings and nothing "
           "probed: the newest profiler API is assumed, and the runtime leaves out what the installed one "
           "lacks.", ""]
    for name in b.names():
        backend = b.get(name)
        off = {v.SETTING[k].key for k in backend.UNUSED}  # what the backend declares its profiler has no equivalent of
        uses = [code(s.key) for s in v.SETTINGS if s.key not in off]
        out += [f"### {code(name)} {{#backend-{name}}}", ""]
        if name == b.DEFAULT:
            out += ["The default backend.", ""]
        out += [from_rest(backend.describe()), "",
                f"- **Settings it uses:** {', '.join(uses) or 'none'}",
                f"- **Settings it leaves unused:** {', '.join(code(k) for k in sorted(off)) or 'none'}", "",
                f"The code it runs (`patchkit show {EXAMPLE_KEY} --backend {name}`):", ""]
        out += block(b.render({"backend": name}, EXAMPLE_KEY, features=backend.STATIC_FEATURES), "python")
    return "\n".join(out)


SECTIONS = {"kinds": kinds_section, "actions": actions_section, "settings": settings_section,
            "spellings": spellings_section, "backends": backends_section}


@functools.lru_cache(maxsize=None)
def sections() -> Dict[str, str]:
    """Each marker's Markdown, made once per build process."""
    d = declarations()
    return {name: make(d) for name, make in SECTIONS.items()}


def render(markdown: str) -> str:
    """``reference.md``'s text with each section between its markers made again from the code."""
    found = MARKER.findall(markdown)
    unknown = sorted(set(found) - set(SECTIONS))
    if unknown:
        raise PluginError(f"reference: {PAGE} has unknown markers {', '.join(unknown)}; known: "
                          f"{', '.join(SECTIONS)}")
    closed = [m.group(2) for m in SECTION.finditer(markdown)]
    missing = [name for name in SECTIONS if name not in closed]
    if missing:
        raise PluginError(f"reference: {PAGE} lacks the sections {', '.join(missing)} (each between "
                          f"<!-- patchkit-reference: NAME --> and <!-- patchkit-reference: /NAME -->)")
    made = sections()
    return SECTION.sub(lambda m: f"{m.group(1)}\n{made[m.group(2)].strip()}\n\n{m.group(3)}", markdown)


def main(argv: List[str]) -> int:
    """Write ``docs/reference.md`` again from the code; with ``--check``, only say whether it differs."""
    page = ROOT / "docs" / PAGE
    text = page.read_text(encoding="utf-8")
    made = render(text)
    if "--check" in argv:
        if made != text:
            print(f"{page} differs from what the code makes: run python docs/hooks/reference.py", file=sys.stderr)
            return 1
        return 0
    if made != text:
        page.write_text(made, encoding="utf-8")
        print(f"wrote {page}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------
# MkDocs events


def on_config(config, **kwargs):
    sections()  # fail at the start of the build, not halfway, when the declarations cannot be read
    return config


def on_page_markdown(markdown, page, **kwargs):
    if page.file.src_uri == PAGE:  # the sections made again; the markers are for the file, not the site
        return ANY_MARKER.sub("", render(markdown))
    return markdown


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
