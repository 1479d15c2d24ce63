"""One key's capture: the schedule and window state machine that runs a backend's profiler code.

A :class:`Capture` is driven by ``patchkit.runtime`` from the thread that
created it.  Its schedule is exactly ``torch.profiler.schedule(wait, warmup,
active, repeat, skip_first)``, or the list ``schedule.steps``; sections of the backend's program (see
``patchkit.runtime.backends``) run at the moments the schedule calls for.

Between two *schedule events* (a window opens, a window closes, the schedule
is over) a step only runs the ``advance`` section (plus ``step_exit`` /
``step_enter`` inside a window, when the backend has them).  :meth:`Capture.arm`
works out, after each event, the next step at which one can happen, so the
steps in between take :meth:`Capture.quick_step`: no lock, no schedule
arithmetic, one ``exec`` of code compiled when the capture was created.

Standard library only.
"""

from __future__ import annotations

import os
import threading
import time

from patchkit.runtime.process import fail, lock, reason, retire, say, strict

NONE, WARMUP, RECORD, RECORD_AND_SAVE = 0, 1, 2, 3

_get_ident = threading.get_ident


class Capture:
    """One key's profiler, driven by the schedule (see patchkit.runtime.backends for the code it runs)."""

    def __init__(self, key, s, rank):
        from patchkit.runtime.backends import next_event, schedule_action, schedule_end, window_last

        self.key = key
        self.s = s
        self.backend = s["backend"]
        self.rank = rank
        self.program = None
        self.thread = _get_ident()
        self.thread_name = threading.current_thread().name
        self.sched = tuple(s[k] for k in ("wait", "warmup", "active", "repeat", "skip_first")) + (
            frozenset(s.get("steps") or ()),)
        self._action, self._next, self._last = schedule_action, next_event, window_last
        self.end = schedule_end(*self.sched)
        self.n = 0
        self.window = None  # (first, last) recorded step of the open window
        self.in_step = False  # a per-step range is open
        self.ended = False
        self.recorded = []
        self.traces = []
        self.failed = []  # (trace, why) of each trace not written whole (a full disk, a quota, a killed writer)
        self.error = None
        # for quick_step, set by arm(): steps below next_event are no event
        self.next_event = 0
        self.namespace = None
        self.advance_code = None  # the "advance" section; None: the per-step sections run instead
        self.ranges = []  # [name, handle] of each labelled range open in the window, oldest first
        self.answer = None  # for a window `patchkit capture` asked for: called when it closes (patchkit.runtime.ondemand)

    def action(self, n):
        return self._action(n, *self.sched)

    # -- the schedule events ---------------------------------------------------

    def begin(self):
        p = self.program
        p.snapshot()
        p.run("create")
        p.run("begin")
        self._settle(None, self.action(0))
        self.arm()

    def advance(self):
        """One step, working out from the schedule what it must do (the full path)."""
        prev = self.action(self.n)
        if self.in_step:
            self.in_step = False
            self.program.run("step_exit", self.n)
        self.n += 1
        self.program.run("advance", self.n)
        self._settle(prev, self.action(self.n))
        self.arm()

    def arm(self):
        """Prepare :meth:`quick_step` for the steps up to the next schedule event."""
        if self.ended:
            return
        self.next_event = self._next_event(self.n)
        self.namespace = self.program.namespace
        self.advance_code = None if self.in_step else self.program.code("advance")

    def _next_event(self, n):
        """The first step after ``n`` at which a window may open or close, or the schedule end."""
        return self._next(n, *self.sched)

    def _settle(self, prev, cur):
        n = self.n
        if prev == RECORD_AND_SAVE and self.window is not None:
            self._close(n - 1)
        if cur in (RECORD, RECORD_AND_SAVE) and self.window is None:
            last = self._last(n, *self.sched)
            self.window = (n, last)
            self.window_started = time.time()  # for the capture's manifest
            self.program.run("window_open", n)
            where = self.program.trace_dir or f"the {self.backend} report"
            say(f"{self.key}: recording {_span(n, last)} (rank {self.rank}, {self.backend}) -> {where}")
        if self.end is not None and n >= self.end:
            self.finish("schedule over")
            return
        if self.window is not None and self.program.has("step_enter"):
            self.program.run("step_enter", n)
            self.in_step = True

    # -- the steps in between -------------------------------------------------

    def quick_step(self):
        """A step that is no schedule event, from the owning thread; False: take the full path instead.

        Only the owning thread calls into the profiler, and only it changes
        this capture between events, so no lock is taken.  A failure is one
        line and finishes the key, as on the full path.
        """
        n = self.n + 1
        if n >= self.next_event or _get_ident() != self.thread:
            return False
        code = self.advance_code
        try:
            if code is not None:
                self.n = n
                ns = self.namespace
                ns["step"] = n
                exec(code, ns)
            else:
                self._hooked_step(n)
        except Exception as exc:
            fail(self.key, f"the profiler failed at step {self.n}", exc)
        return True

    def _hooked_step(self, n):
        """A step without a lone ``advance`` to run: the per-step sections around it, or nothing (nsys)."""
        p = self.program
        if self.in_step:
            self.in_step = False
            p.run("step_exit", n - 1)
        self.n = n
        p.run("advance", n)
        if self.window is not None and p.has("step_enter"):
            p.run("step_enter", n)
            self.in_step = True

    # -- closing ------------------------------------------------------------------

    def _close(self, last):
        first = self.window[0]
        self.window = None
        self.close_ranges()
        self.program.run("window_close", last)
        self.recorded.append((first, last))
        self._log_close(first, last, "")

    def _log_close(self, first, last, why):
        new, failed = _written(self.program)
        self.traces += new
        self.failed += failed
        written = _write_manifest(self, first, last, new, why, failed)
        error = "; ".join(f"{path} was not written whole: {reason}" for path, reason in failed)
        if self.answer is not None:
            self.answer(first=first, last=last, traces=new, error=error or None)
        where = f"written by {self.backend} itself" if self.program.trace_dir is None else ", ".join(new) or (
            "none" if failed else f"none found in {self.program.trace_dir}")
        say(f"{self.key}: window closed after step {last}{why} ({_span(first, last)} recorded); trace: {where}")
        if failed:
            say(f"{self.key}: capture failed: {error}; {'its manifest says so, and ' * written}the job runs on")

    def finish(self, reason):
        """Stop for good: close an open window (flushing it), stop the profiler, mark the key finished."""
        with lock:
            if self.ended:
                return
            p = self.program
            if self.in_step:
                self.in_step = False
                p.run("step_exit", self.n)
            window = self.window
            self.window = None
            if window is not None:
                self.close_ranges()
                p.run("window_close", self.n)
            self.ended = True
            p.run("end", self.n)
            if window is not None:
                self.recorded.append((window[0], self.n))
                self._log_close(window[0], self.n, f" at {reason}")
            p.namespace.clear()  # let the profiler and its events go
            retire(self.key, self)

    # -- labelled ranges and marks (patchkit.runtime.ranges) ----------------------

    def open_range(self, name):
        """Open a range in the window (the caller checked there is one); returns its entry, for close_range."""
        entry = [name, self.program.call("range_open", name=name)]
        self.ranges.append(entry)
        return entry

    def close_range(self, entry):
        """Close one range; a range the window already closed is not closed twice."""
        if any(e is entry for e in self.ranges):
            self.ranges = [e for e in self.ranges if e is not entry]
            self.program.call("range_close", name=entry[0], handle=entry[1])

    def close_ranges(self, name=None):
        """Close the open ranges (of ``name``), newest first: at a window's end, or those an exception left open."""
        for entry in reversed([e for e in self.ranges if name is None or e[0] == name]):
            self.close_range(entry)

    def mark(self, name):
        self.program.call("mark", name=name)

    def abandon(self):
        """At exit, owned by another thread: forget it without touching the profiler."""
        if self.window:
            say(f"{self.key}: a window is still open at exit in thread {self.thread_name}; it cannot be "
                "flushed from another thread, so it is lost")
        self.ended = True
        retire(self.key, self)

    def quiet_end(self):
        """After a failure: release the profiler, say nothing, never raise."""
        if self.ended or self.program is None or self.thread != _get_ident():
            self.ended = True  # (a profiler must not be stopped from another thread: torch may crash)
            return
        self.ended = True
        for section in (("step_exit",) if self.in_step else ()) + (("window_close",) if self.window else ()) + ("end",):
            try:
                self.program.run(section, self.n)
            except Exception:
                pass
        self.in_step = False
        self.window = None
        self.program.namespace.clear()


