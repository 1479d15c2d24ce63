"""Reliability (issue 5): nothing lost, nothing torn, under bad input, crashes and races.

The crash and race tests run real ``python -m patchkit`` processes against
copies of ``fixtures/verl-0.6`` and kill them with SIGKILL; nothing is mocked.
``tests/reliability/crashpoints.py`` runs the same command line with the
renames patchkit does numbered, so a kill can also be put exactly between two
steps of a write (random delays only land there by luck).

Knobs for longer runs: ``RELIABILITY_KILLS`` (random kills, default 40),
``RELIABILITY_SEED`` (replay the random delays of a failed run; the seed is in
every failure message), ``RELIABILITY_EXAMPLES`` (hypothesis examples per
property).
"""

from __future__ import annotations

import ast
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import patchkit
from patchkit.cli.commands import main

from conftest import FIXTURES, RECIPES, snapshot

CRASHPOINTS = Path(__file__).resolve().parent / "reliability" / "crashpoints.py"
SOURCE = Path(patchkit.__file__).resolve().parent.parent  # the patchkit the subprocesses must run: the one under test
DP = "verl/workers/actor/dp_actor.py"
MEGA = "verl/workers/actor/megatron_actor.py"
TMP_SUFFIX = ".patchkit-tmp"
KILLS = int(os.environ.get("RELIABILITY_KILLS") or 40)
EXAMPLES = int(os.environ.get("RELIABILITY_EXAMPLES") or 0)
LOCK_MESSAGE = "another patchkit process holds"

# One recipe, two files: the point-level `files:` key sends the Megatron points to megatron_actor.py.
TWO_FILES = textwrap.dedent("""\
    id: verl-two-files
    description: verl FSDP and Megatron update_policy in one recipe, so one change spans two files.
    target:
      package: verl
      distribution: verl
      versions: ">=0.4,<0.8"
      files: [verl/workers/actor/dp_actor.py]
    backend: torch
    schedule: {wait: 0, warmup: 0, active: 1, repeat: 1, skip_first: 0}
    points:
      - class: DataParallelPPOActor
        method: update_policy
        at: method_start
        action: start
      - class: DataParallelPPOActor
        method: update_policy
        at: after_call
        call: self._optimizer_step
      - class: MegatronPPOActor
        method: update_policy
        at: method_start
        action: start
        files: [verl/workers/actor/megatron_actor.py]
      - class: MegatronPPOActor
        method: update_policy
        at: after_call
        call: self.actor_optimizer.step
        files: [verl/workers/actor/megatron_actor.py]
    """)


# ---------------------------------------------------------------- helpers

