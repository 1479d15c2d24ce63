"""Shared by the attach tests and bench/attach.py: a CPU training package with no patchkit in it, its recipes, a job
started on it, its log, and what its traces recorded."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
JOB = Path(__file__).resolve().parent / "attach_job.py"

TRAIN = textwrap.dedent('''\
    """A tiny CPU training package (pkjob): the functions the attach tests instrument, and nothing of patchkit."""

    import functools
    import time

    import torch


    def memory_logger(role):
        """Like verl's GPUMemoryLogger: the function is kept only in the wrapper's closure (no functools.wraps)."""
        def decorator(func):
            def f(*args, **kwargs):
                return func(*args, **kwargs)
            return f
        return decorator


    def traced(func):
        """A functools.wraps decorator (as torch.no_grad() makes): the function is its __wrapped__."""
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            return func(*args, **kwargs)
        return wrapper


    class Trainer:
        def __init__(self, seed, pause):
            torch.manual_seed(seed)
            gen = torch.Generator().manual_seed(seed)
            self.model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
            self.data = [torch.randn(16, 32, generator=gen) for _ in range(8)]
            self.pause = pause
            self.losses = []
            self.done = 0

        def work(self, i):
            with torch.profiler.record_function(f"job-step-{i}"):
                loss = self.model(self.data[i % len(self.data)]).pow(2).mean()
                loss.backward()
                self.opt.step()
                self.opt.zero_grad()
                time.sleep(self.pause)
            return loss.item()

        @memory_logger(role="actor")
        def step_logged(self, i):
            self.losses.append(self.work(i))
            self.done += 1

        @traced
        def step_wrapped(self, i):
            self.losses.append(self.work(i))
            self.done += 1


    def closure_loop(trainer, steps, on_step):
        """The step is a closure (free variables trainer, count): the running loop holds the function object."""
        count = [0]

        def step(i):
            trainer.losses.append(trainer.work(i))
            count[0] += 1

        on_step.code = step.__code__
        on_step.function = step
        for i in range(steps):
            if on_step(i, step) is False:
                break
    ''')

RECIPE = textwrap.dedent('''\
    id: {rid}
    description: one step per call of {scope}, for the attach tests
    target:
      package: pkjob
      distribution: pkjob
      versions: ">=1.0"
      files: [pkjob/train.py]
    backend: torch
    profiler:
      contents: [cpu]
      save_path: {save}
    points:
    {points}
    ''')

PLAIN = textwrap.dedent("""\
    def keep(func):
        def f(*a, **k):
            return func(*a, **k)
        return f


    class Trainer:
        def __init__(self):
            self.losses = []

        @keep
        def step_logged(self, i):
            self.losses.append(i * 0.5)
            self.done = i
    """)  # pkjob/train.py without torch: the other interpreters here have none (the profiler's start fails)

STAND_IN_TORCH = ('"""A stand-in for torch, for the interpreters here that have none: attach finds a torch to record '
                  'with, gets in, and the profiler\'s start fails on it (said once); the job runs on with its own '
                  'code."""\n')


def plain(site_dir: Path, stand_in: bool = True) -> None:
    """pkjob/train.py without torch (:data:`PLAIN`) in ``site_dir``, with :data:`STAND_IN_TORCH` beside it unless
    ``stand_in`` is False (a job of this interpreter, whose own torch records)."""
    (site_dir / "pkjob" / "train.py").write_text(PLAIN)
    if stand_in:
        (site_dir / "torch").mkdir(exist_ok=True)
        (site_dir / "torch" / "__init__.py").write_text(STAND_IN_TORCH)


OTHER_VERSIONS = ("3.10", "3.12", "3.13")  # the other CPythons attach is tested on, where a machine has them


@functools.lru_cache(maxsize=None)
def other_pythons():
    """Each of :data:`OTHER_VERSIONS` this machine has, by version: pyenv's (``$PYENV_ROOT``, else its default
    folder; its shims run only the versions made global), else ``pythonX.Y`` on PATH; each asked its version."""
    import glob

    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = {}
    for v in OTHER_VERSIONS:
        for candidate in [*sorted(glob.glob(os.path.join(root, "versions", f"{v}.*", "bin", f"python{v}"))),
                          shutil.which(f"python{v}")]:
            try:
                said = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                      capture_output=True, text=True, timeout=30).stdout.strip() if candidate else ""
            except (OSError, subprocess.TimeoutExpired):
                said = ""
            if said == v:
                found[v] = candidate
                break
    return found


