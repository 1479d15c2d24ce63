"""Engine speed: `patchkit diff` against a naive libcst codemod, on the real target files.

For each built-in recipe, on its newest supported release (real wheels,
fetched by tests/realwheels.py into a cache outside the repository), each
command runs in a fresh interpreter that first imports the same libraries
the comparison allows for, then times the rest:

    patchkit work = `import libcst, click, yaml`, then time `patchkit diff RECIPE --root R`
                    (patchkit's own imports, recipe, version check, transform, diff output)
    naive work    = `import libcst`, then time, for each file: libcst.parse_module,
                    a do-nothing CSTTransformer over the whole tree, .code

This is "wall time minus the start-up of a bare interpreter importing the
same libraries", measured inside the process, so interpreter start-up noise
does not enter.  Rounds are interleaved; the best run of each counts (a busy
neighbour only ever adds time).  Goal: patchkit work <= 1/4 of the naive work.

    python bench/engine.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import realwheels  # noqa: E402
from _timing import PYTHON, env_with, verdict  # noqa: E402

from patchkit import api  # noqa: E402

GOAL = 0.25
PATCHKIT = """\
import libcst, click, yaml
import sys, time
start = time.perf_counter()
from patchkit.cli import main
try:
    main(sys.argv[1:], prog_name="patchkit")
except SystemExit as exc:
    if exc.code:
        raise
sys.stderr.write("WORK %.6f\\n" % (time.perf_counter() - start))
"""
NAIVE = """\
import libcst
import sys, time
start = time.perf_counter()

class Nothing(libcst.CSTTransformer):
    pass

for path in sys.argv[1:]:
    with open(path, "rb") as handle:
        module = libcst.parse_module(handle.read())
    module.visit(Nothing()).code
sys.stderr.write("WORK %.6f\\n" % (time.perf_counter() - start))
"""


def newest(settings):
    target = settings.recipe.target
    spec = SpecifierSet(target.versions)
    releases = [r for r in realwheels.releases() if r.dist.replace("_", "-") == target.distribution
                and spec.contains(Version(r.version), prereleases=True)]
    return max(releases, key=lambda r: Version(r.version)) if releases else None


def _line_fit(points):
    """Least-squares ``a + b * lines`` through (lines, seconds) points."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / var if var else 0.0
    return mean_y - slope * mean_x, slope


def work(cmd, env) -> float:
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("WORK ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{done.stderr[-2000:]}")
    return float(lines[-1].split()[1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="patchkit-bench-"))
    (tmp / "patchkit_diff.py").write_text(PATCHKIT)
    (tmp / "naive.py").write_text(NAIVE)
    env = env_with(PATCHKIT_HOME=tmp / "state")
    rows, worst, without = [], 0.0, []
    for settings in api.all_recipes():
        rel = newest(settings)
        if rel is None:  # MindSpeed-RL is run from git checkouts: no released wheel to measure on
            without.append(settings.id)
            continue
        root = realwheels.release_root(rel.dist, rel.version)
        files = [str(f.path) for f in api.plan(settings, str(root)).files]
        lines = sum(len(Path(f).read_bytes().splitlines()) for f in files)
        mine_cmd = [PYTHON, str(tmp / "patchkit_diff.py"), "diff", settings.id, "--root", str(root)]
        naive_cmd = [PYTHON, str(tmp / "naive.py"), *files]
        work(mine_cmd, env), work(naive_cmd, env)  # warm-up: .pyc files, page cache
        mine, theirs = [], []
        for _ in range(args.rounds):
            mine.append(work(mine_cmd, env))
            theirs.append(work(naive_cmd, env))
        ratio = min(mine) / min(theirs)
        worst = max(worst, ratio)
        rows.append((settings.id, f"{rel.dist} {rel.version}", lines, min(mine), min(theirs), ratio))
    print(f"engine: patchkit diff vs a naive libcst codemod (best of {args.rounds} interleaved rounds; "
          "work = time after importing the same libraries)")
    print(f"  {'recipe':22s} {'release':18s} {'lines':>6s} {'patchkit':>10s} {'naive':>10s} {'ratio':>7s}")
    for rid, rel, lines, mine, theirs, ratio in rows:
        print(f"  {rid:22s} {rel:18s} {lines:6d} {mine * 1e3:8.1f}ms {theirs * 1e3:8.1f}ms {ratio:7.3f}")
    total = sum(r[3] for r in rows) / sum(r[4] for r in rows)
    fixed, per_line = _line_fit([(r[2], r[3]) for r in rows])
    naive_fixed, naive_per_line = _line_fit([(r[2], r[4]) for r in rows])
    margin = GOAL * naive_per_line - per_line
    even = f"from about {(fixed - GOAL * naive_fixed) / margin:.0f} lines on" if margin > 0 else "never"
    print(f"  fitted: patchkit {fixed * 1e3:.1f} ms + {per_line * 1e6:.1f} us/line, naive {naive_fixed * 1e3:.1f} ms + "
          f"{naive_per_line * 1e6:.0f} us/line: within the goal {even}")
    if without:
        print(f"  no released wheel to measure on (source-checkout packages): {', '.join(without)}")
    print(f"  all recipes together {total:.3f}; worst single recipe {worst:.3f}; goal <= {GOAL}: {verdict(worst, GOAL)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