def env_for(home: Path, **extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHKIT_", "RELIABILITY_"))}
    env["PATCHKIT_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join([str(SOURCE)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    env.update(extra)
    return env


def patchkit_cmd(*args: str) -> List[str]:
    return [sys.executable, "-m", "patchkit", *args]


def crashpoints_cmd(*args: str) -> List[str]:
    return [sys.executable, str(CRASHPOINTS), *args]


def pk(home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    """``python -m patchkit ARGS`` as its own process, with its own PATCHKIT_HOME."""
    return subprocess.run(patchkit_cmd(*args), env=env_for(home, **extra), cwd=str(home.parent),
                          capture_output=True, text=True, timeout=120)


def cli(*args: str, home: Optional[Path] = None):
    """The same command line in this process (fast), for setup and for checks."""
    env = {"PATCHKIT_HOME": str(home)} if home is not None else None
    return CliRunner().invoke(main, list(args), env=env)


def ok(result, what: str = ""):
    """A CliRunner or subprocess result that must have succeeded."""
    code = getattr(result, "exit_code", getattr(result, "returncode", None))
    text = result.output if hasattr(result, "exit_code") else result.stdout + result.stderr
    assert code == 0, f"{what} exited {code}:\n{text}"
    assert "Traceback" not in text, f"{what}:\n{text}"
    return result


def copy_tree(dest: Path, name: str = "verl-0.6") -> Path:
    shutil.copytree(FIXTURES / name, dest)
    return dest


def leftovers(root: Path) -> List[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob(f"*{TMP_SUFFIX}"))


def without_tmp(snap: Dict[str, bytes]) -> Dict[str, bytes]:
    return {k: v for k, v in snap.items() if not k.endswith(TMP_SUFFIX)}


def ledger_of(home: Path) -> dict:
    path = home / "ledger.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"files": {}}


def status_json(home: Path) -> dict:
    return json.loads(ok(cli("status", "--json", home=home), "status --json").stdout)


def recover(home: Path) -> None:
    """What apply and revert do first (status only reports it): finish or undo an interrupted change."""
    from patchkit.state.ledger import Ledger

    with Ledger(home).locked():
        pass


def reference(where: Path, *apply_args: str, name: str = "verl-0.6") -> Dict[str, bytes]:
    """The bytes a clean, uninterrupted apply gives, in a copy of its own with a ledger of its own."""
    root = copy_tree(where / "root", name)
    ok(cli("apply", *apply_args, "--root", str(root), home=where / "home"), "reference apply")
    return snapshot(root)


def state_of(data: bytes, original: bytes, patched: bytes) -> str:
    return "original" if data == original else "patched" if data == patched else "TORN"


@pytest.fixture
def two_files(tmp_path) -> Path:
    path = tmp_path / "recipes" / "verl-two-files.yaml"
    path.parent.mkdir()
    path.write_text(TWO_FILES, encoding="utf-8")
    return path


ORIGINAL = snapshot(FIXTURES / "verl-0.6")


@pytest.fixture(autouse=True)
def watchdog():
    """A hang is a failure too: no test here may run for more than a few minutes."""
    def expired(signum, frame):
        raise TimeoutError("the test ran for more than 300 s (a patchkit command hung?)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(300)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


# ---------------------------------------------------------------- 1. SIGKILL at random instants

def _kill_iteration(i: int, rng: random.Random, work: Path, case: Tuple[str, Sequence[str], Tuple[str, ...]],
                    launcher: Tuple[str, List[str], Dict[str, str]], lifetime: float,
                    patched: Dict[str, bytes]) -> dict:
    name, recipe_args, targets = case
    lname, prefix, extra = launcher
    root = copy_tree(work / f"it{i}" / "root")
    home = work / f"it{i}" / "home"
    delay = rng.uniform(0, lifetime)
    where = f"iteration {i} ({name} via {lname}, SIGKILL after {delay:.3f}s of a {lifetime:.3f}s run)"
    errlog = work / f"it{i}" / "stderr"
    trace = work / f"it{i}" / "boundaries"  # crashpoints.py notes each rename it passed, so we know where it died
    with open(errlog, "wb") as err:
        proc = subprocess.Popen(prefix + ["apply", *recipe_args, "--root", str(root)],
                                env=env_for(home, RELIABILITY_TRACE=str(trace), **extra),
                                cwd=str(work), stdout=subprocess.DEVNULL, stderr=err)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        code = proc.wait()
    killed = code == -signal.SIGKILL
    assert killed or code == 0, f"{where}: apply exited {code}:\n{errlog.read_text()}"

    # Right after the kill: each target is whole, the original or the fully patched file.
    after_kill = tuple(state_of((root / t).read_bytes(), ORIGINAL[t], patched[t]) for t in targets)
    assert "TORN" not in after_kill, f"{where}: {dict(zip(targets, after_kill))}"
    untouched = {k: v for k, v in without_tmp(snapshot(root)).items() if k not in targets}
    assert untouched == {k: v for k, v in ORIGINAL.items() if k not in targets}, f"{where}: other files changed"
    stray = leftovers(root)

    # The next apply or revert finishes or undoes the change: all files on one side, and the ledger says which.
    recover(home)
    status = pk(home, "status", "--json")
    ok(status, f"{where}: status after the kill")
    after_status = tuple(state_of((root / t).read_bytes(), ORIGINAL[t], patched[t]) for t in targets)
    assert len(set(after_status)) == 1 and "TORN" not in after_status, \
        f"{where}: not all or nothing after recovery: {dict(zip(targets, after_status))}"
    records = {f["relpath"]: f for f in json.loads(status.stdout)["files"]}
    if after_status[0] == "patched":
        assert set(records) == set(targets) and all(r["state"] == "applied" for r in records.values()), \
            f"{where}: files patched but status says {records}"
    else:
        assert not records, f"{where}: files original but status still records {records}"

    # revert --all gives the exact original bytes back, and a clean ledger.
    ok(pk(home, "revert", "--all"), f"{where}: revert --all")
    assert without_tmp(snapshot(root)) == ORIGINAL, f"{where}: revert --all did not restore the original bytes"
    led = ledger_of(home)
    assert not led.get("files") and not led.get("pending"), f"{where}: ledger not clean after revert: {led}"

    # And apply works again, giving the same bytes as a clean apply.
    ok(pk(home, "apply", *recipe_args, "--root", str(root)), f"{where}: apply after revert")
    for t in targets:
        assert (root / t).read_bytes() == patched[t], f"{where}: re-apply gave other bytes for {t}"
    renames = len(trace.read_text().splitlines()) if trace.exists() else None
    return {"after_kill": after_kill, "after_status": after_status[0], "killed": killed, "stray": stray,
            "in_write_phase": None if lname != "crashpoints" else bool(killed and renames)}


def test_sigkill_at_random_instants_never_tears_a_file_and_revert_all_restores(tmp_path, two_files):
    """SIGKILL `patchkit apply` at uniformly random instants of its life, one and two target files."""
    seed = int(os.environ.get("RELIABILITY_SEED") or random.randrange(2 ** 32))
    cases = [("verl-fsdp-update", ["verl-fsdp-update"], (DP,)),
             ("verl-two-files", [str(two_files)], (DP, MEGA))]
    launchers = [
        # patchkit's own hook: sleep between the files of one change (honoured by Ledger.commit).
        ("python -m patchkit", patchkit_cmd(), {"PATCHKIT_TEST_SLOW_WRITE": "0.3"}),
        # every rename slowed down, so that more kills land inside the write phase.
        ("crashpoints", crashpoints_cmd(), {"RELIABILITY_SLOW": "0.08"}),
    ]
    patched = {}
    for name, args, _targets in cases:
        patched[name] = reference(tmp_path / f"ref-{name}", *args)

    # One full run of each combination: how long a life is, and that a full run gives the reference bytes.
    lifetime = {}
    for name, args, targets in cases:
        for lname, prefix, extra in launchers:
            root = copy_tree(tmp_path / f"measure-{name}-{lname}" / "root")
            home = root.parent / "home"
            started = time.monotonic()
            run = subprocess.run(prefix + ["apply", *args, "--root", str(root)], env=env_for(home, **extra),
                                 cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
            lifetime[name, lname] = time.monotonic() - started
            ok(run, f"full run of {name} via {lname}")
            assert all((root / t).read_bytes() == patched[name][t] for t in targets)

    rng = random.Random(seed)
    plan = [(i, rng.choice(cases), rng.choice(launchers), random.Random(rng.random())) for i in range(KILLS)]

    def worker(lane: int) -> List[dict]:
        out = []
        for i, case, launcher, irng in plan[lane::2]:
            out.append(_kill_iteration(i, irng, tmp_path, case, launcher, lifetime[case[0], launcher[0]],
                                       patched[case[0]]))
        return out

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(worker, lane) for lane in range(2)]
        errors, results = [], []
        for f in futures:
            try:
                results.extend(f.result())
            except AssertionError as exc:
                errors.append(str(exc))
    assert not errors, f"seed {seed} (RELIABILITY_SEED={seed} replays it):\n" + "\n".join(errors)
    summary = {}
    for r in results:
        key = ("killed" if r["killed"] else "finished") + ": " + "+".join(r["after_kill"]) + " -> " + r["after_status"]
        summary[key] = summary.get(key, 0) + 1
    traced = [r["in_write_phase"] for r in results if r["in_write_phase"] is not None]
    print(f"\nseed {seed}; lifetimes {({k: round(v, 2) for k, v in lifetime.items()})}; outcomes {summary}; "
          f"crashpoints runs killed after their first rename: {sum(traced)} of {len(traced)}; "
          f"runs that left temporary files: {sum(bool(r['stray']) for r in results)}")


# ---------------------------------------------------------------- 1b. SIGKILL at every write boundary

def _boundaries(tmp_path: Path, setup, args: Sequence[str]) -> List[Tuple[int, str, str]]:
    """Run once to the end under crashpoints.py and list its boundaries (number, side, destination)."""
    root, home = setup(tmp_path / "trace")
    trace = tmp_path / "trace" / "boundaries.txt"
    run = subprocess.run(crashpoints_cmd(*args, "--root", str(root)) if args[0] == "apply" else crashpoints_cmd(*args),
                         env=env_for(home, RELIABILITY_TRACE=str(trace)), cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=120)
    ok(run, "traced run")
    rows = [line.split(" ", 2) for line in trace.read_text(encoding="utf-8").splitlines()]
    return [(int(n), side, dest) for n, side, dest in rows]


def _killed_at(tmp_path: Path, setup, args: Sequence[str], points: Sequence[int]) -> Dict[int, Tuple[Path, Path]]:
    """For each boundary, a fresh copy where the command was SIGKILLed exactly there."""
    prepared = {n: setup(tmp_path / f"kill{n}") for n in points}

    def kill(n: int) -> Tuple[int, int, str]:
        root, home = prepared[n]
        cmd = crashpoints_cmd(*args, "--root", str(root)) if args[0] == "apply" else crashpoints_cmd(*args)
        run = subprocess.run(cmd, env=env_for(home, RELIABILITY_KILL_AT=str(n)), cwd=str(tmp_path),
                             capture_output=True, text=True, timeout=120)
        return n, run.returncode, run.stderr

    with ThreadPoolExecutor(max_workers=2) as pool:
        for n, code, err in pool.map(kill, points):
            assert code == -signal.SIGKILL, f"boundary {n}: expected to be killed there, exited {code}:\n{err}"
    return prepared


SWEEPS = {
    # name: (state before: None = original | (recipe, overrides), the command, the state it leads to)
    "apply two files": (None, ("apply", "{two}"), ("{two}", ())),
    "re-apply with new settings": (("{two}", ()), ("apply", "{two}", "schedule.wait=5"), ("{two}", ("schedule.wait=5",))),
    "revert --all": (("{two}", ()), ("revert", "--all"), None),
}


@pytest.mark.parametrize("sweep", list(SWEEPS))
def test_sigkill_at_every_write_boundary_leaves_all_or_nothing(tmp_path, two_files, sweep):
    """Kill the command right before and right after each rename of a backup, the ledger or a target file."""
    start, command, end = SWEEPS[sweep]
    fill = lambda xs: tuple(str(two_files) if x == "{two}" else x for x in xs)  # noqa: E731
    command = fill(command)

    def bytes_of(state, where: Path) -> Dict[str, bytes]:
        if state is None:
            return {t: ORIGINAL[t] for t in (DP, MEGA)}
        recipe, overrides = state
        snap = reference(where, *fill((recipe,)), *overrides)
        return {t: snap[t] for t in (DP, MEGA)}

    before = bytes_of(start, tmp_path / "ref-before")
    after = bytes_of(end, tmp_path / "ref-after")

    def setup(where: Path) -> Tuple[Path, Path]:
        root, home = copy_tree(where / "root"), where / "home"
        if start is not None:
            ok(cli("apply", *fill((start[0],)), *start[1], "--root", str(root), home=home), "setup apply")
        return root, home

    bounds = _boundaries(tmp_path, setup, command)
    # Boundaries of the ledger and the targets; those of a backup all come before the journal is written.
    points = [n for n, _side, dest in bounds if not Path(dest).parent.name == "backups"]
    assert any(dest.endswith(DP) for _n, _s, dest in bounds) and any(dest.endswith(MEGA) for _n, _s, dest in bounds)
    seen = {}
    for n, (root, home) in _killed_at(tmp_path, setup, command, points).items():
        where = f"{sweep}: SIGKILL at boundary {n} ({bounds[n - 1][1]} {bounds[n - 1][2]})"
        states = tuple("before" if (root / t).read_bytes() == before[t] else "after" if (root / t).read_bytes() == after[t]
                       else "TORN" for t in (DP, MEGA))
        assert "TORN" not in states, f"{where}: {states}"
        recover(home)
        status = status_json(home)
        recovered = tuple("before" if (root / t).read_bytes() == before[t] else "after" if (root / t).read_bytes() == after[t]
                          else "TORN" for t in (DP, MEGA))
        assert len(set(recovered)) == 1 and "TORN" not in recovered, f"{where}: after recovery {recovered}"
        expect = start if recovered[0] == "before" else end
        assert len(status["files"]) == (0 if expect is None else 2), f"{where}: status {status}"
        assert all(f["state"] == "applied" for f in status["files"]), f"{where}: status {status}"
        seen[n] = (states, recovered[0])
        ok(cli("revert", "--all", home=home), f"{where}: revert --all")
        assert without_tmp(snapshot(root)) == ORIGINAL, f"{where}: revert --all did not restore the original"
        assert not ledger_of(home).get("files") and not ledger_of(home).get("pending")
    # The sweep must have reached the window between the two target files.
    assert ("after", "before") in [s for s, _ in seen.values()] or ("before", "after") in [s for s, _ in seen.values()], seen


def test_a_killed_write_leaves_no_temporary_file_in_the_package(tmp_path, two_files):
    def setup(where: Path) -> Tuple[Path, Path]:
        return copy_tree(where / "root"), where / "home"

    command = ("apply", str(two_files))
    bounds = _boundaries(tmp_path, setup, command)
    n = next(n for n, side, dest in bounds if side == "before" and dest.endswith(DP))
    root, home = _killed_at(tmp_path, setup, command, [n])[n]
    assert leftovers(root), "the kill should have left the temporary file (test set-up)"
    ok(cli("revert", "--all", home=home))
    ok(cli("apply", str(two_files), "--root", str(root), home=home))
    ok(cli("revert", "--all", home=home))
    assert leftovers(root) == []
    assert snapshot(root) == ORIGINAL


def test_sigkill_during_recovery_still_ends_all_or_nothing(tmp_path, two_files):
    """The command that undoes a half-written change is itself killed, at each of its own boundaries."""
    apply = ("apply", str(two_files))
    patched = reference(tmp_path / "ref", *apply[1:])

    def fresh(where: Path) -> Tuple[Path, Path]:
        return copy_tree(where / "root"), where / "home"

    between = next(n for n, side, dest in _boundaries(tmp_path / "a", fresh, apply)
                   if side == "after" and dest.endswith(DP))

    def half_written(where: Path) -> Tuple[Path, Path]:
        root, home = _killed_at(where, fresh, apply, [between])[between]
        assert (root / DP).read_bytes() == patched[DP] and (root / MEGA).read_bytes() == ORIGINAL[MEGA]
        return root, home

    recovering = ("revert", "--all")  # the first thing it does; status only reports the interrupted change
    bounds = _boundaries(tmp_path / "b", half_written, recovering)
    assert any(dest.endswith(DP) for _n, _s, dest in bounds), f"revert did not put dp_actor.py back: {bounds}"
    for n, (root, home) in _killed_at(tmp_path / "c", half_written, recovering, [n for n, _s, _d in bounds]).items():
        where = f"recovery killed at boundary {n} ({bounds[n - 1][1]} {bounds[n - 1][2]})"
        assert (root / DP).read_bytes() in (ORIGINAL[DP], patched[DP]), where
        assert (root / MEGA).read_bytes() == ORIGINAL[MEGA], where
        recover(home)
        assert status_json(home)["files"] == [], where
        assert snapshot(root) == ORIGINAL or without_tmp(snapshot(root)) == ORIGINAL, where
        ok(cli("revert", "--all", home=home), where)
        ok(cli("apply", *apply[1:], "--root", str(root), home=home), where)
        assert {t: (root / t).read_bytes() for t in (DP, MEGA)} == {t: patched[t] for t in (DP, MEGA)}, where


# ---------------------------------------------------------------- 2. races

def _race(commands: Sequence[Tuple[List[str], Dict[str, str]]], home: Path, cwd: Path,
          stagger: float = 0.0, rng: Optional[random.Random] = None) -> List[subprocess.CompletedProcess]:
    procs = []
    for argv, extra in commands:
        procs.append((argv, subprocess.Popen(argv, env=env_for(home, **extra), cwd=str(cwd), stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True)))
        if stagger and rng:
            time.sleep(rng.uniform(0, stagger))
    out = []
    for argv, p in procs:
        stdout, stderr = p.communicate(timeout=180)
        out.append(subprocess.CompletedProcess(argv, p.returncode, stdout, stderr))
    return out


def _exit_0_or_lock_message(results: Sequence[subprocess.CompletedProcess]) -> None:
    for r in results:
        text = r.stdout + r.stderr
        assert "Traceback" not in text, text
        assert r.returncode == 0 or (r.returncode == 1 and LOCK_MESSAGE in r.stderr), \
            f"{' '.join(r.args[2:])} exited {r.returncode}:\n{text}"


@pytest.mark.parametrize("which, lock_timeout", [("verl-fsdp-update", None), ("two files", "0")],
                         ids=["one-file-waits-for-the-lock", "two-files-no-waiting"])
def test_concurrent_applies_patch_exactly_once(tmp_path, two_files, which, lock_timeout):
    """8 workers on one node apply the same recipe to the same site-packages at the same moment."""
    args, targets = (["verl-fsdp-update"], (DP,)) if which == "verl-fsdp-update" else ([str(two_files)], (DP, MEGA))
    patched = reference(tmp_path / "ref", *args)
    root, home = copy_tree(tmp_path / "root"), tmp_path / "home"
    extra = {"PATCHKIT_LOCK_TIMEOUT": lock_timeout} if lock_timeout is not None else {}
    results = _race([(patchkit_cmd("apply", *args, "--root", str(root)), extra)] * 8, home, tmp_path)
    _exit_0_or_lock_message(results)
    assert any(r.returncode == 0 for r in results)
    print(f"\n{sum(r.returncode == 0 for r in results)} exited 0, {sum(r.returncode == 1 for r in results)} "
          "were told another process holds the lock")
    wrote = sum(r.stderr.count("patched: ") for r in results)
    assert wrote == len(targets), f"{wrote} 'patched:' lines for {len(targets)} file(s):\n" + \
        "\n".join(r.stderr for r in results)
    assert snapshot(root) == patched, "the files are not byte-identical to one clean apply"
    status = status_json(home)
    assert sorted(f["relpath"] for f in status["files"]) == sorted(targets)
    for f in status["files"]:
        assert f["state"] == "applied" and list(f["recipes"]) == [Path(args[0]).stem]
    ok(pk(home, "revert", "--all"))
    assert snapshot(root) == ORIGINAL
    assert status_json(home)["files"] == []


@pytest.mark.parametrize("first, second", [(("verl-fsdp-logprob", "role=ref"), ("verl-fsdp-update",)),
                                           (("verl-fsdp-update",), ("verl-fsdp-logprob", "role=ref"))],
                         ids=["revert-logprob-while-applying-update", "revert-update-while-applying-logprob"])
def test_concurrent_apply_and_revert_of_different_recipes_on_one_file(tmp_path, first, second):
    """One worker reverts recipe A while three others apply recipe B to the same file."""
    rng = random.Random(7)
    only_second = reference(tmp_path / "ref", *second)
    for round_ in range(2):
        where = tmp_path / f"round{round_}"
        root, home = copy_tree(where / "root"), where / "home"
        ok(cli("apply", *first, "--root", str(root), home=home))
        revert = (patchkit_cmd("revert", first[0]), {})
        applies = [(patchkit_cmd("apply", *second, "--root", str(root)), {})] * 3
        order = [revert] + applies if round_ == 0 else applies[:1] + [revert] + applies[1:]
        results = _race(order, home, where, stagger=0.15, rng=rng)
        _exit_0_or_lock_message(results)
        assert snapshot(root) == only_second, f"round {round_}: the file is not exactly {second[0]} alone"
        status = status_json(home)
        assert len(status["files"]) == 1 and list(status["files"][0]["recipes"]) == [second[0]], status
        assert status["files"][0]["state"] == "applied"
        ok(pk(home, "revert", "--all"))
        assert snapshot(root) == ORIGINAL


# ---------------------------------------------------------------- 3. fuzzing: bad recipes and hostile values

BASE = yaml.safe_load((RECIPES / "verl-fsdp-update.yaml").read_text(encoding="utf-8"))
KNOWN_KEYS = ["id", "description", "target", "backend", "profiler", "schedule", "options", "roles", "guard", "points",
              "notes", "examples", "package", "distribution", "versions", "files", "instead", "level", "contents",
              "export_type", "analysis", "save_path", "ranks", "mstx", "wait", "warmup", "active", "repeat",
              "skip_first", "class", "method", "at", "action", "call", "loop", "when", "count", "iter", "calls",
              "choices", "default", "help", "granularity", "name", "before", "after", "unchanged", "reason"]
WORDS = ["npu", "torch", "nsys", "level0", "level1", "level_none", "cpu", "memory", "all", "mini", "micro", "db",
         "method_start", "method_end", "on_exit", "after_call", "before_call", "loop_start", "loop_end",
         "before_loop", "start", "step", "any", "verl", "verl-fsdp-update", "verl/workers/actor/dp_actor.py",
         "verl/workers/actor/megatron_actor.py", "../../etc/passwd.py", "/etc/passwd", "C:\\x.py", "a\\b.py",
         "DataParallelPPOActor", "MegatronPPOActor", "update_policy", "compute_log_prob", "self._optimizer_step",
         "loss.backward", "micro_batches", "self.x is None", "1 +", "lambda: 0", "(x := 1)", "yield 1",
         "__import__('os').system('id')", ">=0.4", ">=0.4,<0.8", "not a spec", "", " ", "\n", "0", "-1"]
OVERRIDE_KEYS = ["backend", "granularity", "role", "profiler.level", "profiler.contents", "profiler.export_type",
                 "profiler.analysis", "profiler.save_path", "profiler.ranks", "profiler.mstx", "schedule.wait",
                 "schedule.warmup", "schedule.active", "schedule.repeat", "schedule.skip_first", "profiler",
                 "schedule.nope", "target.files", "id", ""]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(), st.text(max_size=20),
                    st.sampled_from(WORDS))
values = st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(KNOWN_KEYS), st.text(max_size=8), st.integers(), st.booleans()),
                    kids, max_size=4)), max_leaves=10)


