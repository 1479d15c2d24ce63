"""Profiling with no file edited (``patchkit run``): an import hook that compiles the patched text instead.

- :mod:`.editfree`: the parent's side: plan every file, fill the cache, the child's environment;
  :mod:`.isolation`: a command whose Python would never see the hook (``python -I``, ``env -i``, ``sudo``), said
  before it starts.
- :mod:`.importhook`, :mod:`.runcache`: the job's side: the cached text, checked against its hash,
  compiled under the file's own name; :mod:`.rebuild`: a missing entry made in a process of its own.
- ``_run/sitecustomize.py``: what ``PYTHONPATH`` brings into every Python the job starts.
"""
