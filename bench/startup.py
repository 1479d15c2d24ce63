"""Start-up: `patchkit --help`, `list`, `status`, `validate` and `show` against `python -c "import click, yaml"`.

Goal: each within 1.5 times the bare import (medians of interleaved rounds); show and validate read a recipe
and load no libcst.

    python bench/startup.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import PYTHON, env_with, interleaved, verdict  # noqa: E402

GOAL = 1.5
REPO = Path(__file__).resolve().parent.parent
RECIPE = REPO / "recipes" / "verl-fsdp-update.yaml"
SAMPLE = REPO / "fixtures" / "verl-0.6"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    home = tempfile.mkdtemp(prefix="patchkit-bench-")
    atexit.register(shutil.rmtree, home, True)
    env = env_with(PATCHKIT_HOME=home)
    t = interleaved({
        "baseline": [PYTHON, "-c", "import click, yaml"],
        "--help": [PYTHON, "-m", "patchkit", "--help"],
        "list": [PYTHON, "-m", "patchkit", "list"],
        "status": [PYTHON, "-m", "patchkit", "status"],
        "validate": [PYTHON, "-m", "patchkit", "validate", str(RECIPE)],
        "show": [PYTHON, "-m", "patchkit", "show", "verl-fsdp-update", "--root", str(SAMPLE)],
    }, args.rounds, env)
    base = t.pop("baseline")
    print(f"start-up against `python -c \"import click, yaml\"` = {base * 1e3:.1f} ms "
          f"(medians of {args.rounds} interleaved rounds)")
    worst = 0.0
    for name, value in t.items():
        ratio = value / base
        worst = max(worst, ratio)
        print(f"  patchkit {name:9s} {value * 1e3:7.1f} ms  {ratio:5.2f}x  {verdict(ratio, GOAL)}")
    print(f"  worst {worst:.2f}x; goal <= {GOAL}x: {verdict(worst, GOAL)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