def _paths(doc, here=()):
    yield here
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, here + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, here + (i,))


def _get(doc, path):
    for part in path:
        doc = doc[part]
    return doc


@st.composite
def recipe_documents(draw) -> bytes:
    """The bytes of a recipe file: a valid recipe mutated a few times, or broken YAML text, or junk."""
    kind = draw(st.sampled_from(["mutated", "mutated", "mutated", "text-damage", "random-text", "junk"]))
    if kind == "junk":
        return draw(st.binary(max_size=300))
    if kind == "random-text":
        return draw(st.text(max_size=300)).encode("utf-8")
    doc = json.loads(json.dumps(BASE))
    for _ in range(draw(st.integers(0, 3))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["drop", "set", "add", "retype", "copy", "word", "word", "number"]))
        if not path:
            op = "add" if isinstance(doc, dict) else "set"
        parent = _get(doc, path[:-1]) if path else None
        if op == "drop" and path:
            del parent[path[-1]]
        elif op == "set":
            if path:
                parent[path[-1]] = draw(values)
            else:
                doc = draw(values)
        elif op == "add":
            target = _get(doc, path)
            key = draw(st.one_of(st.sampled_from(KNOWN_KEYS), st.text(max_size=8)))
            if isinstance(target, dict):
                target[key] = draw(values)
            elif isinstance(target, list):
                target.append(draw(values))
        elif op == "retype" and path:
            old = parent[path[-1]]
            parent[path[-1]] = draw(st.sampled_from([[old], {"x": old}, str(old), 1, None, -1, True, 1.5]))
        elif op == "word" and path:  # a plausible value of the right kind: the recipe often stays valid
            parent[path[-1]] = draw(st.sampled_from(WORDS + KNOWN_KEYS))
        elif op == "number" and path:
            parent[path[-1]] = draw(st.integers(-2, 5))
        elif op == "copy" and path:
            parent[path[-1]] = json.loads(json.dumps(_get(doc, draw(st.sampled_from(paths))) if paths else None,
                                                     default=str))
    text = yaml.safe_dump(doc, allow_unicode=draw(st.booleans()), sort_keys=False, default_flow_style=draw(st.booleans()))
    if kind == "text-damage":
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(0, len(text)))
            action = draw(st.sampled_from(["cut", "insert", "delete"]))
            if action == "cut":
                text = text[:at]
            elif action == "insert":
                text = text[:at] + draw(st.sampled_from(["\t", ":", "- ", "{", "]", "&a ", "*a", "!!python/object ", "'",
                                                         '"', "\x00", "\x85", "\ufeff", "\n  ", "? ", "|", ">"])
                                                         | st.text(max_size=5)) + text[at:]
            else:
                text = text[:at] + text[at + draw(st.integers(1, 20)):]
    return text.encode("utf-8", "surrogatepass")


