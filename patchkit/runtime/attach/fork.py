"""In the job: a child forked while a recipe is attached runs the job's own code, and records nothing for it.

A process forked from the job (``os.fork``, multiprocessing's ``fork`` start method, a DataLoader worker) is a
copy of it: the swapped code objects, the decorators put in, and the recipe's capture as the runtime holds it,
its profiler included.  Left so, the child ran the recipe's code after the parent had its own back, and wrote a
second trace of its own.  So, once per process, :func:`watch_forks` registers :func:`in_child`
(``os.register_at_fork``; a hook cannot be unregistered, so it looks at :data:`ACTIVE`), which, in the child
only: puts every active attachment's original code back (its swaps and decorators undone), ends its recipe in
the child's runtime (:func:`end_in_child`: no capture of it starts there, the copied one is dropped without
touching its profiler) and forgets the attachments.  The parent's attachment is untouched, and the child writes
nothing to the attaching command's channel.  ``_patchkit_runtime`` stays in the module: a frame of instrumented
code may be on the forking thread's stack, and its calls into a finished recipe cost nothing.

Runs inside the process ``patchkit attach`` got into (see :mod:`patchkit.runtime.attach.agent`): standard library and
:mod:`patchkit.runtime` only.
"""

from __future__ import annotations

import os

ACTIVE = {}  # recipe id -> its Attachment, from its first swap until its code is back, in this process
HOOKED = []  # [True] once in_child is registered here (a child inherits the registration, and this)


def watch_forks():
    """Register :func:`in_child` once per process (where ``os.register_at_fork`` exists)."""
    if not HOOKED and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=in_child)
        HOOKED.append(True)


def in_child():
    """The hook, run in every child forked from here: see the module's docstring.  Never raises; says one line only
    when something could not be put back."""
    if not ACTIVE:
        return
    try:
        parent = os.getppid()
        from patchkit.runtime import process

        lock = process.lock
        if not getattr(lock, "_is_owned", lambda: True)() and hasattr(lock, "_at_fork_reinit"):
            lock._at_fork_reinit()  # held at the fork by a thread the child does not have: it would never be free
        failed = []
        for attachment in list(ACTIVE.values()):
            failed += forked(attachment, parent)
        ACTIVE.clear()
        if failed:
            say(f"in the child {os.getpid()} forked from {parent}, not put back: {'; '.join(failed)}")
    except BaseException as exc:  # noqa: BLE001 - a fork of the job goes on whatever happens here
        try:
            say(f"in the child {os.getpid()}: putting the job's own code back failed ({type(exc).__name__}: {exc})")
        except BaseException:  # noqa: BLE001
            pass


def forked(attachment, parent):
    """In a child forked while ``attachment`` was in: the job's own code back (each swap's recorded functions), the
    recipe over here; what could not be put back, as a list of short texts."""
    failed = []
    for swap in reversed(attachment.swaps):
        try:
            swap.undo()
        except Exception as exc:  # noqa: BLE001 - the others still go back
            failed.append(f"{swap.scope}: {type(exc).__name__}: {exc}")
    end_in_child(attachment.recipe, f"forked from {parent} while patchkit attach had {attachment.recipe} there; this "
                                    "process runs its own code")
    return failed


def end_in_child(recipe, why):
    """``recipe`` over in a forked child's runtime: none of its keys starts here (``why``: what a key first met
    here says, once), and the capture copied from the parent is dropped without touching its profiler
    (never stepped, flushed or written here; the parent's windows are not the child's to report)."""
    from patchkit.runtime import process

    with process.lock:
        process.refused[recipe] = why
        for table in (process.captures, process.quick, process.closing, process.checked, process.done):
            for key in [k for k in list(table) if process.recipe_of(k) == recipe]:
                cap = table.pop(key)
                if table is process.captures:
                    cap.ended = True
                process.finished.add(key)
        if process.recipe_of(process.state["active"]) == recipe:
            process.state["active"] = None


def say(message):
    from patchkit.runtime import process

    process.say(f"attach: {message}")  # one line on the job's stderr; never raises
