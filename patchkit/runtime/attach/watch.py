"""In the job: what ``patchkit attach --auto`` runs there to find the step, changing none of the job's code.

:func:`start` (the main thread, from :func:`patchkit.runtime.attach.agent.attach`) starts a daemon thread that looks
at every other thread's stack (``sys._current_frames()``) every :data:`INTERVAL` seconds, or less often when a
look costs more than :data:`SHARE` of the time (the median of the last few: a look that happened to run the job's
garbage collection does not space the next ones out): the job's compute is not slowed by more than that.  For each
thread it keeps the frames from the root down to the first one in torch's own folder (the ``cutoff``: torch's
internals and every module call under the outermost are not kept).  A frame object seen again at the next look
is the same call; a new frame object is a new call (the previous look's frames are held until the next one, so
no new frame can take an old one's address).  What it notes (:mod:`patchkit.attach.watchread` reads it on the
attaching side): each call (its function, thread, caller, the caller's line, first and last look); each *move*
(the table ``wraps``) of the deepest frame two looks in a row share, the only one whose line can have changed:
its line changed, forward or back, or it stayed while the call under it is a new one of the same function (a
loop entered, turned or left; at most one row per look and thread); the looks per function and line; and each
optimizer step, exactly, through torch's global step hook (registered only when the job has imported
``torch.optim``; taken off at the end).

It stops when the shape repeats :data:`REPEATS` times (optimizer steps, or long calls of one function, or turns
of one loop: a frame's moves back or on one line), when ``seconds`` have passed, when the notes reach their bounds
(:data:`MAX_CALLS` calls and as many moves: a few MiB), or when the attaching command asks (``detach``) or goes;
then it writes ``watch.json`` and the status ``watched``.  Never raises into the job.  Standard library only.
"""

from __future__ import annotations

import os
import sys
import threading
import time

INTERVAL = 0.005  # seconds between two looks, at least
SHARE = 0.01  # the most of the job's time the looks may take (the median of the last SPREAD looks' cost)
SPREAD = 15
LONGEST = 0.25  # seconds between two looks, at most
REPEATS = 6  # repetitions of one shape that make it clear
MIN_SECONDS = 2.0
MAX_CALLS = 60000  # calls noted, and as many moves: about 10 MiB at most
MAX_MARKERS = 10000
WATCH = "watch.json"


def start(spec, channel, base):
    """Start watching (a thread); the status says ``watching`` until ``watched``."""
    w = spec.get("watch") or {}
    watcher = Watcher(channel, base, float(w.get("seconds", 30)), int(w.get("repeats", REPEATS)))
    watcher.report("watching")
    threading.Thread(target=watcher.run, name="patchkit-watch", daemon=True).start()
    return watcher


def torch_folder():
    torch = sys.modules.get("torch")
    named = getattr(torch, "__file__", None) if torch is not None else None
    return os.path.dirname(os.path.realpath(named)) + os.sep if named else ""