PARTIAL = (".part", ".tmp")  # a trace its writer has not finished (or stopped writing): never a capture
STOPPED = "the disk was full, a quota or file size limit was hit, or the writer was killed"


def _written(program):
    """(whole traces, [(trace, why not)]) of the window that just closed: profilers write without checking."""
    from patchkit.core import manifest

    failed = program.failed_traces()  # what the backend's own code could not write (and left under no name)
    whole = []
    for path in program.new_traces():
        stem = next((path[: -len(e)] for e in PARTIAL if path.endswith(e)), None)
        if stem is not None:
            if stem not in dict(failed):
                failed.append((stem, f"its writer left {os.path.basename(path)} unfinished: {STOPPED}"))
            continue
        why = _unfinished(path, manifest)
        if why:
            failed.append((path, why))
        else:
            whole.append(path)
    return whole, failed


def _unfinished(path, manifest):
    """Why a trace a profiler wrote is not whole ("" when it looks whole); never raises."""
    try:
        if not os.path.isdir(path):
            return "" if path.endswith(".gz") else manifest.check_trace(path)
        names = [os.path.relpath(os.path.join(top, n), path) for top, _dirs, files in os.walk(path)
                 for n in files if n.endswith(".json")][:1000]
        if path.endswith(manifest.ASCEND_ENDING) and not any(n.startswith("profiler_info") for n in names):
            return f"torch_npu did not finish it (no profiler_info*.json): {STOPPED}"
        cut = [n for n in names if manifest.check_trace(os.path.join(path, n))]
        return f"its {cut[0]} ends in the middle of its JSON data: {STOPPED}" if cut else ""
    except Exception as exc:  # noqa: BLE001 - a check must not end the capture
        return f"it cannot be checked: {type(exc).__name__}: {exc}"


def _span(a, b):
    return f"step {a}" if a == b else f"steps {a}-{b}"


def _write_manifest(cap, first, last, traces, why, failed=()):
    """The capture's manifest next to its traces (patchkit.core.manifest); False: not written (one line, never raised)."""
    try:
        from patchkit.core import manifest

        path = manifest.record_window(cap.key, cap.backend, cap.rank, cap.s, first, last,
                                      getattr(cap, "window_started", None), traces, why.replace(" at ", "", 1),
                                      failed=failed)
    except Exception as exc:
        say(f"{cap.key}: the capture's manifest was not written: {reason(exc)}")
        if strict():
            raise
        return False
    folder = os.path.dirname(os.path.dirname(path))
    try:
        manifest.note_folder(folder)
    except Exception as exc:
        say(f"{cap.key}: the capture's manifest {path} was written, but patchkit's list of capture folders could "
            f"not be updated ({reason(exc)}); `patchkit traces {folder}` finds it")
        if strict():
            raise
    return True
