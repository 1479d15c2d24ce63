"""``list``, ``show``, ``validate`` and ``test``: the recipes, what one resolves to, and whether they hold."""

from __future__ import annotations

import re
import sys
from functools import partial
from pathlib import Path
from typing import Optional, Sequence

import click

from patchkit.cli.options import backend_option, complete_recipes, overrides_argument, root_option
from patchkit.core.errors import PatchkitError

say = partial(click.echo, err=True)


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def list_recipes(as_json: bool) -> None:
    """The built-in recipes: id, package, versions."""
    if as_json:
        import json

        import patchkit

        click.echo(json.dumps([_recipe_json(s) for s in patchkit.all_recipes()], indent=2))
        return
    from patchkit.recipe.catalogue import entries

    rows = [(e.id, f"{e.distribution} {e.versions or '(any)'}", _first_sentence(e.description)) for e in entries()]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    for rid, package, description in rows:
        click.echo(f"{rid.ljust(widths[0])}  {package.ljust(widths[1])}  {description}")


def _first_sentence(text: str) -> str:
    head = text.split(". ")[0].split(": ")[0]
    return head if len(head) < 90 else head[:87] + "..."


def _recipe_json(s) -> dict:
    r = s.recipe
    return {
        "id": r.id, "description": r.description, "package": r.target.package,
        "distribution": r.target.distribution, "versions": r.target.versions, "files": list(r.target.files),
        "backend": r.backend, "options": {o.name: {"choices": list(o.choices), "default": o.default} for o in r.options},
    }


@click.command()
@click.argument("recipe", shell_complete=complete_recipes)
@overrides_argument
@root_option
@backend_option
@click.option("--strict-versions", "strict", is_flag=True, help="as diff and apply would with it")
def show(recipe: str, overrides: Sequence[str], root: Optional[str], backend: Optional[str], strict: bool) -> None:
    """The resolved recipe, the file it would patch here, and the code it inserts."""
    import patchkit
    from patchkit.engine import lines
    from patchkit.recipe.kinds import describe
    from patchkit.core.vocabulary import SETTING

    s = patchkit.load(recipe, overrides, backend)
    r = s.recipe
    out = [f"{r.id}  ({r.path})", "", r.description, "",
           f"target:   {r.target.distribution} {_proven(r.target)}, import name {r.target.package}" if not r.target.script
           else f"target:   the script {r.target.script.path} (run as __main__; no version)",
           "files:    " + ", ".join(r.target.files), _patches(s, root, strict or None), f"backend:  {r.backend}"]
    unused = _unused(r.schedule)
    for key, value in s.runtime_settings().items():
        if key != "backend" and key not in unused:
            out.append(f"  {SETTING[key].key}: {_as_typed(value)}")
    for o in r.options:
        out.append(f"option {o.name} = {s.choice(o.name)}  (choices: {', '.join(o.choices)}){'  ' + o.help if o.help else ''}")
    out += ["", "inserted at the top of each patched module:"]
    out += ["    " + line for line in lines.header_lines(s)]
    for p in s.active_points():
        out.append(f"{describe(p)}:")
        out += ["    " + line for line in lines.shown(s, p)]
    for note in r.notes:
        out.append(f"note: {note}")
    try:
        from patchkit.runtime.backends import render

        out += ["", f"profiler code the runtime builds ({r.backend}):", render(s.runtime_settings())]
    except ImportError:
        pass
    launch = _launch(s)
    if launch:
        out += ["", f"run the job ({r.backend}):"] + ["    " + line for line in launch]
    click.echo("\n".join(out))


def _launch(s):
    """What the backend says about starting the job under its tool (nsys: the options matching the window)."""
    from patchkit.runtime.backends import get, normalize

    launch = getattr(get(s.recipe.backend), "launch", None)
    return launch(normalize(s.runtime_settings())) if launch else []


