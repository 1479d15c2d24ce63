"""In the job: what ``patchkit attach`` runs there, on the main thread, once its hash-checked request is read.

:func:`attach` checks everything first and changes nothing unless all of it holds: the module is imported,
its file is the one planned (sha256) and the one the job loaded (every function of it equals the file
compiled afresh; a compiled copy, when there is one, records the file's size and time), each target is
found alive and its instrumented twin has the same free variables.  Then it configures the runtime for the
recipe (fresh: a recipe attached before starts again), puts ``_patchkit_runtime`` in the module's namespace,
swaps the code objects (:mod:`patchkit.runtime.attach.swap`; a call of a target running on this thread keeps its
own code, and takes the recipe's statements from a line trace on its frame: :mod:`patchkit.runtime.attach.live`)
and puts the recipe's decorators (``on_exit``, a range
around a method) where the job holds each decorated function (:mod:`patchkit.runtime.attach.decorate`).  A refusal or a
failure is written to the channel and said in one line on stderr; the job runs on with its own code.

A daemon thread then watches, every :data:`POLL` seconds (while the window waits, the status says the calls of
the instrumented code since it went in: :class:`~patchkit.runtime.attach.swap.Calls`): when the recipe's capture is over
(its window closed, or it never starts here: not a listed rank), when ``detach`` appears in the channel or the
channel goes (the attaching command ended), it swaps the originals back, and removes ``_patchkit_runtime`` once
no function has instrumented code and no frame runs it (:func:`~patchkit.runtime.attach.swap.put_back`); else it stays.
A detach asked mid-window ends the capture at its next step, in its own thread, so the window is flushed
(:func:`patchkit.runtime.close`).  A child forked while attached gets the job's
own code back and records nothing (:mod:`patchkit.runtime.attach.fork`).  A request to watch (``attach --auto``)
starts :mod:`patchkit.runtime.attach.watch` instead, and changes nothing.  Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import threading
import time

from patchkit.runtime.attach.decorate import plan_wraps
from patchkit.runtime.attach.fork import ACTIVE, watch_forks
from patchkit.runtime.attach.live import Live
from patchkit.runtime.attach.loaded import changed_function, pyc_problem
from patchkit.runtime.attach.protocol import Reason, State
from patchkit.runtime.attach.swap import Calls, Refused, in_flight, plan_swaps, put_back, scope_name

POLL = 0.05
TELL = 1.0  # seconds between two statuses that only say a new count of calls
SETTLE = 5.0  # seconds a restore waits for the call running the recipe's code (the window's last step) to end
HOLD, LATER = 600.0, 10.0  # then, said, seconds it waits for calls still in the recipe's code; then, between looks
RUNTIME = "_patchkit_runtime"
STATUS, DETACH = "status.json", "detach"


def say(message):
    from patchkit.runtime import process

    process.say(f"attach: {message}")  # one line on the job's stderr; never raises


class Channel:
    """The folder the attaching command reads: ``status.json`` (replaced whole), and ``detach`` when asked."""

    def __init__(self, folder):
        self.folder = folder

    def write(self, record):
        self.put(STATUS, record)

    def put(self, name, record):
        """``name`` in the channel, replaced whole."""
        try:
            fd, tmp = tempfile.mkstemp(prefix=".status-", dir=self.folder)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(record, handle, separators=(",", ":"))
            os.replace(tmp, os.path.join(self.folder, name))
        except Exception:  # the attaching command has gone (its folder with it): nobody to tell
            pass

    def detach_asked(self):
        return os.path.exists(os.path.join(self.folder, DETACH)) or not os.path.isdir(self.folder)


def attach(spec):
    """The entry point (main thread); never raises into the job."""
    channel = Channel(spec.get("channel", ""))
    base = {"pid": os.getpid(), "recipe": spec.get("recipe"), "id": spec.get("id")}
    try:
        if spec.get("watch") is not None:  # attach --auto: watch the stacks first, change nothing
            from patchkit.runtime.attach import watch

            watch.start(spec, channel, base)
            return
        current = ACTIVE.get(spec["recipe"])
        if current is not None:
            raise Refused(f"{spec['recipe']} is attached already (by request {current.spec['id']}): "
                          f"`patchkit detach {os.getpid()}` first", Reason.ATTACHED)
        Attachment(spec, channel, base).start()
    except Refused as exc:
        channel.write(dict(base, state=State.REFUSED.value, reason=exc.reason.value, error=str(exc), time=time.time()))
        say(f"{exc}; nothing changed, the job runs on")
    except BaseException as exc:  # noqa: BLE001 - whatever it is, the job must run on
        channel.write(dict(base, state=State.FAILED.value, error=f"{type(exc).__name__}: {exc}", time=time.time()))
        say(f"failed ({type(exc).__name__}: {exc}); the job runs on with its own code")
        if isinstance(exc, KeyboardInterrupt):
            give_back_interrupt()


def give_back_interrupt():
    """The job's own Ctrl-C, caught in here: delivered again once these lines have returned (50 ms later, from
    another thread: delivered now, it would land in the ``except`` that keeps the pending call from failing)."""
    import _thread

    threading.Timer(0.05, _thread.interrupt_main).start()


class Attachment:
    """One recipe attached to this process: its swaps, and the thread that takes them out again."""

    def __init__(self, spec, channel, base):
        self.spec, self.channel, self.base = spec, channel, base
        self.recipe = spec["recipe"]
        self.swaps, self.modules, self.targets = [], [], []
        self.state, self.attached_at, self.detach_why = "checking", None, ""
        self.calls, self.running, self.told = Calls(), [], (None, 0.0)

    # -- getting in ----------------------------------------------------------------------------------

    def check_module(self, entry):
        name, path = entry["name"], os.path.realpath(entry["file"])
        module = sys.modules.get(name)
        if module is None:
            raise Refused(f"the job has not imported {name} (yet?): attach when it has, or pick the recipe of "
                          "the code it runs", Reason.NOT_IMPORTED)
        if RUNTIME in vars(module):
            raise Refused(f"{name} runs with patchkit's lines already (applied, or `patchkit run`): ask it with "
                          "`patchkit capture` (schedule.trigger=manual) instead", Reason.APPLIED)
        named = getattr(module, "__file__", None) or ""
        loaded = os.path.realpath(named) if named else ""
        if loaded != path:
            top = loaded[: -len(entry["relpath"])].rstrip("/") if loaded.endswith(entry["relpath"]) else ""
            runs = f"the job runs {loaded or 'no file'} as its script (__main__)" if name == "__main__" else \
                f"the job imported {name} from {loaded or 'no file'}"
            raise Refused(f"{runs}, not {path} that patchkit planned" + (f": pass --root {top}" if top else ""),
                          Reason.NOT_PLANNED)
        with open(path, "rb") as handle:
            source = handle.read()
        if hashlib.sha256(source).hexdigest() != entry["sha256"]:
            raise Refused(f"{path} changed since patchkit attach read it; try again", Reason.NOT_PLANNED)
        original = compile(source, named, "exec", dont_inherit=True)
        changed = pyc_problem(module, path, source) or changed_function(module, original, path)
        if changed:
            raise Refused(f"{path} changed on disk since the job imported it ({changed}): its instrumented text "
                          "would not be the job's code; restart the job to profile the new file", Reason.NOT_PLANNED)
        instrumented = compile(entry["instrumented"], named, "exec", dont_inherit=True)
        swaps, wraps = [], []
        live = {tuple(t): triggers for t, triggers in entry.get("live", [])}
        for target in entry["targets"]:
            planned = plan_swaps(module, tuple(target), original, instrumented)
            swaps += planned + self.live_calls(tuple(target), planned, live.get(tuple(target)), module)
            self.targets.append(f"{name}:{scope_name(tuple(target))}")
        for target, definitions in entry.get("decorated", []):  # after the swaps: put on last, taken off first
            wraps += plan_wraps(module, target, definitions, original)
            if f"{name}:{scope_name(tuple(target))}" not in self.targets:
                self.targets.append(f"{name}:{scope_name(tuple(target))}")
        return module, swaps + wraps

    def live_calls(self, target, planned, triggers, module):
        """A line trace for each call of ``target`` running on this thread now, where the recipe's lines have a
        trigger there (:mod:`patchkit.runtime.attach.live`): such a call keeps its own code until it returns."""
        from patchkit.runtime.attach.live import running, traced

        frames = [f for s in planned if hasattr(s, "old") and s.scope == scope_name(target) for f in running(s.old)]
        if not frames or not triggers:
            return []
        if traced():
            raise Refused(f"{scope_name(target)} is running on the main thread, which has a trace function of its "
                          "own (a debugger, coverage?): attach replaces none; attach when it is gone, or at a "
                          "function called every step")
        return [Live(scope_name(target), frames, triggers, vars(module))]

    def start(self):
        checked = [self.check_module(entry) for entry in self.spec["modules"]]
        import patchkit.runtime as runtime  # after every check: a refusal imports nothing

        runtime.require(self.spec["lines"])
        runtime.forget(self.recipe)
        space = {}
        exec(compile(self.spec["header"], "<patchkit attach header>", "exec", dont_inherit=True), space)
        if space.get(RUNTIME) is not runtime:
            raise Refused("the recipe's header did not configure patchkit.runtime")
        from patchkit.runtime.ready import refusal

        unready = refusal(self.recipe)  # its backend's library and device, asked before anything changes
        if unready:
            raise Refused(unready, Reason.BACKEND)
        done = self.swaps  # filled as each goes in: a child forked meanwhile (another thread) puts these back
        self.runtime = runtime
        watch_forks()
        ACTIVE[self.recipe] = self
        try:
            for module, swaps in checked:
                vars(module)[RUNTIME] = runtime
                self.modules.append(module)
                for swap in swaps:
                    done.append(swap)
                    swap.apply()
        except BaseException:  # an audit hook refused a __code__ assignment, ...: all of it back
            if not put_back(done, 0, POLL):  # (else the name stays: what is left reads it)
                for module in self.modules:
                    vars(module).pop(RUNTIME, None)
            ACTIVE.pop(self.recipe, None)
            raise
        self.attached_at = time.time()
        frames = sys._current_frames()  # a call in progress keeps its code: the window opens at the next call
        live = {s.scope for s in done if isinstance(s, Live)}  # a running call these trace takes the lines now
        self.running = sorted({s.scope for s in done if hasattr(s, "old") and in_flight((s.old,), frames)} - live)
        try:
            self.calls.start([c for s in done for c in s.counted()])
        except Exception:  # noqa: BLE001 - a count is a nicety: the attach goes on without one
            self.calls.stop()
        self.tell()
        threading.Thread(target=self.watch, name="patchkit-attach", daemon=True).start()

    # -- watching and getting out -----------------------------------------------------------------------

    def capture_state(self):
        """"running", "over" (recorded, or never starts here), or "waiting"."""
        from patchkit.runtime import process

        with process.lock:
            keys = [k for k in list(process.captures) + list(process.finished) if process.recipe_of(k) == self.recipe]
            if any(k in process.captures for k in keys):
                return "running"
            return "over" if keys else "waiting"

    def tell(self):
        """The status while the window waits: ``calls`` since the code went in, at most every :data:`TELL` s."""
        count = self.calls.count
        self.told = (count, time.time())
        self.report(State.ATTACHED, running=self.running, **({} if count is None else {"calls": count}))

    def report(self, state, **extra):
        self.state = state
        captures = [dict(r, traces=[os.path.abspath(t) for t in r["traces"]])  # the job's folder: said elsewhere
                    for r in self.runtime_report() if r["key"].partition("/")[0] == self.recipe]
        self.channel.write(dict(self.base, state=State(state).value, time=time.time(), attached_at=self.attached_at,
                                targets=self.targets, steps=self.spec["steps"], captures=captures,
                                functions=sum(len(s.functions) for s in self.swaps), **extra))

    def over_why(self):
        """Why the capture is over: its window closed, or it ended with an error before recording any (a refused
        save folder, a profiler that failed to start: the error is in its capture's report)."""
        mine = [r for r in self.runtime_report() if r["key"].partition("/")[0] == self.recipe]
        if any(r["error"] for r in mine) and not any(r["recorded"] for r in mine):
            return "the capture ended with an error before any window"
        return "the window closed"

    def runtime_report(self):
        try:
            from patchkit import runtime

            return runtime.report()
        except Exception:
            return []

    def watch(self):
        try:
            self.watching()
        except BaseException as exc:  # noqa: BLE001 - put the originals back whatever went wrong
            say(f"{self.recipe}: the watcher failed ({type(exc).__name__}: {exc}); restoring the job's own code")
            self.restore(f"the watcher failed: {exc}")

    def watching(self):
        closing = False
        while True:
            time.sleep(POLL)
            state = self.capture_state()
            if state != "waiting":
                self.calls.stop()
            if state == "running" and self.state == "attached":
                self.report(State.RECORDING)
            elif self.state == "attached" and self.calls.count != self.told[0] and time.time() - self.told[1] > TELL:
                self.tell()
            if state == "over":
                return self.restore(self.detach_why or self.over_why())
            if not closing and self.channel.detach_asked():
                self.detach_why = "detached" if os.path.isdir(self.channel.folder) else "the attaching command ended"
                closing = True
                if not self.runtime.close(self.recipe, f"patchkit detach ({self.detach_why})"):
                    if self.capture_state() != "running":  # close() refuses new starts: none can begin now
                        return self.restore(self.detach_why)
                self.report(State.CLOSING)

    def restore(self, why):
        self.calls.stop()
        put_back(self.swaps, 0, POLL)
        ok = all(s.restored() for s in self.swaps)
        kept = [s.scope for s in self.swaps if getattr(s, "replaced", False)]
        if kept:  # a decorated attribute that something else replaced meanwhile: it stays
            why += f"; {', '.join(kept)} was replaced in the job meanwhile, and is left as it is"
        self.report(State.RESTORED, why=why, original_code=ok)  # (a job may end now:) the code is back, and the
        left = put_back(self.swaps, SETTLE, POLL)  # command waits for "clean", once nothing reads the name
        if left:  # (removed while a call still runs the recipe's code, it would fail: NameError)
            said = f"{why}; the recipe's code is still in the job ({', '.join(left)}): {RUNTIME} stays until it is out"
            say(f"{self.recipe}: {said}")  # (said first: once it is reported, the job may end at once)
            self.report(State.RESTORED, why=said, original_code=ok, clean=False)
            left = put_back(self.swaps, HOLD, POLL)
        while left:
            time.sleep(LATER)
            left = put_back(self.swaps, 0, POLL)
        for module in self.modules:
            if vars(module).get(RUNTIME) is self.runtime:
                del vars(module)[RUNTIME]
        if ACTIVE.get(self.recipe) is self:  # (a test's fixture may have let another attach of the recipe in)
            del ACTIVE[self.recipe]
        say(f"{self.recipe}: {why}; the job's own code is back ({', '.join(self.targets)})")
        self.report(State.RESTORED, why=why, original_code=ok and all(s.restored() for s in self.swaps), clean=True)