class Watcher:
    def __init__(self, channel, base, seconds, repeats):
        self.channel, self.base = channel, base
        self.seconds, self.repeats = max(0.5, min(seconds, 3600.0)), max(2, repeats)
        self.lock = threading.Lock()
        self.codes, self.code_rows = {}, []
        self.calls, self.wraps, self.markers = [], [], []
        self.lines, self.leaves = {}, {}
        self.threads, self.thread_rows = {}, []
        self.stacks = {}  # thread ident -> (frames, calls, lines, looks since each line, index of each, ends in torch)
        self.known = {}  # id(frame) -> (frame, call): the frames of the last look
        self.hooked = {}  # the same, for the frames an optimizer step noted since the last look
        self.long_calls, self.turns = {}, {}  # code -> complete calls of 3 looks or more; call -> its turns
        self.cutoff = torch_folder()
        self.t0, self.first, self.last, self.samples, self.spent = time.perf_counter(), None, 0.0, 0, 0.0
        self.interval, self.stopped, self.hook = INTERVAL, "", None

    def now(self):
        return time.perf_counter() - self.t0

    def report(self, state, **extra):
        self.channel.write(dict(self.base, state=state, time=time.time(), samples=self.samples,
                                seconds=round(self.last, 3), **extra))

    # -- the thread ----------------------------------------------------------------------------------

    def run(self):
        try:
            self.hook = self.hook_steps()
            self.watch()
            self.finish()
        except BaseException as exc:  # noqa: BLE001 - the job runs on whatever happened here
            self.unhook()
            self.report("failed", error=f"the watcher failed: {type(exc).__name__}: {exc}")

    def watch(self):
        me, told = threading.get_ident(), 0.0
        recent = []
        while not self.stopped:
            began = time.thread_time()  # this thread's own time: not the waits for the GIL a busy job makes
            with self.lock:
                self.look(me)
            cost = time.thread_time() - began
            self.spent += cost
            # the median: a look that ran a garbage collection of the whole job (charged to it) spaces no others out
            recent = (recent + [cost])[-SPREAD:]
            self.interval = min(LONGEST, max(INTERVAL, sorted(recent)[len(recent) // 2] / SHARE))
            if self.last - told > 1.0:
                told = self.last
                self.report("watching")
            self.stopped = self.why_stop()
            if not self.stopped:
                time.sleep(self.interval)

    def why_stop(self):
        if self.channel.detach_asked():
            return "detached"
        if len(self.calls) >= MAX_CALLS or len(self.wraps) >= MAX_CALLS or len(self.markers) >= MAX_MARKERS:
            return "cap"
        if self.last >= self.seconds:
            return "time"
        if self.last >= MIN_SECONDS and self.first is not None:
            seen = len(self.markers) if self.markers else max(
                max(self.long_calls.values(), default=0), max(self.turns.values(), default=0))
            if seen > self.repeats:
                return "repeated"
        return ""

    # -- one look --------------------------------------------------------------------------------------

    def code(self, c):
        k = self.codes.get(c)
        if k is None:
            k = self.codes[c] = len(self.code_rows)
            self.code_rows.append([c.co_filename, c.co_firstlineno, getattr(c, "co_qualname", c.co_name)])
        return k

    def thread(self, ident):
        k = self.threads.get(ident)
        if k is None:
            k = self.threads[ident] = len(self.thread_rows)
            named = next((t.name for t in threading.enumerate() if t.ident == ident), f"thread {ident}")
            self.thread_rows.append(named)
        return k

    def kept(self, leaf, old=None):
        """(the frames of one stack, root first, down to the first in torch's folder; how many of them the
        previous look's stack ``old`` had; whether it ends in torch).  The walk up from the innermost frame stops
        at a frame of ``old``: a frame's callers never change, so the rest is ``old``'s."""
        new, f, p = [], leaf, 0
        before, at = (old[0], old[4]) if old else ((), {})
        while f is not None:
            i = at.get(id(f))
            if i is not None and before[i] is f:
                p = i + 1
                break
            new.append(f)
            f = f.f_back
        if p and p == len(before) and old[5]:  # torch's first frame, as before: what is under it is not kept
            return before, p, True
        new.reverse()
        chain = list(before[:p]) + new
        cutoff = self.cutoff
        if cutoff:
            for j in range(p, len(chain)):
                if chain[j].f_code.co_filename.startswith(cutoff):
                    return chain[: j + 1], p, True
        return chain, p, False

    def new_call(self, frame, thread, parent, parent_line, t):
        self.calls.append([self.code(frame.f_code), thread, parent, parent_line, t, t])
        return len(self.calls) - 1

    def count(self, k, line, looks):
        """``looks`` more looks of call ``k``'s frame at ``line`` (counted when it leaves the line)."""
        key = (self.calls[k][0], line)
        self.lines[key] = self.lines.get(key, 0) + looks

    def gone(self, stack, j, t, n):
        """The frame at ``j`` of a previous look's ``stack`` is not in this one (look ``n``, at ``t``)."""
        chain, calls, lines, since = stack[:4]
        self.ended(calls[j], t)
        self.count(calls[j], lines[j], n - since[j])
        self.known.pop(id(chain[j]), None)

    def look(self, me):
        t = self.now()
        if self.first is None:
            self.first = t
        previous, self.last = self.last, t
        n = self.samples
        self.samples += 1
        stacks = {}
        for ident, leaf in sys._current_frames().items():
            if ident == me:
                continue
            old = self.stacks.pop(ident, None)
            chain, p, cut = self.kept(leaf, old)
            thread = self.thread(ident)
            o_chain, o_calls, o_lines, o_since = old[:4] if old else ((), (), (), ())
            for j in range(p, len(o_chain)):
                self.gone(old, j, previous, n)
            q = max(p - 1, 0)
            lines = list(o_lines[:q]) + [f.f_lineno or 0 for f in chain[q:]]
            since = list(o_since[:p]) + [n] * (len(chain) - p)
            calls = list(o_calls[:p])
            if p:  # the deepest frame of both looks: its move, if any (no frame above it can have moved)
                a, b = o_lines[p - 1], lines[p - 1]
                if b != a:
                    self.count(o_calls[p - 1], a, n - o_since[p - 1])
                    since[p - 1] = n
                again = b == a and p < len(chain) and p < len(o_chain) and chain[p].f_code is o_chain[p].f_code
                if b != a or again:
                    self.wraps.append([o_calls[p - 1], previous, t, a, b])
                if b < a or again:  # back, or the same function called anew on one line: a loop turned
                    self.turns[o_calls[p - 1]] = self.turns.get(o_calls[p - 1], 0) + 1
            for i in range(p, len(chain)):
                f = chain[i]
                held = self.known.get(id(f)) or self.hooked.get(id(f))
                k = held[1] if held is not None and held[0] is f else \
                    self.new_call(f, thread, calls[i - 1] if i else -1, lines[i - 1] if i else 0, t)
                calls.append(k)
                self.known[id(f)] = (f, k)
            mine = chain[-2] if cut and len(chain) > 1 else chain[-1] if chain and not cut else None
            if mine is not None:
                key = (self.code(mine.f_code), lines[len(chain) - 2 if cut else len(chain) - 1])
                self.leaves[key] = self.leaves.get(key, 0) + 1
            stacks[ident] = (chain, calls, lines, since, {id(f): i for i, f in enumerate(chain)}, cut)
        for old in self.stacks.values():  # threads that ended since
            for j in range(len(old[0])):
                self.gone(old, j, previous, n)
        self.stacks, self.hooked = stacks, {}

    def ended(self, k, t):
        row = self.calls[k]
        row[5] = max(row[5], t)
        if self.first is not None and row[4] > self.first and t - row[4] >= 2 * self.interval:
            self.long_calls[row[0]] = self.long_calls.get(row[0], 0) + 1

    # -- optimizer steps -----------------------------------------------------------------------------

    def hook_steps(self):
        optimizer = sys.modules.get("torch.optim.optimizer")
        register = getattr(optimizer, "register_optimizer_step_post_hook", None)
        return register(self.on_step) if callable(register) else None

    def on_step(self, optimizer, args, kwargs):
        """torch's hook, in the thread that stepped: the step, tied to the call of its first frame in torch."""
        try:
            t = self.now()
            chain = self.kept(sys._getframe(1))[0]
            with self.lock:
                if self.stopped or len(self.markers) >= MAX_MARKERS:
                    return
                thread, calls = self.thread(threading.get_ident()), []
                for i, f in enumerate(chain):
                    held = self.known.get(id(f)) or self.hooked.get(id(f))
                    if held is None or held[0] is not f:
                        held = self.hooked[id(f)] = (f, self.new_call(
                            f, thread, calls[-1] if calls else -1, (chain[i - 1].f_lineno or 0) if i else 0, t))
                    calls.append(held[1])
                if calls:
                    self.markers.append(["optimizer", calls[-1], t])
        except Exception:  # noqa: BLE001 - never into the job's optimizer step
            pass

    def unhook(self):
        hook, self.hook = self.hook, None
        if hook is not None:
            try:
                hook.remove()
            except Exception:  # noqa: BLE001
                pass

    # -- the end ---------------------------------------------------------------------------------------

    def finish(self):
        self.unhook()
        with self.lock:
            for chain, calls, lines, since in (stack[:4] for stack in self.stacks.values()):
                for k, line, n in zip(calls, lines, since):
                    self.calls[k][5] = self.last
                    self.count(k, line, self.samples - n)
            self.stacks, self.known, self.hooked = {}, {}, {}  # no frame of the job's is held any more
        data = {"format": 1, "pid": os.getpid(), "interval": (self.last - (self.first or 0)) / max(self.samples - 1, 1),
                "first": self.first or 0.0, "last": self.last, "samples": self.samples, "stopped": self.stopped,
                "cost": self.spent / max(self.last, 1e-9), "cutoff": self.cutoff, "threads": self.thread_rows,
                "codes": self.code_rows, "calls": self.calls, "wraps": self.wraps,
                "lines": [[c, ln, n] for (c, ln), n in self.lines.items()],
                "leaves": [[c, ln, n] for (c, ln), n in self.leaves.items()], "markers": self.markers,
                "npu": "torch_npu" in sys.modules}
        if self.stopped != "detached":
            self.channel.put(WATCH, data)
        self.report("watched", stopped=self.stopped)
