"""Started by `patchkit run` through PYTHONPATH: install patchkit's import hook, then the user's own sitecustomize.

Every Python process of the command (children included: they inherit the environment) runs this at start-up.

The import system expects ``sys.modules["sitecustomize"]`` to be there when this module's code ends (it pops
and re-inserts it).  To import the user's module under the same name, this one steps aside for the time of
that import; if there is none (the usual case) it puts itself back, so Python has nothing to complain of, and
if there is one, the user's module is ``sitecustomize`` from then on, as it would be without patchkit.
"""

import os
import sys

try:
    from patchkit.hook.importhook import install

    install()
except Exception as _patchkit_error:  # patchkit must never keep a process from starting
    try:
        sys.stderr.write(f"[patchkit] run: the import hook could not be installed ({_patchkit_error!r})\n")
    except Exception:
        pass


def _patchkit_hand_over():
    """Import the sitecustomize this one hides (a site's or a virtualenv's), as Python would have."""
    me = sys.modules.get(__name__)
    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    saved = sys.path[:]
    try:
        sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != here]
        if me is not None and sys.modules.get("sitecustomize") is me:
            del sys.modules["sitecustomize"]  # else `import` would answer with this very module
        import sitecustomize  # noqa: F401
    except ImportError as exc:
        if exc.name != "sitecustomize":  # the user's own failed inside: Python reports it, as without patchkit
            raise
    finally:
        sys.path[:] = saved
        if me is not None and "sitecustomize" not in sys.modules:
            sys.modules["sitecustomize"] = me  # no user's one (or it failed): the import system finds this one


if __name__ == "sitecustomize":
    _patchkit_hand_over()