SCOPES = {  # mode -> (recipe point head, the scope)
    "logged": ("class: Trainer\n  method: step_logged", "Trainer.step_logged"),
    "wrapped": ("class: Trainer\n  method: step_wrapped", "Trainer.step_wrapped"),
    "closure": ("function: closure_loop\n  nested: step", "closure_loop.step"),
}


def site(tmp: Path) -> Path:
    """A folder that plays site-packages with pkjob 1.0 in it."""
    root = tmp / "site"
    (root / "pkjob").mkdir(parents=True)
    (root / "pkjob" / "__init__.py").write_text('__version__ = "1.0"\n')
    (root / "pkjob" / "train.py").write_text(TRAIN)
    (root / "pkjob-1.0.dist-info").mkdir()
    (root / "pkjob-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: pkjob\nVersion: 1.0\n")
    return root


def recipe(tmp: Path, mode: str, rid: str = "") -> Path:
    head, scope = SCOPES[mode]
    points = "\n".join("  - " + head.replace("\n  ", "\n    ") + f"\n    at: {at}" + (f"\n    action: {act}" if act else "")
                       for at, act in (("method_start", "start"), ("method_end", "")))
    rid = rid or f"pkjob-{mode}"
    path = tmp / f"{rid}.yaml"
    path.write_text(RECIPE.format(rid=rid, scope=scope, save=tmp / "traces", points=points))
    return path


class Running:
    """A job started as a subprocess (``proc``) that logs one JSON line per step in ``log`` and stops when ``stop``
    appears: its lines, its steps, a wait for them, and a kill."""

    log: Path
    stop: Path
    proc: subprocess.Popen

    def lines(self):
        if not self.log.exists():
            return []
        return [json.loads(ln) for ln in self.log.read_text().splitlines() if ln.strip().endswith("}")]

    def steps(self):
        return [ln for ln in self.lines() if "step" in ln]

    def wait_steps(self, n, timeout=120):
        end = time.time() + timeout
        while len(self.steps()) < n:
            if self.proc.poll() is not None or time.time() > end:
                raise AssertionError(f"the job ran {len(self.steps())} steps: {self.proc.communicate()[1][-3000:]}")
            time.sleep(0.05)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


