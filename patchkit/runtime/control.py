"""The full path of :mod:`patchkit.runtime`: starting a key's capture, steps at schedule events, process exit.

Everything here runs under the process state's lock.  Whether a key may start is
decided here: its recipe was configured and not refused, its settings are
valid, this rank and its replica are listed, no other capture (ours or a foreign profiler) is
running, and its save folder is reached through no folder or link another user controls (the state folder's
rule, :func:`save_folder_problem`).  Standard library only; the backend imports torch / torch_npu when a
capture is built.
"""

from __future__ import annotations

import atexit
import os
import stat
import sys
import threading

from patchkit.runtime.capture import Capture
from patchkit.runtime.process import (
    captures, checked, closing, fail, finished, lock, once, quick, recipe_of, refused, retire, say, settings, state,
    strict,
)

__all__ = ["call", "bad_key", "at_exit", "close"]


def bad_key(key):
    """A key that is neither a str nor None: said once per type (strict mode: raise)."""
    once(("bad-key", type(key).__name__), f"capture key {key!r} is not a string; ignored")
    if strict():
        raise TypeError(f"patchkit capture key must be a str or None, not {type(key).__name__}")


def call(key, stepping):
    """``start(key)`` (``stepping`` False) or ``step(key)`` when the per-step path cannot serve it."""
    if not isinstance(key, str):
        return bad_key(key)
    with lock:
        if key in finished:
            return
        cap = captures.get(key)
        if cap is None:
            try:
                try_start(key)
            except Exception as exc:
                fail(key, "could not start the profiler", exc)
            return
        if not stepping:
            return
        if key in closing and cap.thread == threading.get_ident():
            try:
                cap.finish(closing.pop(key))
            except Exception as exc:
                fail(key, "the profiler failed while closing", exc)
            return
        if cap.thread != threading.get_ident():
            once((key, "thread"), f"{key}: step from thread {threading.current_thread().name} ignored; the "
                 f"capture belongs to thread {cap.thread_name}, where it was started (a profiler is driven "
                 "by the thread that started it)")
            return
        try:
            cap.advance()
        except Exception as exc:
            fail(key, f"the profiler failed at step {cap.n}", exc)


def rank():
    """This process's rank: torch.distributed's when it is initialised, else $RANK, else 0."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None:
        try:
            if dist.is_available() and dist.is_initialized():
                return int(dist.get_rank())
        except Exception:
            pass
    try:
        return int(os.environ.get("RANK", "0") or 0)
    except ValueError:
        return 0


REPLICA_ENV = "VERL_REPLICA_RANK"  # verl >= 0.8: vLLMHttpServer sets it for the vLLM processes of its replica


def replica(size):
    """This process's Agent Loop replica and how it was read, or (None, why it cannot be).

    1. $VERL_REPLICA_RANK, which verl 0.8 and later set in each vLLM / vLLM-Ascend server process (the
       vLLM worker processes it spawns inherit it).
    2. Else ``$RANK // size``, ``size`` being the processes of one replica (rollout tp*dp*pp): where vLLM's
       or SGLang's worker runs inside a verl worker process (verl 0.4 to 0.6), $RANK is verl's global rank and
       verl places replica r on ranks r*size to (r+1)*size-1.  Only $RANK, never torch.distributed's rank:
       inside an engine's own processes that is the rank within one replica, the same in every replica.
    3. Else unknown (verl 0.7 vLLM servers, SGLang servers from verl 0.6): no capture.
    """
    text = os.environ.get(REPLICA_ENV, "").strip()
    if text:
        value = int(text) if text.isdigit() else None
        return (value, f"${REPLICA_ENV}") if value is not None else (
            None, f"${REPLICA_ENV}={text!r} is not a replica index")
    if not size:
        return None, (f"${REPLICA_ENV} is not set in this process: set profiler.replica_size to the rollout's "
                      "tp*dp*pp to read the replica from $RANK (verl 0.4 to 0.6)")
    rank_text = os.environ.get("RANK", "").strip()
    if not rank_text.isdigit():
        return None, (f"neither ${REPLICA_ENV} nor $RANK is set in this process (an inference engine's own "
                      "process, outside verl's workers): its replica cannot be told")
    return int(rank_text) // size, f"$RANK {rank_text} // profiler.replica_size {size}"


def foreign_profiler():
    """A name for a profiler running in this process that is not ours, or None."""
    ap = sys.modules.get("torch.autograd.profiler")
    if ap is not None and getattr(ap, "_is_profiler_enabled", False):
        return "torch.profiler"
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch._C._autograd._profiler_enabled():
                return "torch.autograd.profiler"
        except Exception:
            pass
    return None


def try_start(key):
    """Create and begin ``key``'s capture if it may start now; mark it finished if it never may."""
    recipe = key.partition("/")[0]
    if recipe in refused:
        finished.add(key)
        once((key, "refused"), f"{key}: not starting: {refused[recipe]}")
        return
    given = settings.get(recipe)
    if given is None:
        raise LookupError(f"no configure({recipe!r}, ...) ran in this process (is the patched module imported?)")
    from patchkit.runtime import backends

    seen = checked.get(key)
    if seen is not None and seen[0] is given:
        s, here = seen[1], seen[2]  # a retry: validated already
    else:
        problems = backends.validate(given)
        if problems:
            raise ValueError("; ".join(problems))
        s = backends.normalize(given)
        here = rank()
        if s["ranks"] != "all" and here not in s["ranks"]:
            finished.add(key)  # not this rank: no profiler, no files
            return
        if s["replicas"] != "all":
            mine, how = replica(s["replica_size"])
            if mine is None:
                finished.add(key)
                once((key, "replica"), f"{key}: not starting: profiler.replicas is set, but {how}")
                return
            if mine not in s["replicas"]:
                finished.add(key)  # not a listed replica: no profiler, no files
                return
        checked[key] = (given, s, here)
    if s["trigger"] == "manual":  # only the windows `patchkit capture` asks for (see patchkit.runtime.ondemand)
        from patchkit.runtime import ondemand

        if key not in ondemand.pending:
            ondemand.park(key, here)  # waiting costs a step what a finished key costs
            return
    active = state["active"]
    if active is not None:
        once((key, "busy"), f"{key}: not starting while {active} is capturing (one profiler per process); "
             "will start at a later call once it is over")
        return
    other = foreign_profiler()
    if other is not None:
        once((key, "foreign"), f"{key}: another profiler ({other}) is already running in this process; "
             "not starting, will try again at later calls")
        return
    answer = None
    if s["trigger"] == "manual":
        asked = ondemand.take(key)
        s = dict(s, trigger="schedule", steps=tuple(range(asked[1])))
        answer = ondemand.answerer(key, asked[0])
    cap = Capture(key, s, here)
    cap.answer = answer
    captures[key] = cap
    state["active"] = key
    cap.program = backends.build(s, key)  # imports torch / torch_npu
    why = save_folder_problem(cap.program.trace_dir)  # before its code makes or writes anything there
    if why:
        return refuse_capture(key, cap, why)
    if s["repeat"] == 0:
        say(f"{key}: schedule.repeat=0 records a window every {s['wait'] + s['warmup'] + s['active']} steps "
            "until the process exits: the data grows without bound")
    if not state["atexit"]:
        state["atexit"] = True
        atexit.register(at_exit)
    quick[key] = cap.quick_step
    cap.begin()


