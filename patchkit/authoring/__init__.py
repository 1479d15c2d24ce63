"""Recipes of your own: ``patchkit points`` reads a function as a recipe would name its places, and ``patchkit new``
writes a recipe that tests and applies as written.  Above the state layer (it finds packages as ``apply`` does),
the engine (it runs the codemod on the real function) and the recipes (it reads its own file back).

- :mod:`.funcref`: a function named on the command line (``module:Class.method``, ``path/to/file.py::NAME``),
  found on disk without importing it, with the package, distribution and version a recipe for it names.
- :mod:`.spec`: a point written on one line, as ``points`` prints it and ``new --point`` reads it.
- :mod:`.newrecipe`: ``patchkit new``: the points asked, checked, and written as a recipe file, or nothing at all;
  :mod:`.scaffold`: that file's text; :mod:`.excerpt`: the real function cut out of its file, as its example;
  :mod:`.backendpick`: the backend whose profiler the target's environment has, when none is given.
"""
