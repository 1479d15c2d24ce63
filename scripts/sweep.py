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

Backwards (``--older``): the releases older than the oldest the table pins,
newest first, with the version check skipped (``--skip-version-check``), so
that a refusal is the structure's (the point that does not resolve, the file
that is not there) and SHAPE is compared with the OLDEST proven release.  A
recipe is tried down to the first release that lacks every one of its
candidate files: that release gets one row, ``no target``, and older ones are
not tried for it.  The older sweep adds a column:

    REVERT    exact           applied to a copy of the release's files and reverted: the same bytes back
              differs         the files that did not come back
              n/a             nothing applied

``--sample minor`` tries only the newest release of each minor line (X.Y) and
is what a distribution with big wheels (vllm: 300-500 MB each) is swept with by
default (:data:`SAMPLED`); ``--sample all`` tries every release.

    python scripts/sweep.py                                  # every target, releases newer than the table
    python scripts/sweep.py --package vllm-ascend            # one target
    python scripts/sweep.py --package vllm-ascend --versions 0.25.1rc1,0.26.0rc1
    python scripts/sweep.py --json
    python scripts/sweep.py --older                          # every target, releases older than the table
    python scripts/sweep.py --older --package vllm --sample all

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


def older_than(available: Iterable[str], pinned: str) -> List[str]:
    """The versions below ``pinned``, newest first (the order the older sweep walks them)."""
    out = []
    for v in available:
        try:
            if Version(v) < Version(pinned):
                out.append(v)
        except InvalidVersion:
            continue
    return sorted(set(out), key=Version, reverse=True)


def newest_of_each_minor(versions: Iterable[str]) -> List[str]:
    """The newest release of each X.Y line (pre- and post-releases count), in the order given."""
    newest: Dict[Tuple[int, ...], str] = {}
    for v in versions:
        line = tuple((Version(v).release + (0,))[:2])
        if line not in newest or Version(v) > Version(newest[line]):
            newest[line] = v
    keep = set(newest.values())
    return [v for v in versions if v in keep]


# distributions swept backwards one release per minor line unless --sample all: their wheels are big
SAMPLED = {"vllm": "minor"}


def oldest_pinned(dist: str) -> str:
    return min((r.version for r in realwheels.releases(dist)), key=Version)


def older_starts(dist: str) -> Dict[str, str]:
    """Where the older sweep starts for each recipe of ``dist``: below its oldest proven release (the table's
    oldest release of ``dist`` for a recipe proven on none), so a recipe whose range starts later is tried on the
    table's releases below its range too."""
    return {s.id: oldest_proven(dist, s.recipe.target.versions) or oldest_pinned(dist) for s in _recipes(dist)}


def newest_pinned(dist: str) -> str:
    return max((r.version for r in realwheels.releases(dist)), key=Version)


def proven_release(dist: str, versions: str) -> Optional[str]:
    """The newest release of the table inside ``versions``: where a recipe is proven."""
    inside = [r.version for r in realwheels.releases(dist) if covers(versions, r.version)]
    return max(inside, key=Version) if inside else None


def oldest_proven(dist: str, versions: str) -> Optional[str]:
    """The oldest release of the table inside ``versions``: the one an older release is compared with."""
    inside = [r.version for r in realwheels.releases(dist) if covers(versions, r.version)]
    return min(inside, key=Version) if inside else None


class Row(NamedTuple):
    recipe: str
    version: str
    result: str  # applies | beyond (note) | refused | not fetched | older: placed | no target
    examples: str
    shape: str
    note: str = ""
    revert: str = ""  # the older sweep: exact | differs (...) | n/a


HEADERS = ("RECIPE", "VERSION", "RESULT", "EXAMPLES", "SHAPE", "NOTE")


def table(rows: Sequence[Row]) -> str:
    """The rows as aligned columns, NOTE last (it may be long); REVERT before it when any row has one."""
    revert = any(r.revert for r in rows)
    heads = HEADERS[:-1] + ("REVERT",) * revert + HEADERS[-1:]
    cells = [heads] + [tuple(r[:5]) + (r.revert,) * revert + (r.note,) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(heads) - 1)]
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


