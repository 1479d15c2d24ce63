"""The codemod: text and settings in, new text (or a located reason) out.  Pure: it reads and writes no file.

- :mod:`.codemod`: the transform: a recipe's points applied to one file on libcst's tree.
- :mod:`.points`: the finders, one module per kind of position; :mod:`.points.lookup`: classes, methods, functions.
- :mod:`.lines`: the inserted lines as text (no libcst: `show` prints them); :mod:`.codegen`: the same lines as libcst nodes.
- :mod:`.marks`: patchkit's own lines (``# patchkit:RECIPE``), found and taken out.
- :mod:`.diff`: unified diffs for review; :mod:`.examples`: a recipe's own before/after examples, run.
"""