def _unused(schedule) -> set:
    """The schedule keys this recipe's schedule does not use, left out of show: a list of steps replaces the
    periodic keys and the manual trigger replaces both, so typing one of them back would be refused."""
    from patchkit.core.vocabulary import PERIODIC

    if schedule.trigger == "manual":
        return {*PERIODIC, "steps"}
    return set(PERIODIC) if schedule.steps else set()


_PLAIN = re.compile(r"[A-Za-z_][\w.\-/]*|\.{0,2}/[\w.\-/]*")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}  # YAML 1.1 reads these as bool or null


def _as_typed(value) -> str:
    """A setting as it is written in KEY=VALUE, so that what show prints is what the command line takes back:
    true, none, [npu, cpu], and a word YAML would read as something else quoted ('yes', '1.0')."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(_as_typed, value)) + "]"
    if isinstance(value, str):
        if _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS:
            return value  # a word or a path YAML reads back as it is, without asking YAML (show starts fast)
        import yaml

        try:
            plain = yaml.safe_load(f"[{value}]") == [value] and not value.startswith(("'", '"'))
        except yaml.YAMLError:
            plain = False
        if not plain:
            return yaml.safe_dump(value, default_style="'", width=1_000_000).strip().removesuffix("...").strip()
    return str(value)


def _proven(target) -> str:
    """The range the recipe is proven on, and the releases it excludes, for show."""
    proven = f"proven on {target.versions}" if target.versions else "(any version)"
    if target.excluded:
        proven += f", excluding {target.excluded}" + (f" ({target.excluded_reason})" if target.excluded_reason else "")
    return proven


def _patches(s, root: Optional[str], strict: Optional[bool] = None) -> str:
    """show's line naming the files that diff/apply would change here, or why none is named.

    It reads no target file: where a group of points has one candidate here, that is the file; where it has
    several, ``patchkit diff`` picks the first where every point resolves (that takes the codemod).
    """
    from patchkit.state.planning import candidate_files

    try:
        installed, groups, note = candidate_files(s, root, strict)
    except PatchkitError as exc:
        where = f"{exc.where}: " if exc.where and exc.where.line is not None else ""
        return f"patches:  no file shown: {where}{exc.message}" + (f"\n          hint: {exc.hint}" if exc.hint else "")
    named = [str(g[0]) if len(g) == 1 else f"the first of {' and '.join(map(str, g))} where every point resolves "
             "(`patchkit diff` names it)" for g in groups]
    if s.recipe.target.script:
        return f"patches:  {', '.join(named)}"
    return (f"patches:  {', '.join(named)}\n"
            f"          ({s.recipe.target.distribution} {installed.shown or '(version unknown)'}, "
            f"from {installed.version_from})" + (f"\n          note: {note}" if note else ""))


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path())
def validate(files: Sequence[str]) -> None:
    """Check recipe files; print each problem as file:line:col."""
    import patchkit

    bad = 0
    for name in files:
        try:
            settings = patchkit.load_recipe(Path(name))
        except PatchkitError as exc:
            bad += 1
            say(f"error: {exc.render()}")
        else:
            for warning in settings.recipe.warnings:
                from patchkit.core.printable import printable

                say(f"warning: {printable(warning)}")
            say(f"ok: {name}")
    say(f"{len(files) - bad} valid, {bad} invalid")
    if bad:
        sys.exit(1)


@click.command("test")
@click.argument("recipes", nargs=-1, shell_complete=complete_recipes)
def test(recipes: Sequence[str]) -> None:
    """Run recipes' own examples (all built-in recipes by default)."""
    import patchkit

    settings = [patchkit.load(r) for r in recipes] if recipes else patchkit.all_recipes()
    passed = failed = 0
    for s in settings:
        for outcome in patchkit.run_examples(s):
            if outcome.ok:
                passed += 1
                say(f"PASS {s.id}: {outcome.example.name}")
            else:
                failed += 1
                where = outcome.example.where
                say(f"FAIL {where}: {s.id}: {outcome.example.name}: {outcome.message}")
    click.echo(f"{passed} passed, {failed} failed")
    if failed:
        sys.exit(1)
