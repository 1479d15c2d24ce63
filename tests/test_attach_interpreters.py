"""`patchkit attach` on the CPythons beside the suite's own, for real: 3.14 (in through ``sys.remote_exec``) and the
free-threaded 3.13t (through gdb), each found by :func:`attach_helpers.interpreter` and skipped, naming the script
that provides it, where there is none.

The job is started on that interpreter and starts a thread before the attach (on 3.13t, from then on
``gc.get_referrers`` no longer returns the functions made before it: the attach found "0 function(s)", and its
undo found nothing, removed ``_patchkit_runtime`` and killed the job with a NameError).  Its next 3 steps are
recorded, each function has its own code object back, the name is gone from the module, and the job runs on to
its end with nothing on its stderr but patchkit's lines.  These interpreters have no torch (the registry's torch
for 3.14 is a CUDA build of gigabytes), so the steps are recorded by a backend the job registers
(:data:`STEPLOG`: a line per recorded step, no profiler); the torch backend's own recording is the GIL CPythons'
tests, and is run here too where torch imports.  Also, on each: the swap and its undo reach a module's function,
a staticmethod's, a classmethod's, one behind ``functools.wraps`` and one kept in a decorator's closure without
``gc.get_referrers``; and a job that calls its function without reaching the recipe's point says how many times
it was called."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import attach_helpers as helpers

KINDS = sorted(helpers.INTERPRETERS)
pytestmark = pytest.mark.skipif(bool(helpers.ptrace_denied()), reason=helpers.ptrace_denied() or "")


def python_of(kind: str) -> str:
    path, why = helpers.interpreter(kind)
    if not path or (kind != "3.14" and helpers.gdb_missing()):  # 3.14 goes in through sys.remote_exec
        pytest.skip(why or helpers.gdb_missing())
    return path


STEPLOG = textwrap.dedent('''\
    """A backend for the attach tests on interpreters without torch: a line per moment of each window in
    <save_path>/steps-<pid>.jsonl; no profiler."""
    from patchkit.runtime.backends import Backend, Plan


    class StepLog(Backend):
        def probe(self):
            return {"version": "steplog 1"}

        def plan(self, s, features, key):
            def line(what):
                return ("import json, os\\n"
                        f"with open(os.path.join({s['save_path']!r}, 'steps-%d.jsonl' % os.getpid()), 'a') as f:\\n"
                        f"    f.write(json.dumps([{what!r}, step]) + '\\\\n')\\n")

            return Plan(sections={"create": f"import os\\nos.makedirs({s['save_path']!r}, exist_ok=True)\\n",
                                  "window_open": line("open"), "step_enter": line("step"),
                                  "window_close": line("close")}, trace_dir=None)
    ''')

TRAIN = textwrap.dedent('''\
    """pkjob/train.py without torch: a method kept in a decorator's closure, and one with a with block."""
    import contextlib


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

        def step_inside(self, i):
            with contextlib.nullcontext():
                self.losses.append(i * 0.5)
            return i
    ''')

JOB = textwrap.dedent('''\
    """The job: with "threads", a thread started (and ended) first and another one running all along; then the steps."""
    import json, os, sys, threading, time

    plugins, log, stop, steps, method, threads = sys.argv[1:7]
    if plugins:
        sys.path.insert(0, plugins)
        from patchkit.runtime import backends

        backends.register("steplog", "steplog_backend")  # the job's own plugin
    import pkjob.train as train

    beat = threading.Event()
    if threads:
        threading.Thread(target=lambda: None).start()
        threading.Thread(target=lambda: [time.sleep(0.01) for _ in iter(beat.is_set, True)], daemon=True).start()
    held = vars(train.Trainer)[method]
    inner = held.__closure__[0].cell_contents if held.__closure__ else held
    original, t, i = inner.__code__, train.Trainer(), 0
    with open(log, "a") as out:
        while i < int(steps) and not os.path.exists(stop):
            getattr(t, method)(i)
            out.write(json.dumps({"step": i, "swapped": inner.__code__ is not original}) + "\\n")
            out.flush()
            i += 1
            time.sleep(0.02)
        beat.set()
        out.write(json.dumps({"final": True, "steps": i, "losses": t.losses, "back": inner.__code__ is original,
                              "left": sorted(n for n in vars(train) if "patchkit" in n)}) + "\\n")
    ''')

# the attaching command, with the job's plugin registered on this side too (a recipe names it)
CLI = ("import sys; sys.path.insert(0, sys.argv.pop(1)); from patchkit.runtime import backends; "
       "backends.register('steplog', 'steplog_backend'); from patchkit.cli.commands import main; "
       "main(sys.argv[1:], prog_name='patchkit')")

RECIPE = textwrap.dedent('''\
    id: pkjob-{backend}
    description: one step per call of Trainer.{method}, for the attach tests on other interpreters
    target:
      package: pkjob
      distribution: pkjob
      versions: ">=1.0"
      files: [pkjob/train.py]
    backend: {backend}
    profiler:
      save_path: {save}
    points:
    {points}
    ''')
STARTED = "  - class: Trainer\n    method: {method}\n    at: method_start\n    action: start\n"
ENDED = "  - class: Trainer\n    method: {method}\n    at: method_end\n"
NEVER = "  - class: Trainer\n    method: {method}\n    at: method_start\n    guard: i < 0\n"  # its guard never holds


class Setup:
    """A site with pkjob (torch-free, or the torch one of :mod:`attach_helpers`), the plugin, a recipe, the job."""

    def __init__(self, tmp: Path, python: str, backend: str = "steplog", method: str = "step_logged",
                 points: str = STARTED + ENDED, threads: bool = True):
        self.tmp, self.python, self.backend = tmp, python, backend
        self.site = helpers.site(tmp)
        if backend != "torch":
            (self.site / "pkjob" / "train.py").write_text(TRAIN)
        self.plugins = tmp / "plugins"
        self.plugins.mkdir()
        (self.plugins / "steplog_backend.py").write_text(STEPLOG)
        self.save = tmp / "traces"
        self.recipe = tmp / f"pkjob-{backend}.yaml"
        self.recipe.write_text(RECIPE.format(backend=backend, method=method, save=self.save,
                                             points=points.format(method=method).rstrip("\n")))
        self.log, self.stop = tmp / "job.log", tmp / "job.stop"
        (tmp / "job.py").write_text(JOB)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(self.site), str(helpers.REPO)]))
        env.pop("PATCHKIT_RUN", None)
        self.job = subprocess.Popen([python, str(tmp / "job.py"), str(self.plugins), str(self.log), str(self.stop),
                                     "100000", method, "threads" if threads else ""], cwd=tmp, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)

    def lines(self):
        text = self.log.read_text() if self.log.exists() else ""
        return [json.loads(ln) for ln in text.splitlines() if ln.endswith("}")]

    def wait_steps(self, n, timeout=120):
        end = time.time() + timeout
        while len(self.lines()) < n:
            if self.job.poll() is not None or time.time() > end:
                pytest.fail(f"the job ran {len(self.lines())} steps: {self.job.communicate()[1][-3000:]}")
            time.sleep(0.05)

    def attach(self, *args, **popen):
        env = dict(os.environ, PYTHONPATH=str(helpers.REPO))
        env.pop("PATCHKIT_RUN", None)
        command = [sys.executable, "-c", CLI, str(self.plugins), "attach", str(self.job.pid), str(self.recipe),
                   "--root", str(self.site), *args]
        return subprocess.Popen(command, cwd=self.tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, **popen)

    def ended(self, attaching, timeout=120):
        """What the attaching command said, once it ended; a command still running after ``timeout`` seconds (a
        guard, not a measurement) is killed and fails the test with what it said."""
        try:
            return attaching.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            attaching.kill()
            pytest.fail(f"attach still waiting after {timeout} s: {attaching.communicate()[1][-3000:]}")

    def finish(self):
        """The job stopped (its stop file), waited for: its last line and its stderr."""
        self.stop.touch()
        try:
            _, err = self.job.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            self.job.kill()
            _, err = self.job.communicate()
        final = [ln for ln in self.lines() if "final" in ln]
        return (final[-1] if final else {}), err

    def kill(self):
        if self.job.poll() is None:
            self.job.kill()
            self.job.communicate()


@pytest.fixture
def setups(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(tmp_path / "home"))
    made = []
    yield lambda *a, **k: made.append(Setup(tmp_path, *a, **k)) or made[-1]
    for s in made:
        s.kill()


def only_patchkit(err: str) -> bool:
    return all(ln.startswith("[patchkit] ") for ln in err.splitlines() if ln.strip())


@pytest.mark.parametrize("backend,threads", [("steplog", True), ("steplog", False), ("torch", True)])
@pytest.mark.parametrize("kind", KINDS)
def test_the_next_steps_are_recorded_and_the_job_runs_on_with_its_own_code(setups, kind, backend, threads):
    """With threads started before the attach (it found the function), and without (the agent's own thread is the
    second: the undo found nothing, and the job died of a NameError)."""
    python = python_of(kind)
    if backend == "torch" and subprocess.run([python, "-c", "import torch"], capture_output=True).returncode:
        pytest.skip(f"no torch in {python} (the registry's torch for it is a CUDA build of gigabytes): the torch "
                    "backend is recorded on the GIL CPythons' tests; steplog records here")
    s = setups(python, backend, threads=threads)
    s.wait_steps(5)
    attaching = s.attach("--steps", "3")
    _, err = s.ended(attaching)
    final, job_err = s.finish()
    way = "remote_exec" if kind == "3.14" else "gdb"
    assert attaching.returncode == 0, err
    assert f"in through {way}" in err and "Trainer.step_logged: 1 function(s)" in err, err
    assert "steps 0-2 recorded" in err and "the job's own code is back (the window closed)" in err, err
    assert final["back"] is True and final["left"] == [] and final["steps"] > 5, (final, job_err)
    swapped = [ln["step"] for ln in s.lines() if ln.get("swapped")]
    assert swapped and swapped == list(range(swapped[0], swapped[-1] + 1)), swapped  # in once, then back for good
    if backend == "steplog":
        (log,) = s.save.glob(f"steps-{s.job.pid}.jsonl")
        assert [json.loads(ln) for ln in log.read_text().splitlines()] == [
            ["open", 0], ["step", 0], ["step", 1], ["step", 2], ["close", 2]]
    assert s.job.returncode == 0 and only_patchkit(job_err), job_err
    assert "NameError" not in job_err


SWAPS = textwrap.dedent('''\
    """The swap and its undo in this interpreter, on a module of every shape, after a thread has run."""
    import functools, gc, json, sys, threading, types
    from patchkit.runtime.attach.swap import Calls, plan_swaps, put_back

    SOURCE = """
    import functools

    def keep(func):
        def f(*a, **k):
            return func(*a, **k)
        return f

    def plain(x):
        return x + 1

    class A:
        @staticmethod
        def static(x):
            return x + 2

        @classmethod
        def klass(cls, x):
            return x + 3

        @keep
        def kept(self, x):
            return x + 4

        @functools.wraps(plain)
        def wrapped(self, x):
            return x + 5
    """
    INSTRUMENTED = SOURCE.replace("return x +", "MARK.append(1); return x +")
    mod = types.ModuleType("shapes")
    mod.MARK = []
    exec(compile(SOURCE, "shapes.py", "exec"), vars(mod))
    threading.Thread(target=lambda: None).start()
    threading.Thread(target=lambda: None).start()
    original, instrumented = (compile(t, "shapes.py", "exec") for t in (SOURCE, INSTRUMENTED))
    targets = [(None, "plain", None), ("A", "static", None), ("A", "klass", None), ("A", "kept", None),
               ("A", "wrapped", None)]
    calls = [lambda: mod.plain(0), lambda: mod.A.static(0), lambda: mod.A.klass(0), lambda: mod.A().kept(0),
             lambda: mod.A().wrapped(0)]
    seen = [any(r is mod.plain for r in gc.get_referrers(mod.plain.__code__))]
    swaps = [s for t in targets for s in plan_swaps(mod, t, original, instrumented)]
    counted = [s.apply() for s in swaps]
    counter = Calls()
    counter.start([c for s in swaps for c in s.counted()])
    results = [call() for call in calls] + [mod.plain(0)]
    counter.stop()
    mod.plain(0)
    marks = len(mod.MARK)
    left = put_back(swaps, 5, 0.05)
    results += [call() for call in calls]
    print(json.dumps({"referrers_find_it": seen[0], "counted": counted, "results": results, "marks": marks,
                      "after": len(mod.MARK), "left": left, "restored": [s.restored() for s in swaps],
                      "calls": counter.count}))
    ''')


@pytest.mark.parametrize("kind", KINDS)
def test_functions_of_every_shape_are_found_by_their_names_and_put_back_from_the_swap_s_records(tmp_path, kind):
    python = python_of(kind)
    done = subprocess.run([python, "-c", SWAPS], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(helpers.REPO)))
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    if kind == "3.13t":
        assert got["referrers_find_it"] is False  # what broke the attach there: gc no longer finds the function
    assert got["counted"] == [1] * 5 and got["marks"] == 7 and got["after"] == 7, got
    assert got["results"] == [1, 2, 3, 4, 5, 1, 1, 2, 3, 4, 5] and got["left"] == [], got
    assert got["restored"] == [True] * 5 and got["calls"] == 6, got  # sys.monitoring counted each call while on


@pytest.mark.parametrize("kind", KINDS)
def test_a_call_that_never_reaches_the_point_is_counted_in_the_status(setups, kind):
    """A method whose point is never reached (its guard never holds): the status while the window waits says how
    many times it was called since its code went in, which the waiting line tells (3.12+: ``sys.monitoring``)."""
    python = python_of(kind)
    from patchkit.attach import records

    s = setups(python, method="step_inside", points=NEVER)
    s.wait_steps(5)
    attaching = s.attach("--steps", "3", start_new_session=True)
    deadline, calls = time.time() + 120, []
    while time.time() < deadline and attaching.poll() is None:
        statuses = records.status(s.job.pid)
        calls = [st.get("calls") for st in statuses if st.get("state") == "attached"]
        if calls and calls[0] and calls[0] > 10:
            break
        time.sleep(0.2)
    attaching.send_signal(signal.SIGINT)
    _, err = s.ended(attaching)
    final, job_err = s.finish()
    assert calls and calls[0] > 10, (calls, err)
    assert attaching.returncode == 130, err
    assert final["back"] is True and final["left"] == [] and s.job.returncode == 0, (final, job_err)
    assert only_patchkit(job_err), job_err
