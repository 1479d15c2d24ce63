"""``KEY=VALUE`` overrides from the command line, applied to a recipe's YAML data before it is validated."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from patchkit.recipe import replicas
from patchkit.core import spellings as sp
from patchkit.core import vocabulary as v
from patchkit.core.errors import Location, OverrideError, RecipeError
from patchkit.recipe.yamlpos import load, shorten


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
            raise OverrideError(f"{shorten(text)!r} is not KEY=VALUE", Location("<command line>"),
                                "write overrides as schedule.active=3 or granularity=micro")
        value = _value(text, raw)
        parts = _spelt(replicas.SHORT_KEYS.get(key, tuple(key.split("."))))
        if len(parts) == 1 and parts[0] in option_names:
            if not isinstance(value, str):
                value = str(value).lower() if isinstance(value, bool) else str(value)
            chosen[parts[0]] = value
            continue
        valid = _valid_override_keys(option_names)
        if parts[0] == "backend" and len(parts) == 1:
            data["backend"] = value
        elif len(parts) == 2 and ((parts[1] in v.SETTING and v.SETTING[parts[1]].section == parts[0])
                                  or (parts[0] == "profiler" and parts[1] in sp.KEY)):
            section = data.get(parts[0])
            section = dict(section) if isinstance(section, dict) else {}
            section[parts[1]] = value
            data[parts[0]] = section
        else:
            close = _close_keys(key, valid + _spelt_keys())
            guess = f"did you mean {' or '.join(f'{k}={shorten(raw.strip())}' for k in close)}? " if close else ""
            raise OverrideError(f"unknown override key {shorten(key)!r}", Location("<command line>"),
                                guess + "valid keys: " + ", ".join(valid) + "; also read: "
                                + ", ".join(_spelt_keys()) + f", profiler.{'.'.join(sp.NESTED)}.KEY")
        overridden[parts] = text
    return data, overridden, chosen


def _spelt(parts: Tuple[str, ...]) -> Tuple[str, ...]:
    """verl's ``profiler.tool_config.npu.KEY`` is ``profiler.KEY`` (the loader reads other tools' key names)."""
    if len(parts) == 4 and parts[0] == "profiler" and parts[1:3] == sp.NESTED:
        return ("profiler", parts[3])
    return parts


def _spelt_keys() -> List[str]:
    """Other tools' names of profiler keys, as overrides: ``profiler.profile_level``."""
    return [f"profiler.{k.spelling}" for k in sp.KEYS]


def _value(text: str, raw: str) -> Any:
    """The value of ``KEY=VALUE`` read as YAML, with a recipe's bounds (numbers, size, aliases)."""
    if not raw.strip():
        return ""
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:  # bytes os.fsdecode could not read as UTF-8 (argv, the environment)
        raise OverrideError(f"{shorten(text)}: the value is not valid UTF-8", Location("<command line>"),
                            "patchkit writes values into Python source and JSON, which hold text: use a name whose "
                            "bytes are UTF-8 (rename the folder, or reach it through a link named in UTF-8)") from None
    try:
        value, _ = load(raw, "<command line>")
    except RecipeError as exc:
        syntax = exc.message.startswith(("YAML syntax error", "not a YAML document"))
        raise OverrideError(f"{shorten(text)}: " + ("the value is not valid YAML" if syntax else exc.message),
                            Location("<command line>"),
                            "quote it, e.g. profiler.save_path='./out dir'" if syntax else exc.hint) from None
    return value


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
