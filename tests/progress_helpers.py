"""What the tests of progress share: a Progress that records what it is told, and a stderr that is a terminal."""

from __future__ import annotations

from typing import Any, Dict, List


class Recorder:
    """A :class:`patchkit.core.progress.Progress` that keeps its stages: label, unit, total, done, items."""

    def __init__(self) -> None:
        self.stages: List[Dict[str, Any]] = []

    def start(self, total: int, label: str, unit: str = "") -> None:
        self.stages.append({"label": label, "unit": unit, "total": total, "done": 0, "items": []})

    def advance(self, n: int = 1, item: str = "") -> None:
        stage = self.stages[-1]
        stage["done"] += n
        if item and item not in stage["items"]:
            stage["items"].append(item)

    def summary(self):
        """``[(label, unit, total, done), ...]``"""
        return [(s["label"], s["unit"], s["total"], s["done"]) for s in self.stages]


class Terminal:
    """A stream that says it is a terminal, writing into the stream it wraps (click's, under CliRunner)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def isatty(self) -> bool:
        return True

    def __getattr__(self, name):
        return getattr(self._stream, name)


def drive(progress, total: int, label: str, unit: str = "nodes") -> None:
    """What a layer below does with the progress a command hands it (a stand-in for a cluster's nodes)."""
    if progress is not None:
        progress.start(total, label, unit)
        for _ in range(total):
            progress.advance(1)
