"""Engine speed: `patchkit diff` against a naive libcst codemod, on the real target files.

For each built-in recipe, on its newest supported release (real wheels,
fetched by tests/realwheels.py into a cache outside the repository):

    patchkit work = cpu(patchkit diff RECIPE --root R) - cpu(python -c "import libcst, click, yaml")
    naive work    = wall(python naive.py FILE...)       - cpu(python -c "import libcst")

where cpu() is the CPU time (user + system) of the process, and naive.py parses each file with libcst, runs a do-nothing transformer
over the whole tree and generates the code, in one process per file.  The
commands run interleaved, N rounds, medians.  Goal: patchkit work <= 1/4 of
the naive work.

    python bench/engine.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import realwheels  # noqa: E402
from _timing import PYTHON, env_with, interleaved, verdict  # noqa: E402

from patchkit import api  # noqa: E402

GOAL = 0.25
NAIVE = """\
import sys
import libcst

class Nothing(libcst.CSTTransformer):
    pass

for path in sys.argv[1:]:
    with open(path, "rb") as handle:
        module = libcst.parse_module(handle.read())
    module.visit(Nothing()).code
"""


def newest(settings):
    target = settings.recipe.target
    spec = SpecifierSet(target.versions)
    releases = [r for r in realwheels.releases() if r.dist.replace("_", "-") == target.distribution
                and spec.contains(Version(r.version), prereleases=True)]
    return max(releases, key=lambda r: Version(r.version)) if releases else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="patchkit-bench-"))
    naive = work / "naive.py"
    naive.write_text(NAIVE)
    env = env_with(PATCHKIT_HOME=work / "state")
    rows, worst, without = [], 0.0, []
    for settings in api.all_recipes():
        rel = newest(settings)
        if rel is None:  # MindSpeed-RL is run from git checkouts: no released wheel to measure on
            without.append(settings.id)
            continue
        root = realwheels.release_root(rel.dist, rel.version)
        files = [str(f.path) for f in api.plan(settings, str(root)).files]
        lines = sum(len(Path(f).read_bytes().splitlines()) for f in files)
        t = interleaved({
            "patchkit": [PYTHON, "-m", "patchkit", "diff", settings.id, "--root", str(root)],
            "base_pk": [PYTHON, "-c", "import libcst, click, yaml"],
            "naive": [PYTHON, str(naive), *files],
            "base_naive": [PYTHON, "-c", "import libcst"],
        }, args.rounds, env)
        mine, theirs = t["patchkit"] - t["base_pk"], t["naive"] - t["base_naive"]
        ratio = max(mine, 0.0) / theirs
        worst = max(worst, ratio)
        rows.append((settings.id, f"{rel.dist} {rel.version}", lines, mine, theirs, ratio))
    print(f"engine: patchkit diff vs a naive libcst codemod (medians of {args.rounds} interleaved rounds; "
          f"work = CPU time - that of an interpreter with the same imports)")
    print(f"  {'recipe':22s} {'release':18s} {'lines':>6s} {'patchkit':>10s} {'naive':>10s} {'ratio':>7s}")
    for rid, rel, lines, mine, theirs, ratio in rows:
        print(f"  {rid:22s} {rel:18s} {lines:6d} {mine * 1e3:8.1f}ms {theirs * 1e3:8.1f}ms {ratio:7.3f}")
    if without:
        print(f"  no released wheel to measure on (source-checkout packages): {', '.join(without)}")
    print(f"  worst ratio {worst:.3f}; goal <= {GOAL}: {verdict(worst, GOAL)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
