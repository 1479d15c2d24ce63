"""Try every built-in recipe on the releases newer than the ones the tests pin (for maintainers).

For each target distribution of ``tests/realwheels.py``'s table (vllm-ascend,
sglang, verl, vllm), ask the registry (``pip index versions --pre NAME``)
for the releases newer than the newest the table pins, fetch each (its
wheel, or its sdist where it has none) into the same cache the real-target
tests use, and run each built-in recipe of that distribution on it through
patchkit's API.  One row per recipe and release:

    RESULT    applies         the version is in the recipe's range and every point fits
              beyond (note)   newer than the range, every point fits: applied, with the note patchkit prints
              refused         the recipe does not apply; NOTE says why, in one line
    EXAMPLES  ok, or how many of the recipe's own before/after examples fail (``patchkit test``)
    SHAPE     same            each inserted line has the same enclosing class and function, loop nesting,
                              text and statement just before it as on the newest proven release (the
                              newest release in the table inside the recipe's range); line numbers aside
              differs         the first difference is in NOTE
              n/a             nothing to compare (refused, or no proven release in the table)

The lines patchkit puts at the top of a module (the runtime's import) are the
same on every release and are left out of SHAPE.  Only each recipe's default
options are tried.

    python scripts/sweep.py                                  # every target, releases newer than the table
    python scripts/sweep.py --package vllm-ascend            # one target
    python scripts/sweep.py --package vllm-ascend --versions 0.25.1rc1,0.26.0rc1
    python scripts/sweep.py --json

Exit status 0 when the sweep ran, whatever it found; 1 when the registry could
not be asked; 2 for a wrong argument.  Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's patchkit
sys.path.insert(0, str(Path(__file__).resolve().parent))  # sweep_shapes, beside this script

import patchkit  # noqa: E402
from patchkit.core.errors import PatchkitError  # noqa: E402
from patchkit.recipe.versions import covers  # noqa: E402
from sweep_shapes import Shape, compare, shapes, squeeze  # noqa: E402,F401  (Shape: for the tests)


def _load_realwheels():
    """tests/realwheels.py, by its path (the tests import it by name: the same module either way)."""
    if "realwheels" in sys.modules:
        return sys.modules["realwheels"]
    spec = importlib.util.spec_from_file_location("realwheels", REPO / "tests" / "realwheels.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["realwheels"] = module
    spec.loader.exec_module(module)
    return module


realwheels = _load_realwheels()


# --------------------------------------------------------------------------
# Pure parts: which versions, the shape of the inserted lines, the table
# --------------------------------------------------------------------------


def parse_index_versions(text: str) -> List[str]:
    """The versions in ``pip index versions`` output (its ``Available versions:`` line)."""
    for line in text.splitlines():
        if line.strip().startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    return []


def newer_than(available: Iterable[str], pinned: str) -> List[str]:
    """The versions above ``pinned``, oldest first (a string that is no version is dropped)."""
    out = []
    for v in available:
        try:
            if Version(v) > Version(pinned):
                out.append(v)
        except InvalidVersion:
            continue
    return sorted(set(out), key=Version)


def newest_pinned(dist: str) -> str:
    return max((r.version for r in realwheels.releases(dist)), key=Version)


def proven_release(dist: str, versions: str) -> Optional[str]:
    """The newest release of the table inside ``versions``: where a recipe is proven."""
    inside = [r.version for r in realwheels.releases(dist) if covers(versions, r.version)]
    return max(inside, key=Version) if inside else None


class Row(NamedTuple):
    recipe: str
    version: str
    result: str  # applies | beyond (note) | refused | not fetched
    examples: str
    shape: str
    note: str = ""


HEADERS = ("RECIPE", "VERSION", "RESULT", "EXAMPLES", "SHAPE", "NOTE")


def table(rows: Sequence[Row]) -> str:
    """The rows as aligned columns, NOTE last (it may be long)."""
    cells = [HEADERS] + [tuple(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADERS) - 1)]
    out = []
    for c in cells:
        out.append("  ".join(c[i].ljust(widths[i]) for i in range(len(widths))) + ("  " + c[-1] if c[-1] else ""))
    return "\n".join(line.rstrip() for line in out) + "\n"


def one_line(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc)
    return squeeze(message.splitlines()[0] if message else type(exc).__name__)


# --------------------------------------------------------------------------
# The sweep: the registry, the downloads, the API
# --------------------------------------------------------------------------


def registry_versions(dist: str) -> List[str]:
    done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "--pre", "--disable-pip-version-check",
                           dist], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    found = parse_index_versions(done.stdout)
    if done.returncode != 0 or not found:
        raise RuntimeError("pip index versions --pre %s: exit %d\n%s" % (dist, done.returncode, done.stderr.strip()))
    return found


def _recipes(dist: str) -> List[object]:
    return [s for s in patchkit.all_recipes()
            if canonicalize_name(s.recipe.target.distribution) == canonicalize_name(dist)]


def _candidate_files(recipes: Sequence[object]) -> List[str]:
    files: List[str] = []
    for s in recipes:
        for f in list(s.recipe.target.files) + [f for p in s.recipe.points for f in p.files]:
            if f not in files:
                files.append(f)
    return files


def _plan_shapes(plan, recipe_id: str) -> List[Shape]:
    out: List[Shape] = []
    for f in plan.files:
        out += shapes(getattr(f.result, "text", f.text), recipe_id)
    return out


def try_recipe(recipe_id: str, versions: str, version: str, root: Path):
    """(result, note, plan or None) for one recipe on one root."""
    try:  # strict_versions=False: PATCHKIT_STRICT_VERSIONS in the environment must not make every row a refusal
        plan = patchkit.plan_recipe(recipe_id, root=str(root), strict_versions=False)
    except PatchkitError as exc:
        return "refused", one_line(exc), None
    note = getattr(plan, "version_note", "")  # newer than the range, applied: patchkit's own note
    return ("beyond (note)", squeeze(note), plan) if note else ("applies", "", plan)


def _examples(settings) -> str:
    outcomes = patchkit.run_examples(settings)
    failed = [o for o in outcomes if not o.ok]
    return "ok" if not failed else "%d of %d fail" % (len(failed), len(outcomes))


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def sweep(dist: str, versions: Sequence[str]) -> Tuple[List[Row], Dict[str, Optional[str]]]:
    """The rows for ``versions`` of ``dist``, and the proven release each recipe's shape is compared with."""
    recipes = _recipes(dist)
    files = _candidate_files(recipes)
    examples = {s.id: _examples(s) for s in recipes}
    baselines: Dict[str, Tuple[Optional[str], Optional[List[Shape]], str]] = {}
    for s in recipes:
        proven = proven_release(dist, s.recipe.target.versions)
        if proven is None:
            baselines[s.id] = (None, None, "no release of the table in %s" % s.recipe.target.versions)
            continue
        try:
            plan = patchkit.plan_recipe(s.id, root=str(realwheels.release_root(dist, proven)))
            baselines[s.id] = (proven, _plan_shapes(plan, s.id), "")
        except PatchkitError as exc:
            baselines[s.id] = (proven, None, "on %s: %s" % (proven, one_line(exc)))
    rows: List[Row] = []
    for version in versions:
        _say("fetching %s==%s ..." % (dist, version))
        try:
            info = realwheels.fetch_release(realwheels.Release(dist, version, ()), files)
        except realwheels.RealWheelError as exc:
            rows.append(Row("*", version, "not fetched", "", "", one_line(exc)))
            continue
        if not info["cached"]:
            _say("  %s %.1f MB in %.1f s" % (info["file"], int(info["bytes"]) / 1e6, info["download_s"]))
        root = Path(info["root"])  # type: ignore[arg-type]
        for s in recipes:
            result, note, plan = try_recipe(s.id, s.recipe.target.versions, version, root)
            note = note.replace(str(root), "<root>")
            proven, base, why = baselines[s.id]
            if plan is None:
                shape = "n/a"
            elif base is None:
                shape, note = "n/a", "; ".join(n for n in (note, why) if n)
            else:
                shape, diff = compare(base, _plan_shapes(plan, s.id), proven)
                note = "; ".join(n for n in (note, diff) if n)
            rows.append(Row(s.id, version, result, examples[s.id], shape, note))
    return rows, {rid: b[0] for rid, b in baselines.items()}


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", help="sweep one target distribution (e.g. vllm-ascend)")
    ap.add_argument("--versions", help="comma-separated versions to sweep instead of the registry's newer ones "
                                       "(with --package)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = ap.parse_args(argv)
    targets: List[str] = []
    for r in realwheels.RELEASES:
        if canonicalize_name(r.dist) not in [canonicalize_name(t) for t in targets]:
            targets.append(r.dist)
    if args.package:
        chosen = [t for t in targets if canonicalize_name(t) == canonicalize_name(args.package)]
        if not chosen:
            ap.error("--package: %s is not a target of tests/realwheels.py (%s)" % (args.package, ", ".join(targets)))
        targets = chosen
    if args.versions and not args.package:
        ap.error("--versions needs --package")
    rows: List[Row] = []
    swept = []
    for dist in targets:
        pinned = newest_pinned(dist)
        if args.versions:
            versions = [v.strip() for v in args.versions.split(",") if v.strip()]
        else:
            try:
                versions = newer_than(registry_versions(dist), pinned)
            except RuntimeError as exc:
                _say(str(exc))
                return 1
        done = {"package": dist, "newest_pinned": pinned, "versions": versions, "shapes_from": {}}
        if versions:
            got, done["shapes_from"] = sweep(dist, versions)
            rows += got
        swept.append(done)
    if args.json:
        print(json.dumps({"packages": swept, "rows": [r._asdict() for r in rows]}, indent=1))
        return 0
    for s in swept:
        print("%s: newest in the tests %s; swept %s" % (s["package"], s["newest_pinned"],
                                                        ", ".join(s["versions"]) or "nothing (none newer)"))
        if s["shapes_from"]:
            print("  shapes compared with: " + ", ".join("%s %s" % (rid, v or "-") for rid, v in s["shapes_from"].items()))
    if rows:
        print()
        print(table(rows), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
