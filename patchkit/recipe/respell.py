"""A recipe's ``profiler:`` respelt in patchkit's own names: the users' spellings read through one table.

:mod:`patchkit.core.spellings` declares torch_npu's names of values (``ProfilerLevel.Level1``) and verl's,
MindSpeed-RL's and torch_npu's names of keys (``profile_level``, ``tool_config.npu.level``,
``profile_with_memory``).  :func:`respell` rewrites the YAML data (``KEY=VALUE`` overrides applied) into
patchkit's names before it is validated, and moves the positions with it, so an error about a value still
points at the line the user wrote (or at the override as typed), and everything after the loader sees only
patchkit's names.  An unknown key or word is an error with the nearest accepted spelling and the list.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from patchkit.core import spellings as sp
from patchkit.core import vocabulary as v
from patchkit.recipe.reader import Reader, kind_of
from patchkit.recipe.yamlpos import shorten

HERE = ("profiler",)
Path = Tuple[Any, ...]


def respell(r: Reader) -> Reader:
    """``r`` with its ``profiler:`` section in patchkit's names; errors at the key or value as written."""
    section = r.data.get("profiler") if isinstance(r.data, dict) else None
    if not isinstance(section, dict):
        return r  # nothing to read here; the reader says what is wrong with it
    n = _Respeller(r)
    profiler = n.run(section)
    return Reader(dict(r.data, profiler=profiler), n.marks, r.path, n.overridden)


def accepted_keys() -> List[str]:
    """Every ``profiler:`` key a recipe may write: patchkit's, then the other tools' names."""
    return list(v.PROFILER_KEYS) + [k.spelling for k in sp.KEYS] + [NESTED_KEY]


NESTED_KEY = ".".join(sp.NESTED)


def value_hint(setting: v.Setting, value: Any) -> str:
    """``did you mean X? pick one of: ...``, the nearest among patchkit's words and torch_npu's spellings."""
    members = [m for m in sp.MEMBERS if m.setting == setting.name]
    from difflib import get_close_matches  # only for an error

    close = get_close_matches(value, list(setting.values) + list(sp.VALUES.get(setting.name, ())), n=1,
                              cutoff=0.75) if isinstance(value, str) else []
    guess = ""
    if close:
        meant = sp.word(setting.name, close[0]) or close[0]
        guess = f"did you mean {close[0]}{f' ({meant})' if meant != close[0] else ''}? "
    named = ", ".join(f"{m.enum}.{m.name}" for m in members)
    stored = ", ".join(m.value for m in members if m.value)
    also = f", or torch_npu's {named} (also bare, or after {sp.TORCH_NPU}.)" if members else ""
    also += f", or the strings torch_npu stores ({stored})" if stored else ""
    return f"{guess}pick one of: {', '.join(setting.values)}{also}"


