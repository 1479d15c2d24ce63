"""The import hook of `patchkit run`: a recipe applied in memory, as the target modules are imported.

`patchkit run` plans the recipe as `diff` does, writes each patched module's
text to a cache under ``$PATCHKIT_HOME/run-cache`` (named by the source's
sha256 and the recipe's), and starts the command with ``PATCHKIT_RUN`` (a
JSON description: module name -> the source's sha256 and the cache key) and
``PYTHONPATH`` leading to ``patchkit/hook/_run``, whose ``sitecustomize`` calls
:func:`install` in every Python process the command starts, children and
grandchildren included, since they inherit the environment.

For a listed module, the hook lets the usual finders find it, then loads it
itself: it reads the file, and only if its sha256 is the planned one does it
compile the cached patched text (under the file's own name, so ``__file__``
and tracebacks name the real file) instead, and only if that text's sha256 is
the one the planning process recorded in ``PATCHKIT_RUN`` (``patched_sha256``):
the cache folder is read, not trusted, so a replaced entry is never executed.
A changed file, a cached or rebuilt text that is not the planned one, a
missing cache that cannot be rebuilt, any failure: one line on stderr and the
module is imported as it is.  No file under the package is written, and no ``.pyc``.
A process whose cache lacks a module (another Ray node) rebuilds it once with
patchkit's engine and stores it, so later processes there pay no parse.

Standard library only: this runs at the start of every process of the job.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import json
import os
import sys

ENV = "PATCHKIT_RUN"
_said = set()


def _say(topic, message):
    if topic not in _said:
        _said.add(topic)
        try:
            sys.stderr.write(f"[patchkit] run: {message}\n")
        except Exception:
            pass


class Finder(importlib.abc.MetaPathFinder):
    """Finds a listed module with the other finders, then loads it patched."""

    def __init__(self, spec):
        self.spec = spec
        self.modules = spec.get("modules", {})

    def find_spec(self, fullname, path, target=None):
        entry = self.modules.get(fullname)
        if entry is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            found = finder.find_spec(fullname, path, target)
            if found is not None:
                break
        else:
            return None
        if isinstance(found.loader, importlib.machinery.SourceFileLoader) and found.origin:
            found.loader = PatchedLoader(found.loader, fullname, entry, self.spec)
        return found


class PatchedLoader(importlib.abc.Loader):
    def __init__(self, inner, name, entry, spec):
        self.inner, self.name, self.entry, self.spec = inner, name, entry, spec

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def get_source(self, name):
        return self.inner.get_source(name)

    def exec_module(self, module):
        origin = module.__spec__.origin
        text = None
        try:
            with open(origin, "rb") as handle:
                source = handle.read()
            sha = hashlib.sha256(source).hexdigest()
            if sha != self.entry["sha256"]:
                _say(("changed", origin), f"{origin} is not the file `patchkit run` planned for (it changed since); "
                                          "it runs without profiling")
            else:
                text = self._patched(sha, source, origin)
        except Exception as exc:
            _say(("failed", origin), f"{origin}: {type(exc).__name__}: {exc}; it runs without profiling")
        if text is None:
            return self.inner.exec_module(module)
        exec(compile(text, origin, "exec", dont_inherit=True), module.__dict__)

    def _patched(self, sha, source, origin):
        """The planned patched text (str), or None (said in one line) when what is found is not it."""
        from patchkit.hook import runcache

        expected = self.entry.get("patched_sha256")
        if not isinstance(expected, str):
            _say(("unrecorded", origin), f"{origin}: $PATCHKIT_RUN records no sha256 of its patched text "
                                         "(planned by another patchkit?); it runs without profiling")
            return None
        path = os.path.join(runcache.cache_dir(), runcache.cache_name(sha, self.spec["key"]))
        try:
            data, how = runcache.read(path), "cached"
        except FileNotFoundError:  # this node has no cache yet: the engine, once
            text, notes = runcache.rebuild(self.spec, self.name, source, path, expected)
            data, how = text.encode("utf-8"), "rebuilt"
            for note in notes:
                _say(("rebuilt", origin), f"{origin}: {note}")
        if hashlib.sha256(data).hexdigest() != expected:
            _say(("mismatch", origin), f"{origin}: the {how} patched text ({path}) is not the one `patchkit run` "
                                       "planned (its sha256 differs); it is not executed, the module runs "
                                       "without profiling")
            return None
        return data.decode("utf-8")


def install(environ=None):
    """Put the hook first on ``sys.meta_path`` when ``PATCHKIT_RUN`` asks for it; True when installed."""
    text = (os.environ if environ is None else environ).get(ENV)
    if not text:
        return False
    if any(isinstance(f, Finder) for f in sys.meta_path):
        return True
    try:
        spec = json.loads(text)
        sys.meta_path.insert(0, Finder(spec))
    except Exception as exc:
        _say("env", f"${ENV} cannot be read ({type(exc).__name__}: {exc}); nothing is patched")
        return False
    return True
