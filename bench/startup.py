"""Start-up: `patchkit --help`, `list` and `status` against `python -c "import click, yaml"`.

Goal: each within 1.5 times the bare import (medians of interleaved rounds).

    python bench/startup.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import PYTHON, env_with, interleaved, verdict  # noqa: E402

GOAL = 1.5


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    env = env_with(PATCHKIT_HOME=tempfile.mkdtemp(prefix="patchkit-bench-"))
    t = interleaved({
        "baseline": [PYTHON, "-c", "import click, yaml"],
        "--help": [PYTHON, "-m", "patchkit", "--help"],
        "list": [PYTHON, "-m", "patchkit", "list"],
        "status": [PYTHON, "-m", "patchkit", "status"],
    }, args.rounds, env)
    base = t.pop("baseline")
    print(f"start-up against `python -c \"import click, yaml\"` = {base * 1e3:.1f} ms "
          f"(medians of {args.rounds} interleaved rounds)")
    worst = 0.0
    for name, value in t.items():
        ratio = value / base
        worst = max(worst, ratio)
        print(f"  patchkit {name:8s} {value * 1e3:7.1f} ms  {ratio:5.2f}x  {verdict(ratio, GOAL)}")
    print(f"  worst {worst:.2f}x; goal <= {GOAL}x: {verdict(worst, GOAL)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