class Job(Running):
    """The job, started without patchkit: one JSON line per step in its log, a last line with what it found."""

    def __init__(self, tmp: Path, site_dir: Path, mode: str = "logged", steps: int = 400, pause: float = 0.03,
                 name: str = "job", env=None, python=None, args=(), launcher=()):
        self.log, self.stop = tmp / f"{name}.log", tmp / f"{name}.stop"
        for p in (self.log, self.stop):
            if p.exists():
                p.unlink()
        environ = dict(os.environ, PYTHONPATH=str(site_dir), **(env or {}))
        for key in ("PATCHKIT_RUN", "RANK", "WORLD_SIZE"):
            environ.pop(key, None)
        tail = [str(JOB), "--mode", mode, "--steps", str(steps), "--pause", str(pause), "--journal", str(self.log),
                "--stop", str(self.stop)]
        command = [*launcher, *tail] if launcher else [python or sys.executable, *args, *tail]
        self.proc = subprocess.Popen(command, cwd=tmp, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.pid = self.proc.pid

    def finish(self, timeout=120, stop=True):
        """Stop the loop (or let it run its --steps); (the last line: steps run, code identity, names left), stderr."""
        if stop:
            self.stop.touch()
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        final = [ln for ln in self.lines() if "final" in ln]
        return (final[-1] if final else {}), err


def left_as_it_was(plain: Job, job: Job, steps: int) -> str:
    """The job ran its ``steps`` steps with its own code, its losses those of the job never attached beside it;
    its stderr."""
    final, err = job.finish(stop=False)
    unattached, _ = plain.finish(stop=False)
    assert final["steps"] == unattached["steps"] == steps and final["losses"] == unattached["losses"]
    assert all(final["original"].values()) and final["left"] == []
    return err


def attach(tmp: Path, args, env=None, timeout=300, **popen):
    environ = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    environ.pop("PATCHKIT_RUN", None)
    return subprocess.run([sys.executable, "-m", "patchkit", "attach", *map(str, args)], capture_output=True,
                          text=True, env=environ, cwd=tmp, timeout=timeout, **popen)


def wait_for(ready, seconds: float, proc) -> None:
    """Until ``ready()``; a process that ended, or ``seconds`` (a guard against a hang, not a measurement), fails
    the test with what the process said."""
    import pytest

    end = time.time() + seconds
    while not ready():
        if proc.poll() is not None or time.time() > end:
            if proc.poll() is None:
                proc.kill()
            pytest.fail(f"not ready after {seconds} s (exit {proc.poll()}): {proc.communicate(timeout=30)[1][-3000:]}")
        time.sleep(0.1)


def recording(home=None) -> bool:
    """Whether an agent this home attached (``$PATCHKIT_HOME`` by default) says its window is open."""
    folder = Path(home or os.environ["PATCHKIT_HOME"]) / "attached"
    for rec in folder.glob("*.json") if folder.is_dir() else []:
        status = Path(json.loads(rec.read_text())["out"]) / "status.json"
        if status.exists() and json.loads(status.read_text())["state"] == "recording":
            return True
    return False


def recorded_labels(trace):
    """ProfilerStep# spans of a torch trace, each with the job-step labels that fall inside it, in order."""
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    spans = sorted((e for e in events if str(e.get("name", "")).startswith("ProfilerStep#") and "dur" in e),
                   key=lambda e: e["ts"])
    labels = [e for e in events if str(e.get("name", "")).startswith("job-step-") and "dur" in e]
    out = []
    for span in spans:
        inside = [int(e["name"].rsplit("-", 1)[1]) for e in labels
                  if e["ts"] >= span["ts"] and e["ts"] + e["dur"] <= span["ts"] + span["dur"]]
        out.append((int(span["name"].split("#")[1]), sorted(inside)))
    return out


def traces_in(folder: Path):
    return sorted(str(p) for p in folder.glob("*.pt.trace.json")) if folder.is_dir() else []


def gdb_missing() -> str:
    return "" if shutil.which("gdb") else "gdb is not installed (apt-get install gdb; .ci/run installs it)"


def ptrace_denied() -> str:
    """Why this machine will not let the tests trace a job they started ("" when it will): gdb and the attaching
    command are the job's siblings, not its parents, so Yama's scope 1 already needs CAP_SYS_PTRACE."""
    try:
        scope = int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text())
    except (OSError, ValueError):
        scope = 0
    from patchkit.attach.access import CAP_SYS_PTRACE, my_caps

    if scope >= 3 or (scope >= 1 and not my_caps() & CAP_SYS_PTRACE):
        return f"Yama ptrace_scope is {scope} and this user lacks CAP_SYS_PTRACE"
    return ""


def fake_process(uid: int, pid: int = 4242):
    """A :class:`patchkit.attach.process.Process` of ``uid`` that no kernel reports: for the request folder's
    owner and mode, without a job."""
    from patchkit.attach.process import Process

    return Process(pid, (uid,) * 4, (uid,) * 4, (), 1, "/usr/bin/python3", False, ("python3",), 7, 0, 0, "python3")



# CPythons other than the suite's own that attach is tested on for real, each where its script from the shared tools
# puts it: by kind, (the variable that names another one, its default place, the script, whether free-threaded).
INTERPRETERS = {
    "3.14": ("PATCHKIT_PY314", "/opt/py314/bin/python3.14", "get-python314.sh", False),
    "3.13t": ("PATCHKIT_PY313T", "/opt/py313t/bin/python3.13t", "get-python313t.sh", True),
}
PROVIDED = {"get-python314.sh": "unpacks Debian's CPython 3.14 into {} in about 10 s (.ci/run runs it)",
            "get-python313t.sh": "builds the free-threaded 3.13t into {} in about 18 minutes (not in CI)"}


@functools.lru_cache(maxsize=None)
def interpreter(kind: str):
    """``(path, "")`` of the CPython ``kind`` of :data:`INTERPRETERS` (``$PATCHKIT_PY314`` / ``$PATCHKIT_PY313T``, else
    where its script puts it), asked its version and flavour; ``("", why not)``, naming the script, when there is
    none."""
    variable, default, script, free = INTERPRETERS[kind]
    path = os.environ.get(variable) or default
    ask = ("import sys, sysconfig; print('%d.%d' % sys.version_info[:2], "
           "bool(sysconfig.get_config_var('Py_GIL_DISABLED')) and not sys._is_gil_enabled())")
    try:
        said = subprocess.run([path, "-c", ask], capture_output=True, text=True, timeout=60).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        said = []
    if said == [kind.rstrip("t"), str(free)]:
        return path, ""
    return "", (f"no CPython {kind} at {path}: ../shared/tools/{script} (beside the checkout) "
                f"{PROVIDED[script].format(default.rsplit('/bin/', 1)[0])}, or set ${variable} to one")