OVERRIDE_VALUES = WORDS + ["[npu, cpu]", "[0]", "[0, 1]", "[]", "{}", "true", "false", "null", "~", "3", "1e3", "0x10",
                           "'quoted'", '"x\\ny"', "[", "{a: [b", "&a x", "!!python/object:os.system", "*a", "level2",
                           "text", "mstx", "shapes", "stack", "module", "ref", "actor"]
overrides = st.one_of(st.just([]), st.lists(st.one_of(
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(OVERRIDE_KEYS),
              st.one_of(st.sampled_from(OVERRIDE_VALUES), st.text(max_size=20))),
    st.text(max_size=20)), max_size=3))


def assert_clean(result, what: str) -> None:
    """Success, or exit 1 with an `error:` line; exit 2 only for a usage error; never a traceback."""
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        pytest.fail(f"{what}: uncaught {type(exc).__name__}: {exc}\n{tb}")
    assert result.exit_code in (0, 1, 2), f"{what}: exit {result.exit_code}\n{result.output}"
    if result.exit_code == 1:
        assert "error:" in result.stderr, f"{what}: exit 1 without an error line:\n{result.output}"
    if result.exit_code == 2:
        assert "Usage:" in result.stderr, f"{what}: exit 2 that is not a usage error:\n{result.output}"
    assert "Traceback" not in result.output, f"{what}:\n{result.output}"


