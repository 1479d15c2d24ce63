"""Lines and columns of nodes, for the reasons and hints that name them: libcst's position metadata, resolved
only when one is asked for."""

from __future__ import annotations

from typing import Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider


class Positions:
    """Lines and columns of nodes, from libcst's :class:`PositionProvider`, computed on the first question.

    ``unsafe_skip_copy``: the metadata is keyed by the very nodes the scan
    holds, and the tree is never changed in place.
    """

    def __init__(self, module: cst.Module):
        self._module, self._positions = module, None

    def start(self, node: cst.CSTNode):
        if self._positions is None:
            self._positions = MetadataWrapper(self._module, unsafe_skip_copy=True).resolve(PositionProvider)
        return self._positions[node].start

    def line(self, node: cst.CSTNode) -> int:
        return self.start(node).line

    def end_line(self, node: cst.CSTNode) -> int:
        self.start(node)
        return self._positions[node].end.line

    def at_lines(self, nodes: Sequence[cst.CSTNode]) -> str:
        lines = sorted(self.line(n) for n in nodes)
        if len(lines) == 1:
            return f"at line {lines[0]}"
        return "at lines " + ", ".join(map(str, lines[:-1])) + f" and {lines[-1]}"
