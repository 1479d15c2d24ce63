"""Started by `patchkit run` through PYTHONPATH: install patchkit's import hook, then the user's own sitecustomize.

Every Python process of the command (children included: they inherit the environment) runs this at start-up.
"""

import os
import sys

try:
    from patchkit.importhook import install

    install()
except Exception as _patchkit_error:  # patchkit must never keep a process from starting
    try:
        sys.stderr.write(f"[patchkit] run: the import hook could not be installed ({_patchkit_error!r})\n")
    except Exception:
        pass

# the sitecustomize this one hides (a site's or a virtualenv's), run as it would have been
_here = os.path.dirname(os.path.abspath(__file__))
_saved = sys.path[:]
try:
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.modules.pop("sitecustomize", None)
    import sitecustomize  # noqa: F401
except ImportError:
    pass
finally:
    sys.path[:] = _saved
