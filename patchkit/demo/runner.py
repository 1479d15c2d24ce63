"""`patchkit demo`: the whole loop on the bundled verl-shaped sample, on CPU.

Copy the sample to a temporary folder, show the diff, apply
``verl-fsdp-update`` with the torch backend, train the sample for a few
updates, report the trace and the steps it holds, revert, and prove the
bytes are back.  Nothing outside the temporary folder is touched: the
demo keeps its own ledger there, and deletes the folder, trace included,
unless ``keep`` (``patchkit demo --keep``); it says which where it names
the trace.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict

SAMPLE = Path(__file__).parent / "sample"
RECIPE = "verl-fsdp-update"
UPDATES = 4


def _digests(root: Path) -> Dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*.py"))}


def _steps_in(trace: str) -> list:
    opener = gzip.open if trace.endswith(".gz") else open
    with opener(trace, "rt", encoding="utf-8") as handle:
        events = json.load(handle).get("traceEvents", [])
    names = {e.get("name", "") for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}
    return sorted(names, key=lambda n: int(n.split("#")[1]))


def run_demo(keep: bool = False, echo: Callable[..., None] = print) -> int:
    import patchkit
    from patchkit.state.ledger import Ledger

    work = Path(tempfile.mkdtemp(prefix="patchkit-demo-"))
    site, traces = work / "site-packages", work / "traces"
    shutil.copytree(SAMPLE, site, ignore=shutil.ignore_patterns("__pycache__"))
    original = _digests(site)
    ledger = Ledger(work / "state")
    overrides = ["backend=torch", "granularity=micro", "schedule.wait=1", "schedule.warmup=1",
                 "schedule.active=3", "schedule.repeat=1", f"profiler.save_path={traces}"]
    try:
        settings = patchkit.load(RECIPE, overrides)
        echo(f"== 1. the sample: a verl-shaped actor in {site}")
        echo(f"== 2. patchkit diff {RECIPE} {' '.join(overrides[:5])} ...")
        echo(patchkit.diff(settings, str(site)).rstrip("\n"))
        echo(f"== 3. patchkit apply {RECIPE} ...")
        for outcome in patchkit.apply(settings, str(site), ledger=ledger):
            echo(f"   {outcome.state}: {outcome.relpath} ({outcome.detail})")
        echo(f"== 4. train: {UPDATES} updates x 2 mini-batches x 2 micro-batches on CPU, one profiler step per micro-batch")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(Path(__file__).parents[2])]),
                   PATCHKIT_HOME=str(work / "state"))  # the runtime's index of captures stays in the demo's folder
        env.pop("PATCHKIT_STRICT", None)
        done = subprocess.run([sys.executable, "-m", "patchkit.demo.train", "--updates", str(UPDATES)],
                              cwd=str(work), env=env, capture_output=True, text=True, timeout=600)
        for line in (done.stdout + done.stderr).splitlines():
            echo(f"   {line}")
        if done.returncode != 0:
            echo(f"demo: the training run failed (exit {done.returncode})")
            return 1
        found = sorted(glob.glob(str(traces / "**" / "*.pt.trace.json*"), recursive=True))
        echo("== 5. what was captured")
        for trace in found:
            steps = _steps_in(trace)
            echo(f"   {trace}: {len(steps)} steps ({', '.join(steps)})")
        echo("   (kept after the demo: open it in Perfetto or TensorBoard)" if keep else
             f"   (deleted with {work} when the demo ends: `patchkit demo --keep` keeps it to open)")
        echo(f"== 6. patchkit revert {RECIPE}")
        for outcome in patchkit.revert([RECIPE], ledger=ledger):
            echo(f"   {outcome.state}: {outcome.relpath}")
        back = _digests(site) == original
        echo(f"   bytes identical to the sample: {'yes' if back else 'NO'}")
        ok = back and len(found) == 1 and len(_steps_in(found[0])) == 3
        echo(f"demo: {'ok' if ok else 'FAILED'}: {len(found)} trace(s); "
             f"the window was wait=1 warmup=1 active=3 over {UPDATES * 4} micro-batch steps"
             + ("" if keep else f"; {work} is deleted now (--keep keeps it)"))
        return 0 if ok else 1
    finally:
        if keep:
            echo(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
