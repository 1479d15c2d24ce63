"""Recipes: YAML to a validated recipe, errors at ``recipe.yaml:line:col``.  No libcst is imported here.

- :mod:`.load`: ``load``, ``load_recipe``, ``all_recipes``: a recipe with its overrides, as ``Settings``.
- :mod:`.reader`, :mod:`.yamlpos`: typed YAML access with positions; :mod:`.files`: a recipe file within bounds.
- :mod:`.parts` (options, roles, examples), :mod:`.points` (points), :mod:`.guards` (guard expressions).
- :mod:`.kinds`: the kinds of point, one module each in ``kinds/``, found by walking the folder;
  :mod:`.pointkind`: what a kind declares (its shape, refusals, examples and ``find``).
- :mod:`.respell`: other tools' spellings in ``profiler:`` respelt as patchkit's names, positions kept.
- :mod:`.overrides`: ``KEY=VALUE`` from the command line; :mod:`.versions`: version ranges (``packaging``).
- :mod:`.catalogue`: the built-in recipes' targets, read quickly; :mod:`.schema`: ``recipe.schema.json``.
- :mod:`.replicas`: which rollout replicas a recipe records; :mod:`.script`: a target that is a script (``__main__``).

The built-in recipe files themselves are the package ``patchkit.recipes``.
"""