def save_folder_problem(trace_dir):
    """Why a capture may not write into its save folder, ``trace_dir`` (naming the folder, its owner and what to
    do); "" if it may.

    The save path, made absolute against the job's working folder, is reached as the state folder is
    (:func:`patchkit.core.folders.open_folder`): every folder on the way and the save folder itself the job's user's
    (its effective uid) or root's, writable by nobody else unless sticky, and no link another user controls on the
    way; the folders missing below a good one are made (0755, the job's user's).  So a relative save path in a shared
    sticky working folder never puts root's traces into a folder another user made.  Any other error (a folder the
    job cannot make) is left to the backend's own code, which says it as before.
    """
    if not trace_dir:  # written by an outside tool (nsys): no folder of ours
        return ""
    from patchkit.core.folders import Untrusted, open_folder

    path = os.path.abspath(str(trace_dir))
    try:
        open_folder(path, None, create=True, mode=0o755).close()  # rule None: a folder on the way's, sticky allowed
    except Untrusted as exc:
        if not_ours(exc.path):  # a file where a folder goes: the backend's code meets it and says so, as before
            return ""
        return (f"profiler.save_path {path} is refused: {exc.path} {exc.why} (owner: {owner_name(exc.path)}): "
                "another user could read, replace or redirect what is written there; use a save path in a folder "
                "you own (or root owns)")
    except OSError:
        return ""
    return ""


def not_ours(path):
    """Whether ``path`` is a plain file (or device, ...): neither a folder nor a link, so no other user's doing."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISDIR(mode) or stat.S_ISLNK(mode))


def owner_name(path):
    """The name of the user owning ``path`` (a link itself, not where it leads), else its uid, else "unknown"."""
    try:
        uid = os.lstat(path).st_uid
    except OSError:
        return "unknown"
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError):
        return f"uid {uid}"


def refuse_capture(key, cap, why):
    """``key`` records nothing in this process, said in one line; never raised (not even in strict mode: it is the
    job's neighbour's doing, not a fault); its report and a window `patchkit capture` asked for say why."""
    cap.error = why
    cap.ended = True
    if cap.answer is not None:
        try:
            cap.answer(error=why)
        except Exception:
            pass
    retire(key, cap)
    say(f"{key}: not recording: {why}; nothing is written there, the job runs on")


def close(recipe_id, why):
    """End ``recipe_id`` in this process, from any thread: no key of it starts from now on, and a running capture
    finishes (its window flushed, its manifest written) at its next step, in the thread that owns it (a profiler
    must not be stopped from another).  Returns the keys still capturing until then."""
    with lock:
        refused[recipe_id] = why
        running = [k for k in captures if recipe_of(k) == recipe_id]
        for key in running:
            closing[key] = why
            quick.pop(key, None)  # its next step takes the full path, which closes it
        return running


def at_exit():
    """Flush every window still open (registered with atexit when the first capture starts)."""
    with lock:
        for key, cap in list(captures.items()):
            try:
                if cap.thread != threading.get_ident():
                    cap.abandon()  # torch may crash when a profiler is stopped from a thread other than its own
                else:
                    cap.finish("process exit")
            except Exception as exc:
                try:
                    fail(key, "flushing at exit failed", exc)
                except Exception:
                    pass