FUZZ = settings(max_examples=EXAMPLES or 400, deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large, HealthCheck.filter_too_much])


@FUZZ
@given(document=recipe_documents(), extra=overrides)
def test_fuzzed_recipes_and_overrides_give_success_or_a_clean_error(tree, tmp_path, patchkit_home, document, extra):
    root = tree("verl-0.6") if not (tmp_path / "verl-0.6").exists() else tmp_path / "verl-0.6"
    recipe = tmp_path / "fuzz" / "verl-fsdp-update.yaml"
    recipe.parent.mkdir(exist_ok=True)
    recipe.write_bytes(document)
    before = snapshot(root)
    what = f"recipe {document[:400]!r} overrides {extra!r}"
    assert_clean(CliRunner().invoke(main, ["validate", str(recipe)]), "validate " + what)
    result = CliRunner().invoke(main, ["diff", "--root", str(root), "--", str(recipe), *extra])
    assert_clean(result, "diff " + what)
    event(f"diff exit {result.exit_code}")  # see them with --hypothesis-show-statistics
    if result.exit_code == 0:
        added = [ln for ln in result.stdout.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
        assert all("  # patchkit:" in ln for ln in added), f"{what}: unmarked lines in the diff:\n{result.stdout}"
    assert snapshot(root) == before, f"{what}: the tree changed"
    assert not (patchkit_home / "ledger.json").exists()


def yaml_double_quoted(s: str) -> str:
    """``s`` as a YAML double-quoted scalar, every character outside printable ASCII escaped."""
    out = []
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif o <= 0xFF:
            out.append(f"\\x{o:02x}")
        elif o <= 0xFFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    return '"' + "".join(out) + '"'


HOSTILE = ['"); __import__("os").system("id"); ("', "'); __import__('os').system('id'); ('",
           "\n__import__('os').system('id')\n", "x\"\"\"\nimport os\n\"\"\"", "'''", "\\", "\\\\n", "\r\n", "\r",
           "\u2028\u2029\x85\x0b\x0c", "a  # patchkit:verl-fsdp-update", "{0.__class__}", "%s%r", "${HOME}/$(id)",
           "./o\x00ut", "\t", "./out dir/ü/中文/😀", "\U0010ffff", "\ud7ff\ue000\ufffd"]


def _check_save_path(root: Path, value: str, quoted: bool, backend: str) -> None:
    raw = yaml_double_quoted(value) if quoted else value
    if quoted:
        assert yaml.safe_load(raw) == value  # the encoding above is exact
    before = snapshot(root)
    result = CliRunner().invoke(main, ["diff", "verl-fsdp-update", "--root", str(root), f"backend={backend}",
                                       f"profiler.save_path={raw}"])
    what = f"profiler.save_path={raw!r} (backend={backend})"
    assert_clean(result, what)
    assert snapshot(root) == before
    event(f"diff exit {result.exit_code}")
    if result.exit_code != 0:
        return
    from patchkit.recipe.yamlpos import LOADER  # overrides are read as recipes are: libyaml where the wheel has it

    expected = yaml.load(raw, Loader=LOADER) if raw.strip() else ""
    assert isinstance(expected, str), what
    added = [ln[1:] for ln in result.stdout.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert len(added) == 12 and all(ln.endswith("  # patchkit:verl-fsdp-update") for ln in added), \
        f"{what}: the value changed the shape of the inserted lines:\n" + "\n".join(added)
    configure = [ln for ln in added if "_patchkit_runtime.configure(" in ln]
    assert len(configure) == 1, added
    tree_ = ast.parse(configure[0])
    assert len(tree_.body) == 1 and isinstance(tree_.body[0], ast.Expr) and isinstance(tree_.body[0].value, ast.Call)
    call = tree_.body[0].value
    kw = {k.arg: k.value for k in call.keywords}
    assert isinstance(kw["save_path"], ast.Constant), f"{what}: save_path is not a literal: {configure[0]}"
    got = ast.literal_eval(kw["save_path"])
    assert got == expected, f"{what}: the emitted literal reads back as {got!r}, not {expected!r}\n{configure[0]}"
    for node in ast.walk(tree_):  # nothing but the one call and literals
        assert not isinstance(node, (ast.Call,)) or node is call, f"{what}: a second call in {configure[0]}"


SAVE_PATH = settings(max_examples=EXAMPLES or 200, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@SAVE_PATH
@given(value=st.one_of(st.text(alphabet=st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"])),
                       st.sampled_from([h for h in HOSTILE if all(ord(c) <= 0xFFFF for c in h)])),
       quoted=st.booleans(), backend=st.sampled_from(["torch", "nsys"]))
def test_save_path_override_stays_one_string_literal_bmp(tree, tmp_path, value, quoted, backend):
    """Any value from the Basic Multilingual Plane: quotes, newlines, __import__ calls stay one string."""
    root = tmp_path / "verl-0.6" if (tmp_path / "verl-0.6").exists() else tree("verl-0.6")
    _check_save_path(root, value, quoted, backend)


@SAVE_PATH
@example(value="./outputs/😀", quoted=False, backend="torch")
@given(value=st.one_of(st.text(), st.sampled_from(HOSTILE)), quoted=st.booleans(),
       backend=st.sampled_from(["torch", "nsys"]))
def test_save_path_override_stays_one_string_literal_any_unicode(tree, tmp_path, value, quoted, backend):
    root = tmp_path / "verl-0.6" if (tmp_path / "verl-0.6").exists() else tree("verl-0.6")
    _check_save_path(root, value, quoted, backend)


# Bugs the fuzzing found, each as the smallest input that shows it.

def _recipe_with(tmp_path: Path, edit) -> Path:
    text = edit((RECIPES / "verl-fsdp-update.yaml").read_text(encoding="utf-8"))
    path = tmp_path / "bad" / "verl-fsdp-update.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _no_options_when(text: str) -> str:
    start = text.index("options:\n")
    end = text.index("points:\n")
    text = text[:start] + text[end:]
    return text.replace("    when: {granularity: mini}\n", '    when: {"(no options declared)": mini}\n', 1) \
               .replace("    when: {granularity: micro}\n", "", 1)


@pytest.mark.parametrize("case", [
    pytest.param("when-key-equal-to-placeholder"),
    pytest.param("deep-yaml-nesting"),
    pytest.param("deep-guard-validate"),
    pytest.param("deep-guard-diff"),
])
def test_hostile_recipe_gives_a_clean_error(tmp_path, tree, case):
    root = tree("verl-0.6")
    before = snapshot(root)
    if case == "when-key-equal-to-placeholder":
        recipe = _recipe_with(tmp_path, _no_options_when)
    elif case == "deep-yaml-nesting":
        recipe = tmp_path / "verl-fsdp-update.yaml"
        recipe.write_text("[" * 1000 + "]" * 1000 + "\n", encoding="utf-8")
    else:
        depth = 5000 if case == "deep-guard-validate" else 1000
        recipe = _recipe_with(tmp_path, lambda t: t.replace("points:\n", f'guard: "{"-" * depth}self.x"\npoints:\n', 1))
    for args in (["validate", str(recipe)], ["diff", str(recipe), "--root", str(root)],
                 ["apply", str(recipe), "--root", str(root)]):
        result = CliRunner().invoke(main, args)
        assert_clean(result, " ".join(args[:1]) + " " + case)
        if case != "deep-guard-diff":  # that guard is valid Python: success is fine, a traceback is not
            assert result.exit_code == 1, result.output
        elif result.exit_code == 0 and args[0] == "apply":
            ok(cli("revert", "--all"))
    assert snapshot(root) == before


@pytest.mark.parametrize("guard", ['self.name != "\u2028"', "self.rank ==\x0c0"], ids=["u2028-in-string", "form-feed"])
def test_a_guard_that_validates_also_applies(tmp_path, tree, guard):
    root = tree("verl-0.6")
    before = snapshot(root)
    recipe = _recipe_with(tmp_path, lambda t: t.replace("points:\n", f"guard: {yaml_double_quoted(guard)}\npoints:\n", 1))
    validated = CliRunner().invoke(main, ["validate", str(recipe)])
    diffed = CliRunner().invoke(main, ["diff", str(recipe), "--root", str(root)])
    assert_clean(validated, "validate")
    assert_clean(diffed, "diff")
    assert snapshot(root) == before
    assert "internal error" not in diffed.stderr, diffed.stderr
    assert validated.exit_code == diffed.exit_code, (validated.output, diffed.output)


# ---------------------------------------------------------------- 4. drift

def _applied(tree, *args: str) -> Tuple[Path, bytes]:
    root = tree("verl-0.6")
    ok(cli("apply", *(args or ("verl-fsdp-update",)), "--root", str(root)))
    return root, (root / DP).read_bytes()


def _status_rows(patchkit_home: Path) -> List[dict]:
    return status_json(patchkit_home)["files"]


def test_hand_edit_after_apply_is_kept_and_only_patchkit_lines_go(tree, patchkit_home):
    root, patched = _applied(tree)
    anchor = b"class DataParallelPPOActor"
    edited = patched.replace(anchor, b"# my local tweak, keep me\n" + anchor, 1)
    edited = edited.replace(b"        temperature = data.meta_info", b"        temperature = data.meta_info  # tuned", 1)
    assert edited.count(b"keep me") == 1 and b"# tuned" in edited
    (root / DP).write_bytes(edited)
    assert [r["state"] for r in _status_rows(patchkit_home)] == ["edited since apply"]
    result = ok(cli("revert", "--all"))
    assert "edits kept" in result.stderr
    expected = ORIGINAL[DP].replace(anchor, b"# my local tweak, keep me\n" + anchor, 1) \
        .replace(b"        temperature = data.meta_info", b"        temperature = data.meta_info  # tuned", 1)
    assert (root / DP).read_bytes() == expected
    assert _status_rows(patchkit_home) == []


def test_hand_edited_patchkit_line_is_refused_then_forced(tree, patchkit_home):
    root, patched = _applied(tree)
    lines = patched.splitlines(keepends=True)
    i = next(i for i, ln in enumerate(lines) if b'_patchkit_runtime.step("verl-fsdp-update")' in ln)
    lines[i] = lines[i].replace(b"  # patchkit:verl-fsdp-update", b"  # moved by hand")
    (root / DP).write_bytes(b"".join(lines))
    edited = (root / DP).read_bytes()
    result = cli("revert", "--all")
    assert result.exit_code == 1 and "error:" in result.stderr and "--force" in result.stderr, result.output
    assert (root / DP).read_bytes() == edited, "a refused revert changed the file"
    assert len(_status_rows(patchkit_home)) == 1
    ok(cli("revert", "--all", "--force"))
    assert snapshot(root) == ORIGINAL


@pytest.mark.parametrize("upstream", ["pristine plus an upstream line", "pristine"])
def test_reinstalled_file_is_reported_and_left_alone(tree, patchkit_home, upstream):
    root, _ = _applied(tree)
    new = ORIGINAL[DP] + (b"\nUPSTREAM_FIX = True  # 0.6.2\n" if upstream != "pristine" else b"")
    (root / DP).write_bytes(new)  # pip install --force-reinstall: a new file, no patchkit lines
    state = _status_rows(patchkit_home)[0]["state"]
    assert state == ("replaced (reinstalled?)" if upstream != "pristine" else "reverted outside patchkit")
    assert ("replaced" in ok(cli("status")).stdout) == (upstream != "pristine")
    result = ok(cli("revert", "verl-fsdp-update"))
    assert (root / DP).read_bytes() == new
    assert _status_rows(patchkit_home) == [], result.output
    assert not ledger_of(patchkit_home).get("files")


@pytest.mark.parametrize("damage", ["deleted", "corrupted", "truncated", "swapped for the patched file",
                                    "backups folder gone"])
def test_missing_or_corrupt_backup_is_reported_and_revert_still_restores(tree, patchkit_home, damage):
    root, patched = _applied(tree)
    backups = patchkit_home / "backups"
    files = sorted(backups.iterdir())
    assert files, "apply kept no backup"
    for f in files:
        if damage == "deleted":
            f.unlink()
        elif damage == "corrupted":
            f.write_bytes(b"\x00garbage\xff" * 10)
        elif damage == "truncated":
            f.write_bytes(f.read_bytes()[:100])
        elif damage == "swapped for the patched file":
            f.write_bytes(patched)
    if damage == "backups folder gone":
        shutil.rmtree(backups)
    rows = _status_rows(patchkit_home)
    assert [r["state"] for r in rows] == ["applied"]
    assert rows[0].get("backup", "ok") != "ok", f"status --json does not report the {damage} backup: {rows[0]}"
    assert "backup" in ok(cli("status")).stdout
    ok(cli("revert", "--all"))
    assert snapshot(root) == ORIGINAL
    assert _status_rows(patchkit_home) == []


# ---------------------------------------------------------------- 5. encodings and line endings

def _variant(data: bytes, kind: str) -> bytes:
    text = data.decode("utf-8")
    if kind == "crlf":
        return text.replace("\n", "\r\n").encode("utf-8")
    if kind == "cr":
        return text.replace("\n", "\r").encode("utf-8")
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    if kind == "bom-crlf":
        return b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8")
    if kind == "latin-1":
        lines = text.splitlines(keepends=True)
        body = "# -*- coding: latin-1 -*-\n# Auteur: Fran\u00e7ois M\u00fcller, \u00a9 \u00bd\n" + "".join(lines)
        body = body.replace("class DataParallelPPOActor", "NAME = 'caf\u00e9 \u00e0 la cr\u00e8me'\n\n\nclass DataParallelPPOActor", 1)
        return body.encode("latin-1")
    raise AssertionError(kind)


ENCODINGS = ["crlf", "cr", "bom", "bom-crlf", "latin-1"]


@pytest.mark.parametrize("kind", ENCODINGS)
def test_line_endings_and_encodings_survive_apply_and_revert(tree, tmp_path, patchkit_home, kind):
    root = tree("verl-0.6")
    original = _variant(ORIGINAL[DP], kind)
    (root / DP).write_bytes(original)
    before = snapshot(root)
    ending = b"\r\n" if "crlf" in kind else b"\r" if kind == "cr" else b"\n"

    ok(cli("apply", "verl-fsdp-update", "--root", str(root)))
    only_update = (root / DP).read_bytes()
    ok(cli("apply", "verl-fsdp-logprob", "role=ref", "--root", str(root)))
    both = (root / DP).read_bytes()
    for patched in (only_update, both):
        compile(patched, DP, "exec")
        assert patched.startswith(b"\xef\xbb\xbf") == kind.startswith("bom")
        if kind == "latin-1":
            assert patched.startswith(b"# -*- coding: latin-1 -*-\n") and b"caf\xe9" in patched and b"Fran\xe7ois" in patched
        crlf, cr, lf = patched.count(b"\r\n"), patched.count(b"\r"), patched.count(b"\n")
        assert (crlf, cr, lf) == {b"\r\n": (lf, lf, lf), b"\r": (0, cr, 0), b"\n": (0, 0, lf)}[ending], \
            f"line endings mixed: {crlf} CRLF, {cr} CR, {lf} LF"
        kept = b"".join(ln for ln in patched.splitlines(keepends=True) if b"# patchkit:" not in ln)
        assert kept == original, "taking the marked lines out does not give the file back"

    ok(cli("revert", "verl-fsdp-logprob"))  # the other recipe stays: marked lines are taken out of the text
    assert (root / DP).read_bytes() == only_update
    ok(cli("revert", "--all"))  # the last one: the byte-exact backup
    assert snapshot(root) == before

    # The same with the backup gone, so the marked-lines path has to get the bytes right on its own.
    ok(cli("apply", "verl-fsdp-update", "--root", str(root)))
    shutil.rmtree(patchkit_home / "backups")
    ok(cli("revert", "--all"))
    assert snapshot(root) == before


def test_guard_that_the_files_encoding_cannot_hold_is_a_clean_error(tree, tmp_path):
    root = tree("verl-0.6")
    (root / DP).write_bytes(_variant(ORIGINAL[DP], "latin-1"))
    before = snapshot(root)
    recipe = _recipe_with(tmp_path, lambda t: t.replace("points:\n", 'guard: self.currency != "\u20ac"\npoints:\n', 1))
    result = CliRunner().invoke(main, ["apply", str(recipe), "--root", str(root)])
    assert_clean(result, "apply with a guard holding '\u20ac' to a latin-1 file")
    if result.exit_code == 0:
        ok(cli("revert", "--all"))
    assert snapshot(root) == before