def try_recipe(recipe_id: str, versions: str, version: str, root: Path, skip_version_check: bool = False):
    """(result, note, plan or None) for one recipe on one root.  ``skip_version_check`` (the older sweep): the
    structure alone decides, and a refusal names where it fails (the file, line and point), not the version."""
    try:  # strict_versions=False: PATCHKIT_STRICT_VERSIONS in the environment must not make every row a refusal
        plan = patchkit.plan_recipe(recipe_id, root=str(root), strict_versions=False,
                                    skip_version_check=skip_version_check)
    except PatchkitError as exc:
        where = getattr(exc, "where", None)
        path = getattr(where, "path", "") if where is not None else ""
        at = ""
        if path and Path(path).is_absolute() and Path(path).resolve().is_relative_to(root.resolve()):
            at = "%s:%s: " % (Path(path).resolve().relative_to(root.resolve()).as_posix(), getattr(where, "line", "?"))
        return "refused", at + one_line(exc), None
    if skip_version_check:
        return "placed", "", plan
    note = getattr(plan, "version_note", "")  # newer than the range, applied: patchkit's own note
    return ("beyond (note)", squeeze(note), plan) if note else ("applies", "", plan)


def reverts_exactly(recipe_id: str, root: Path) -> str:
    """Apply ``recipe_id`` to a copy of ``root`` (version check skipped), revert it: ``exact`` when every byte of
    every file came back, else ``differs (FILES)``; ``n/a (why)`` when it did not apply."""
    import shutil
    import tempfile

    from patchkit.state.ledger import Ledger

    def snapshot(top: Path) -> Dict[str, bytes]:
        return {p.relative_to(top).as_posix(): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()}

    with tempfile.TemporaryDirectory(prefix="patchkit-sweep-") as tmp:
        copy = Path(tmp) / "root"
        shutil.copytree(str(root), str(copy))
        before = snapshot(copy)
        ledger = Ledger(Path(tmp) / "state")
        try:
            outcomes = patchkit.apply(patchkit.load(recipe_id), str(copy), ledger=ledger, skip_version_check=True,
                                      strict_versions=False)
        except PatchkitError as exc:
            return "n/a (%s)" % one_line(exc)
        if not any(o.state.written for o in outcomes):
            return "n/a (nothing written)"
        patchkit.revert([recipe_id], ledger=ledger)
        after = snapshot(copy)
        if after == before:
            return "exact"
        return "differs (%s)" % ", ".join(sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k)))


def _examples(settings) -> str:
    outcomes = patchkit.run_examples(settings)
    failed = [o for o in outcomes if not o.ok]
    return "ok" if not failed else "%d of %d fail" % (len(failed), len(outcomes))


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _fetched(dist: str, version: str, files, rows: List[Row]) -> Optional[Path]:
    """The root of ``dist==version``'s target files (fetched once into the cache); None, with a row saying why, when
    it could not be fetched."""
    _say("fetching %s==%s ..." % (dist, version))
    try:
        info = realwheels.fetch_release(realwheels.Release(dist, version, ()), files)
    except realwheels.RealWheelError as exc:
        rows.append(Row("*", version, "not fetched", "", "", one_line(exc)))
        return None
    if not info["cached"]:
        _say("  %s %.1f MB in %.1f s" % (info["file"], int(info["bytes"]) / 1e6, info["download_s"]))
    return Path(info["root"])  # type: ignore[arg-type]


def _baselines(dist: str, recipes, pick) -> Dict[str, Tuple[Optional[str], Optional[List[Shape]], str]]:
    """For each recipe, the proven release ``pick(dist, range)`` names, its shapes there, and why there are none."""
    baselines: Dict[str, Tuple[Optional[str], Optional[List[Shape]], str]] = {}
    for s in recipes:
        proven = pick(dist, s.recipe.target.versions)
        if proven is None:
            baselines[s.id] = (None, None, "no release of the table in %s" % s.recipe.target.versions)
            continue
        try:
            plan = patchkit.plan_recipe(s.id, root=str(realwheels.release_root(dist, proven)))
            baselines[s.id] = (proven, _plan_shapes(plan, s.id), "")
        except PatchkitError as exc:
            baselines[s.id] = (proven, None, "on %s: %s" % (proven, one_line(exc)))
    return baselines


def sweep(dist: str, versions: Sequence[str]) -> Tuple[List[Row], Dict[str, Optional[str]]]:
    """The rows for ``versions`` of ``dist``, and the proven release each recipe's shape is compared with."""
    recipes = _recipes(dist)
    files = _candidate_files(recipes)
    examples = {s.id: _examples(s) for s in recipes}
    baselines = _baselines(dist, recipes, proven_release)
    rows: List[Row] = []
    for version in versions:
        root = _fetched(dist, version, files, rows)
        if root is None:
            continue
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


def _has_target(recipe, root: Path) -> bool:
    return any((root / f).is_file() for f in _candidate_files([recipe]))


