"""Where a point's line goes: its kind (:data:`patchkit.recipe.kinds.KINDS`) asked, no kind named here.

:func:`find` selects the point's anchors by its kind's place (the function;
the statements whose value is ``call:``; the loops ``loop:`` selects, with
:mod:`.loops`), enforces ``count:``, and asks :func:`sites` at each anchor.
:func:`sites` checks the kind's refusals, asks the kind's ``find`` for the
sites, and refuses a site in a block written on one line: the same
:func:`sites` tells ``patchkit points`` (:mod:`.outline`) which points an
anchor takes and why the others do not.
"""

from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from patchkit.core.model import Point
from patchkit.engine.points.loops import choose
from patchkit.engine.points.scan import NotFound, Scan, Site, expect, word
from patchkit.recipe.kinds import KINDS
from patchkit.recipe.pointkind import CALL, FUNCTION, LOOP, PointKind


def find(scan: Scan, point: Point) -> List[Any]:
    """The sites (:class:`~.scan.Site`, :class:`~.scan.Decorate`) of ``point`` in the scanned function, or
    :class:`NotFound` with the reason."""
    kind = KINDS[point.at]
    return [site for anchor in anchors(scan, point, kind.anchor) for site in sites(scan, kind, anchor)]


def anchors(scan: Scan, point: Point, anchor: str) -> List[Any]:
    """What the point selects: the function, its statements calling ``point.call``, or its loops ``point.loop``."""
    if anchor == FUNCTION:
        return [scan.func]
    if anchor == CALL:
        return expect(point, [s for s in scan.statements if s.call == point.call], "statement",
                      f"calling {point.call}", scan)
    if anchor == LOOP:
        return choose(scan, point)
    raise ValueError(f"no anchor {anchor!r}")  # pointkind.PLACES names every anchor


def refusal(scan: Scan, kind: PointKind, anchor: Any) -> Optional[NotFound]:
    """The first of the kind's refusals that holds at ``anchor``, as the error the finder raises; None: it goes."""
    for refused in kind.refusals:
        nodes = list(refused.test(scan, anchor))
        if nodes:
            node = getattr(anchor, "node", anchor)
            reason = refused.reason.format(qualname=scan.qualname, scope=scan.kind, line=scan.line(node),
                                           at=scan.at_lines(nodes), word=_words(nodes))
            return NotFound(reason, scan.line(nodes[0]))
    return None


def _words(nodes: List[Any]) -> str:
    """The nodes' keywords as a message says them: ``return``, ``return or raise``."""
    said = list(dict.fromkeys(word(n) for n in nodes))
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + f" or {said[-1]}"


def sites(scan: Scan, kind: PointKind, anchor: Any) -> List[Any]:
    """Where a line of ``kind`` goes at one anchor: the kind's sites, each in a block of whole lines."""
    refused = refusal(scan, kind, anchor)
    if refused is not None:
        raise refused
    found = kind.find(scan, anchor)
    for site in found:
        if isinstance(site, Site) and not isinstance(site.block, cst.IndentedBlock):  # ``if x: f()``: one line
            where = f"the {scan.kind}" if site.owner is scan.func else f"the block at line {scan.line(site.owner)}"
            raise NotFound(f"{where} in {scan.qualname} is written on one line; patchkit only adds whole lines",
                           scan.line(site.block.body[0]))
    return found
