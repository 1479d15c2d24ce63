"""``patchkit points`` and ``patchkit new``: recipes for code no built-in recipe covers.

``points`` prints a function as an outline (:func:`patchkit.outline`), each line with the recipe point that puts
a line there; ``new`` writes a recipe from such points (:func:`patchkit.new_recipe`).
"""

from __future__ import annotations

import json
from typing import Optional

import click

from patchkit.cli.options import BackendChoice, complete_recipes, root_option

POINT_HELP = ("TARGET then the point, as `patchkit points` prints it: recipe keys, each `key: value`, values in YAML, "
              "e.g. \"pkg.mod:Trainer.fit at: loop_end loop: {iter: batches}\" or "
              "\"pkg.mod:Trainer.fit at: before_loop loop: {iter: batches} action: start\". "
              "Keys: nested, at, call, loop (a bare name is {iter: NAME}), action, name, count, when, guard, reason. "
              "Repeat for each point.")

WIDTH = 60  # the code column


def _code(text: str) -> str:
    return text if len(text) <= WIDTH else text[:WIDTH - 3] + "..."


@click.command("points")
@click.argument("target")
@root_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.option("--all", "every", is_flag=True, help="every point each line takes (default: the first of each)")
def points_cmd(target: str, root: Optional[str], as_json: bool, every: bool) -> None:
    """The function TARGET names, as an outline: its loops, calls, blocks and returns, each line numbered as in
    the file and followed by the recipe point that puts a line there.

    TARGET: module:Class.method, module:function, or path/to/file.py::Class.method (a relative path is read under
    --root when one is given).  Copy a point into `patchkit new ID --point "TARGET POINT"`, or into a recipe's
    points (with the class: and method: it names).
    """
    import patchkit
    from patchkit.core.printable import printable
    from patchkit.authoring.spec import spell

    ref, found = patchkit.outline(target, root)
    version = ref.installed.shown if ref.installed else None
    if as_json:
        click.echo(json.dumps({
            "target": target, "file": str(ref.path), "relpath": ref.relpath, "package": ref.package or None,
            "distribution": ref.distribution or None, "version": version, "scope": found.scope,
            "entries": [{"line": e.line, "code": e.code, "kind": e.kind, "points": [dict(p) for p in e.points],
                         "spelled": [spell(p) for p in e.points], "note": e.note} for e in found.entries]}, indent=2))
        return
    origin = f"{ref.distribution} {version or '(version unknown)'}, " if ref.package else ""
    out = [f"{ref.qualname} in {ref.relpath}  ({origin}{ref.path})",
           "a point in it: " + spell_scope(found.scope) + " and one of the points below",
           *([] if every else _also(found.entries)), ""]
    for e in found.entries:
        shown = e.points if every or e.kind == "def" else e.points[:1]
        first = spell(shown[0]) if shown else (f"# {e.note}" if e.note else "")
        out.append(f"{e.line:>6}  {_code(e.code).ljust(WIDTH)}  {first}".rstrip())
        out += [" " * (6 + 2 + WIDTH + 2) + spell(p) for p in shown[1:]]
    click.echo(printable("\n".join(out), keep="\n"))


def _also(entries) -> list:
    """The hint for the points a line offers beyond the first one shown (from the kinds found, none named here)."""
    also: dict = {}
    for e in entries:
        if e.kind != "def" and len(e.points) > 1:
            more = also.setdefault(e.points[0]["at"], [])
            more += [p["at"] for p in e.points[1:] if p["at"] not in more]
    if not also:
        return []
    return ["(" + "; ".join(f"{first}: also {', '.join(more)}" for first, more in also.items()) + "; --all lists each)"]


def spell_scope(scope) -> str:
    return " ".join(f"{k}: {v}" for k, v in scope.items())


@click.command("new")
@click.argument("recipe_id", metavar="ID")
@click.option("--point", "point_specs", multiple=True, required=True, metavar='"TARGET KEY: VALUE ..."',
              help=POINT_HELP)
@click.option("--from", "start_from", metavar="RECIPE", shell_complete=complete_recipes,
              help="start from this recipe's backend, profiler, schedule and notes (not its points)")
@root_option
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="the file to write (default: ./ID.yaml)")
@click.option("--backend", type=BackendChoice(), default=None,
              help="the recipe's backend (default: --from's, else the one the target's environment has: npu where "
                   "torch_npu is installed, else torch)")
def new_cmd(recipe_id, point_specs, start_from, root, output, backend) -> None:
    """Write the recipe ID.yaml for the points asked: its target (the package, file and version range where
    TARGET lives, or the script, path/to/train.py::NAME, a job runs as __main__), the schedule and profiler keys
    with their defaults, and a before/after example made from the real function. It prints the commands that
    come next, each as it works from here (with --root where the target needs one): `patchkit test`, `diff`,
    `apply` and `revert`.

    An existing file is never overwritten.
    """
    import shlex

    import patchkit

    written = patchkit.new_recipe(recipe_id, point_specs, start_from, root, output, backend)
    say = lambda text: click.echo(text, err=True)  # noqa: E731
    count = f"{len(written.points)} point{'s' if len(written.points) > 1 else ''}"
    names = dict.fromkeys(".".join(p[k] for k in ("class", "method", "function", "nested") if p.get(k))
                          for p in written.points)
    what = f"{written.ref.relpath}, {written.versions or 'any version'}" if written.ref.package else \
        f"the script {written.ref.path}"
    say(f"wrote {written.path}: {count} in {', '.join(names)} ({what})")
    for line in written.described:
        say(f"  {line}")
    if not backend and not start_from:  # the backend new picked: said, with why
        from patchkit.authoring.backendpick import pick

        picked = pick(written.ref)
        say(f"backend: {picked.backend}, since {picked.why}; --backend B chooses another")
    recipe = shlex.quote(written.shown)
    where = f" --root {shlex.quote(written.root)}" if written.root else ""
    say(f"check it: patchkit test {recipe}; preview: patchkit diff {recipe}{where}")
    say(f"patch the file: patchkit apply {recipe}{where}; undo: patchkit revert {shlex.quote(recipe_id)}")