def sweep_older(dist: str, versions: Sequence[str]) -> Tuple[List[Row], Dict[str, Optional[str]]]:
    """The rows for ``versions`` of ``dist`` (newest first, older than the table), the version check skipped; each
    recipe down to the first release with none of its candidate files.  Shapes: against the oldest proven release."""
    recipes = _recipes(dist)
    files = _candidate_files(recipes)
    examples = {s.id: _examples(s) for s in recipes}
    baselines = _baselines(dist, recipes, oldest_proven)
    rows: List[Row] = []
    stopped: Dict[str, str] = {}
    starts = older_starts(dist)
    for version in versions:
        live = [s for s in recipes if s.id not in stopped and Version(version) < Version(starts[s.id])]
        if not live:
            continue
        root = _fetched(dist, version, files, rows)
        if root is None:
            continue
        for s in live:
            if not _has_target(s, root):
                stopped[s.id] = version
                rows.append(Row(s.id, version, "no target", examples[s.id], "n/a",
                                "none of %s: older releases not tried" % ", ".join(_candidate_files([s])), "n/a"))
                continue
            result, note, plan = try_recipe(s.id, s.recipe.target.versions, version, root, skip_version_check=True)
            proven, base, why = baselines[s.id]
            if plan is None:
                shape, revert = "n/a", "n/a"
            else:
                revert = reverts_exactly(s.id, root)
                if base is None:
                    shape, note = "n/a", why
                else:
                    shape, note = compare(base, _plan_shapes(plan, s.id), proven)
            note = note.replace(str(root), "<root>").replace(str(REPO) + "/", "")  # the recipe's path from the checkout
            rows.append(Row(s.id, version, result, examples[s.id], shape, note, revert))
    return rows, {rid: b[0] for rid, b in baselines.items()}


def _versions(dist: str, args) -> Tuple[str, List[str]]:
    """The pinned version swept from (the newest; with --older the newest where a recipe's proof starts) and the
    versions to sweep."""
    pinned = max(older_starts(dist).values(), key=Version) if args.older else newest_pinned(dist)
    if args.versions:
        versions = [v.strip() for v in args.versions.split(",") if v.strip()]
        return pinned, sorted(versions, key=Version, reverse=True) if args.older else versions
    available = registry_versions(dist)  # RuntimeError: the registry could not be asked
    if not args.older:
        return pinned, newer_than(available, pinned)
    versions = older_than(available, pinned)
    sample = args.sample or SAMPLED.get(canonicalize_name(dist), "all")
    return pinned, newest_of_each_minor(versions) if sample == "minor" else versions


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", help="sweep one target distribution (e.g. vllm-ascend)")
    ap.add_argument("--versions", help="comma-separated versions to sweep instead of the registry's newer ones "
                                       "(with --package)")
    ap.add_argument("--older", action="store_true", help="sweep the releases older than the table instead, newest "
                    "first, the version check skipped, each recipe down to the first release without its files")
    ap.add_argument("--sample", choices=("all", "minor"), help="with --older: every release, or the newest of each "
                    "minor line (default: minor for %s, all for the rest)" % ", ".join(sorted(SAMPLED)))
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
    if args.sample and not args.older:
        ap.error("--sample needs --older")
    rows: List[Row] = []
    swept = []
    key, which = ("proven_from", "oldest proven") if args.older else ("newest_pinned", "newest")
    for dist in targets:
        try:
            pinned, versions = _versions(dist, args)
        except RuntimeError as exc:
            _say(str(exc))
            return 1
        done = {"package": dist, key: pinned, "versions": versions, "shapes_from": {}}
        if versions:
            got, done["shapes_from"] = (sweep_older if args.older else sweep)(dist, versions)
            rows += got
            if args.older:
                done["versions"] = [v for v in versions if any(r.version == v for r in got)]
                done["stopped"] = {r.recipe: r.version for r in got if r.result == "no target"}
        swept.append(done)
    if args.json:
        print(json.dumps({"packages": swept, "rows": [r._asdict() for r in rows]}, indent=1))
        return 0
    for s in swept:
        print("%s: %s in the tests %s; swept %s" % (s["package"], which, s[key], ", ".join(s["versions"]) or
                                                   "nothing (none %s)" % ("older" if args.older else "newer")))
        if s["shapes_from"]:
            print("  shapes compared with: " + ", ".join("%s %s" % (rid, v or "-") for rid, v in s["shapes_from"].items()))
        for rid, v in s.get("stopped", {}).items():
            print("  %s: stopped at %s, which has none of its files" % (rid, v))
    if rows:
        print()
        print(table(rows), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