class _Respeller:
    def __init__(self, r: Reader):
        self.r = r
        self.marks = dict(r.marks)
        self.overridden: Dict[Path, str] = dict(r.overridden)

    def fail(self, here: Path, message: str, hint: str, key: bool = False):
        return Reader(self.r.data, self.marks, self.r.path, self.overridden).fail(here, message, hint, key=key)

    def run(self, section: Dict[str, Any]) -> Dict[str, Any]:
        entries = [(k, val, HERE + (k,)) for k, val in section.items() if k != sp.NESTED[0]]
        if sp.NESTED[0] in section:
            entries += self.nested(section[sp.NESTED[0]])
        renamed: Dict[str, List[Tuple[Any, Path]]] = {}
        flags: List[Tuple[sp.Key, bool, Path]] = []
        for name, val, where in entries:
            spelt = sp.KEY.get(name) if isinstance(name, str) else None
            if isinstance(name, str) and name in v.PROFILER_KEYS:
                renamed.setdefault(name, []).append((val, where))
            elif spelt is not None and spelt.does == sp.RENAME:
                renamed.setdefault(spelt.key, []).append((val, where))
            elif spelt is not None:
                flags.append((spelt, self.flag(where, val), where))
            else:
                self.unknown(name, where)
        out: Dict[str, Any] = {}
        for name, candidates in renamed.items():
            val, where = self.pick(name, candidates)
            out[name] = val
            self.move(where, HERE + (name,))
        for spelt, on, where in flags:
            if spelt.does == sp.ALWAYS and not on:
                raise self.fail(where, f"{_name(where)}: false cannot be honoured ({spelt.tool}'s switch, which "
                                "patchkit has no setting for)", spelt.why + f"; or leave out {spelt.spelling}")
        self.ranks(out, [f for f in flags if f[0].does == sp.ALL])
        self.values(out)
        self.members(out, [f for f in flags if f[0].does == sp.MEMBER])
        return out

    # ---------------------------------------------------------------- keys

    def nested(self, tools: Any) -> List[Tuple[Any, Any, Path]]:
        """verl's ``tool_config: {npu: {...}}``: its keys, read as if written under ``profiler:``."""
        here = HERE + sp.NESTED[:1]
        if not isinstance(tools, dict):
            raise self.fail(here, f"profiler.{sp.NESTED[0]} must be a mapping, not {kind_of(tools)}",
                            f"write {sp.NESTED[0]}: {{npu: {{level: level1}}}}, or the keys right under profiler")
        for tool in tools:
            if tool != sp.NESTED[1]:
                raise self.fail(here + (tool,), f"profiler.{sp.NESTED[0]}.{shorten(str(tool))}: only verl's "
                                f"{sp.NESTED[1]} tool config is read", "write its keys under tool_config.npu, or "
                                "right under profiler; the backend is the recipe's `backend:`", key=True)
        keys = tools.get(sp.NESTED[1])
        if not isinstance(keys, dict):
            raise self.fail(here + sp.NESTED[1:], f"profiler.{NESTED_KEY} must be a mapping, not {kind_of(keys)}",
                            f"write {NESTED_KEY}: {{level: level1, contents: [npu, cpu]}}")
        return [(k, val, HERE + sp.NESTED + (k,)) for k, val in keys.items()]

    def unknown(self, name: Any, where: Path) -> None:
        shown = shorten(str(name))
        from difflib import get_close_matches  # only for an error

        close = get_close_matches(str(name), accepted_keys(), n=1, cutoff=0.6)
        guess = f"did you mean {close[0]}? " if close else ""
        others = ", ".join(k.spelling for k in sp.KEYS)
        raise self.fail(where, f"unknown key {shown!r} in {_name(where[:-1])}",
                        f"{guess}valid keys: {', '.join(v.PROFILER_KEYS)}; also read: {others}, {NESTED_KEY}.KEY",
                        key=True)

    def flag(self, where: Path, val: Any) -> bool:
        if not isinstance(val, bool):
            raise self.fail(where, f"{_name(where)} must be true or false, not {kind_of(val)}", "write true or false")
        return val

    def pick(self, name: str, candidates: List[Tuple[Any, Path]]) -> Tuple[Any, Path]:
        """One value for ``name``: the one set on the command line, else the only one written."""
        typed = [c for c in candidates if c[1] in self.overridden]
        if typed:
            return typed[-1]
        if len(candidates) > 1:
            names = " and ".join(_name(w) for _, w in candidates)
            raise self.fail(candidates[1][1], f"{names} both set profiler.{name}", "keep one of them", key=True)
        return candidates[0]

    def move(self, old: Path, new: Path) -> None:
        """The positions (and the override) of what was written at ``old``, now found at ``new``."""
        if old == new:
            return
        for mark in [m for m in self.marks if m[:len(old)] == old]:
            self.marks[new + mark[len(old):]] = self.marks[mark]
        if old in self.overridden:
            self.overridden[new] = self.overridden[old]

    # ---------------------------------------------------------------- values

    def ranks(self, out: Dict[str, Any], alls: List[Tuple[sp.Key, bool, Path]]) -> None:
        for spelt, on, where in alls:
            here = HERE + (spelt.key,)
            if on and not (spelt.key in out and here in self.overridden and where not in self.overridden):
                out[spelt.key] = "all"
                self.move(where, here)
            elif not on and spelt.key not in out:
                raise self.fail(where, f"{_name(where)}: false needs profiler.{spelt.key} to say which ranks",
                                f"add {spelt.key}: [0, 1], or write {spelt.key}: all")

    def values(self, out: Dict[str, Any]) -> None:
        """torch_npu's names of values made patchkit's words; a word neither knows is an error."""
        for name in sp.VALUES:
            if name not in out:
                continue
            setting, here = v.SETTING[name], HERE + (name,)
            val = out[name]
            if isinstance(val, str):
                out[name] = self.word(setting, val, here, setting.kind == v.WORDS)
            elif isinstance(val, list) and setting.kind == v.WORDS:
                out[name] = [self.word(setting, x, here + (i,), True) if isinstance(x, str) else x
                             for i, x in enumerate(val)]

    def word(self, setting: v.Setting, val: str, here: Path, entry: bool) -> str:
        if val in setting.values:
            return val
        found = sp.word(setting.name, val)
        if found is not None:
            return found
        how = "entries must be" if entry else "must be"
        raise self.fail(here, f"{setting.key} {how} one of {', '.join(setting.values)}; got {shorten(val)!r}",
                        value_hint(setting, val))

    def members(self, out: Dict[str, Any], flags: List[Tuple[sp.Key, bool, Path]]) -> None:
        """``with_memory: true`` and the like: a word put in (or taken out of) ``contents``."""
        for name in dict.fromkeys(spelt.key for spelt, _, _ in flags):
            here = HERE + (name,)
            mine = [f for f in flags if f[0].key == name]
            if here in self.overridden:  # the list given on the command line replaces the recipe's switches
                mine = [f for f in mine if f[2] in self.overridden]
            given = out.get(name, v.DEFAULTS[name])
            if isinstance(given, str):
                given = [given]
            if not isinstance(given, (list, tuple)):
                continue  # the reader says what is wrong with it
            words = list(given)
            for spelt, on, where in mine:
                if on and spelt.word not in words:
                    words.append(spelt.word)
                elif not on and spelt.word in words:
                    words.remove(spelt.word)
                if where in self.overridden and here not in self.overridden:
                    self.overridden[here] = self.overridden[where]
                if here not in self.marks:
                    self.move(where, here)
            out[name] = words


def _name(here: Path) -> str:
    return ".".join(str(p) for p in here)
