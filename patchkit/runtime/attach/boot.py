"""The lines gdb or ``sys.remote_exec`` hands a job, run by its main thread between two bytecodes.

``patchkit attach`` sends this file's text (:func:`patchkit.attach.inject.bootstrap`) followed by one call,
``_attach(request, sha256, runtime_from, limit, out)``, inside ``try``/``except BaseException``, executed in a
namespace of its own (no name is left in ``__main__``).  :func:`_attach` reads the request file only if it is a
private regular file of this user's or root's, runs it only if its sha256 is the one written into the call, and
imports the agent (:mod:`patchkit.runtime.attach.agent`) from the job's patchkit or from patchkit's own install
folder; :func:`_failed` says any failure in the channel and on one stderr line, and gives the job back its own
Ctrl-C.  Standard library only; ASCII (the text travels through gdb).
"""
import sys


def _status(out, record):
    import json, os, tempfile
    try:
        fd, tmp = tempfile.mkstemp(prefix=".status-", dir=out)
        with os.fdopen(fd, "w") as handle:
            json.dump(record, handle)
        os.replace(tmp, os.path.join(out, "status.json"))
    except Exception:
        pass


def _attach(path, digest, runtime_from, limit, out):
    import hashlib, json, os, stat
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        _status(out, {"state": "refused", "reason": "withdrawn", "pid": os.getpid(),
                      "error": "the request was withdrawn before this process ran it"})
        sys.stderr.write("[patchkit] attach: the request was withdrawn before this process ran it; nothing done\n")
        return
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid not in (0, os.geteuid()) or st.st_mode & 0o022:
            raise PermissionError(path + " is not a private file of this user or root: not read")
        data = handle.read(limit + 1)
    if len(data) > limit or hashlib.sha256(data).hexdigest() != digest:
        raise PermissionError(path + " is not the request patchkit attach wrote (its sha256 differs): not run")
    agent = sys.modules.get("patchkit.runtime.attach.agent")
    if agent is None:
        added = bool(runtime_from) and "patchkit" not in sys.modules
        if added:
            sys.path.insert(0, runtime_from)
        try:
            import patchkit.runtime.attach.agent as agent
        except ImportError as exc:
            where = getattr(sys.modules.get("patchkit"), "__file__", None)
            raise ImportError(f"{exc} (this job imports patchkit from {where}: install the same patchkit there)")
        finally:
            if added and runtime_from in sys.path:
                sys.path.remove(runtime_from)
    agent.attach(json.loads(data.decode("utf-8")))


def _failed(out, exc):
    _status(out, {"state": "failed", "error": type(exc).__name__ + ": " + str(exc),
                  "pid": __import__("os").getpid()})
    try:
        sys.stderr.write("[patchkit] attach: " + type(exc).__name__ + ": " + str(exc) +
                         "; nothing changed, the job runs on\n")
    except BaseException:
        pass
    if isinstance(exc, KeyboardInterrupt):  # the job's own Ctrl-C: given back once these lines have returned
        __import__("threading").Timer(0.05, __import__("_thread").interrupt_main).start()
