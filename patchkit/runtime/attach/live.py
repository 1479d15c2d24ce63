"""In the job: the recipe's statements for a call that was already running when attach got in.

A function that runs for the whole job (a trainer's ``train()``) keeps its own code object until it returns, so a
swap never reaches the loop inside it.  When such a call runs on this thread (the main thread, where attach's
lines run), :class:`Live` gives that one frame a line trace (``frame.f_trace``, with ``sys.settrace`` set to a
function that traces no other frame): each time the frame arrives at a trigger's statement from outside it (a
loop's turn, not a turn of a loop inside that statement), the statements the recipe inserts there run, in the
frame's own namespace, as the instrumented code would run them.  New calls take the swapped code as before.

Taken out (:meth:`Live.undo`, from the watcher's thread), the trace removes itself at the frame's next line
(only the frame's own thread can): until then :meth:`Live.installed` says so, and the agent waits as it waits for
any call still running the recipe's code.  Refused when the thread already has a trace function of its own (a
debugger, coverage): it is never replaced.  Standard library only.
"""

from __future__ import annotations

import os
import sys
import threading
import time

WAIT = 5.0  # seconds undo waits for the frame to take its trace off


def _no_trace(frame, event, arg):  # the thread's trace function: no other frame is traced
    return None


class Live:
    """The triggers of one target, on its calls running in this thread."""

    functions = ()

    def __init__(self, scope, frames, triggers, space):
        self.scope, self.frames = scope, list(frames)
        self.triggers = {}
        for first, last, text in triggers:
            self.triggers[first] = (last, compile(text, "<patchkit attach: the recipe's lines>", "exec",
                                                  dont_inherit=True))
        self.space = space  # the module's namespace: _patchkit_runtime is in it while attached
        self.prev = {id(f): f.f_lineno for f in self.frames}
        self.thread, self.pid = threading.get_ident(), os.getpid()
        self.stopping = False
        self.on = set()

    def apply(self):
        if traced():
            raise RuntimeError("this thread has a trace function of its own (a debugger, coverage?)")
        sys.settrace(_no_trace)
        for f in self.frames:
            f.f_trace_lines = True
            f.f_trace = self.local
            self.on.add(id(f))

    def local(self, frame, event, arg):
        if self.stopping or event == "return":
            self.off(frame)
            return None
        if event == "line":
            line, prev = frame.f_lineno, self.prev.get(id(frame))
            self.prev[id(frame)] = line
            hit = self.triggers.get(line)
            if hit is not None and not (prev is not None and line <= prev <= hit[0]):
                try:
                    exec(hit[1], self.space, frame.f_locals)
                except Exception:  # noqa: BLE001 - the recipe's lines never raise into the job
                    pass
        return self.local

    def off(self, frame):
        frame.f_trace = None
        self.on.discard(id(frame))
        if not self.on and sys.gettrace() is _no_trace:
            sys.settrace(None)

    def undo(self):
        """Ask the frame to take its trace off at its next line; wait a little for it (not from its own thread).  In
        a child forked meanwhile, the frames' thread is there only if it forked: else they never run again."""
        self.stopping = True
        if threading.get_ident() == self.thread:
            for f in self.frames:
                if id(f) in self.on:
                    self.off(f)
            return
        if os.getpid() != self.pid:
            self.on.clear()
            return
        end = time.monotonic() + WAIT
        while self.on and time.monotonic() < end:
            time.sleep(0.01)

    def installed(self):
        return bool(self.on)

    def restored(self):
        return not self.on

    def codes(self):
        return []

    def counted(self):
        return []


def traced():
    """Whether this thread has a trace function of its own."""
    return sys.gettrace() not in (None, _no_trace)


def running(code):
    """This thread's frames running ``code`` (the original code object of a target), innermost first."""
    out, f = [], sys._getframe(1)
    while f is not None:
        if f.f_code is code:
            out.append(f)
        f = f.f_back
    return out
