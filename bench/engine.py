"""Engine speed: `patchkit diff` against the floor of any libcst engine, on the real target files.

For each built-in recipe, on the file its newest supported release patches
(real wheels, fetched by tests/realwheels.py into a cache outside the
repository), three whole processes are timed as the user waits for them
(wall time from start to exit, interpreter start-up and imports included):

    patchkit  `python -m patchkit diff RECIPE --root R`
    floor     `import libcst, click, yaml`, then `libcst.parse_module(text).code` on the same file:
              what any libcst codemod of this file costs at least (patchkit's own libraries loaded,
              the file parsed and printed back)
    naive     the floor plus a do-nothing `CSTTransformer` over the whole tree (the codemod written
              without skipping anything), for reference
    gc off    the floor with the cyclic garbage collector paused, for reference: patchkit's commands
              run with it paused, which on the largest file saves more than all of patchkit's own work
              costs, so `/gc off` is the honest figure for what patchkit adds to a libcst round trip

They take turns, round after round; a time is the median of its rounds, a
ratio the median of the round-by-round ratios (on a shared machine a burst of
other work slows both sides of one round, and drops out of their ratio).
Goal: patchkit <= 1.25 x the floor for every recipe.

    python bench/engine.py [--rounds 9]
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Sequence

from packaging.specifiers import SpecifierSet
from packaging.version import Version

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import realwheels  # noqa: E402
from _timing import PYTHON, env_with, verdict  # noqa: E402

import patchkit  # noqa: E402

GOAL = 1.25
FLOOR = """\
import sys
import click, libcst, yaml
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as handle:
        libcst.parse_module(handle.read()).code
"""
FLOOR_GC_OFF = "import gc\ngc.disable()\n" + FLOOR
NAIVE = """\
import sys
import click, libcst, yaml

class Nothing(libcst.CSTTransformer):
    pass

for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as handle:
        libcst.parse_module(handle.read()).visit(Nothing()).code
"""


def newest(settings):
    target = settings.recipe.target
    spec = SpecifierSet(target.versions)
    releases = [r for r in realwheels.releases() if r.dist.replace("_", "-") == target.distribution
                and spec.contains(Version(r.version), prereleases=True)]
    return max(releases, key=lambda r: Version(r.version)) if releases else None


def wall(cmd: Sequence[str], env) -> float:
    """Seconds from starting the process to its exit: what the user waits for."""
    start = time.perf_counter()
    done = subprocess.run(list(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    spent = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{done.stderr.decode()[-2000:]}")
    return spent


def interleaved(commands: Dict[str, Sequence[str]], rounds: int, env) -> Dict[str, List[float]]:
    """Each command's times, the commands taking turns round after round (each round starting one further on)."""
    times: Dict[str, List[float]] = {name: [] for name in commands}
    names = list(commands)
    for cmd in commands.values():  # warm-up: .pyc files written, files in the page cache
        wall(cmd, env)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(wall(commands[name], env))
    return times


def paired(mine: List[float], theirs: List[float]) -> float:
    """The median of the round-by-round ratios: a neighbour's burst slows both sides of one round."""
    return statistics.median(a / b for a, b in zip(mine, theirs))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="patchkit-bench-"))
    atexit.register(shutil.rmtree, tmp, True)
    (tmp / "floor.py").write_text(FLOOR)
    (tmp / "naive.py").write_text(NAIVE)
    (tmp / "floor_gc_off.py").write_text(FLOOR_GC_OFF)
    env = env_with(PATCHKIT_HOME=tmp / "state")
    rows, without = [], []
    for settings in patchkit.all_recipes():
        rel = newest(settings)
        if rel is None:  # MindSpeed-RL is run from git checkouts: no released wheel to measure on
            without.append(settings.id)
            continue
        root = realwheels.release_root(rel.dist, rel.version)
        files = [str(f.path) for f in patchkit.plan(settings, str(root)).files]
        lines = sum(len(Path(f).read_bytes().splitlines()) for f in files)
        t = interleaved({
            "patchkit": [PYTHON, "-m", "patchkit", "diff", settings.id, "--root", str(root)],
            "floor": [PYTHON, str(tmp / "floor.py"), *files],
            "naive": [PYTHON, str(tmp / "naive.py"), *files],
            "gc off": [PYTHON, str(tmp / "floor_gc_off.py"), *files],
        }, args.rounds, env)
        rows.append((settings.id, f"{rel.dist} {rel.version}", lines, t))
    print(f"engine: `patchkit diff` against a libcst round trip of the same file (the floor), a naive codemod and "
          f"the floor with the garbage collector paused; whole processes, wall time, {args.rounds} interleaved rounds "
          "(times: medians; ratios: medians of the round-by-round ratios)")
    print(f"  {'recipe':22s} {'release':18s} {'lines':>5s} {'patchkit':>8s} {'floor':>8s} {'naive':>8s} {'gc off':>8s}"
          f" {'/floor':>7s} {'/naive':>7s} {'/gc off':>7s}")
    worst = 0.0
    for rid, rel, lines, t in rows:
        mine = t["patchkit"]
        ratio = paired(mine, t["floor"])
        worst = max(worst, ratio)
        times = " ".join(f"{statistics.median(t[name]) * 1e3:6.0f}ms" for name in ("patchkit", "floor", "naive", "gc off"))
        print(f"  {rid:22s} {rel:18s} {lines:5d} {times} {ratio:7.2f} {paired(mine, t['naive']):7.2f} "
              f"{paired(mine, t['gc off']):7.2f}")
    if without:
        print(f"  no released wheel to measure on (source-checkout packages): {', '.join(without)}")
    print(f"  worst patchkit / floor {worst:.2f}; goal <= {GOAL}: {verdict(worst, GOAL)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
