"""Injection points on libcst's tree: where a point's line goes, asked of its kind (:mod:`patchkit.recipe.kinds`).

- :mod:`.scan`: one function as the kinds see it (:class:`Scan`: statements, loops, calls, yields) and the
  sites a line can go (:class:`Site`, :class:`Decorate`), or :class:`NotFound` with the reason;
  :mod:`.positions`: lines of nodes, resolved only when a reason names one.
- :mod:`.finder`: :func:`find`, a point's anchors selected by its kind's place, its kind's refusals checked and
  its kind's sites made; :mod:`.loops`: which loops a ``loop:`` selects, and a selector for each loop.
- :mod:`.lookup`: the class, method or function a point names; :mod:`.nearest`: the real names nearest a
  misspelt one.
- :mod:`.outline`: a function's places with the points each takes and why the others do not
  (``patchkit points``); :mod:`.exits`: whether the end of a function's or a loop's body is reached.

The kinds themselves (their shape, refusals, examples and ``find``) are the
modules of ``patchkit/recipe/kinds/``, below the engine, so recipe
validation reads them without libcst.
"""

from __future__ import annotations

from patchkit.engine.points.finder import find
from patchkit.engine.points.positions import Positions
from patchkit.engine.points.scan import Decorate, Loop, NotFound, Scan, Site, Stmt
from patchkit.recipe.kinds import KINDS, describe

__all__ = ["KINDS", "Decorate", "Loop", "NotFound", "Positions", "Scan", "Site", "Stmt", "describe", "find"]
