"""A recipe whose target is a script (``target: {script: ...}``), as the script-target tests write it."""

from __future__ import annotations

from typing import Optional


def script_recipe(script: str = "train.py", save: Optional[object] = None) -> str:
    """The text of ``ts.yaml``: one point at ``Tiny.training_step``'s start, the torch backend, recording CPU
    activity into ``save`` when given."""
    profiler = f"profiler:\n  contents: [cpu]\n  save_path: {save}\n" if save is not None else ""
    return (f"id: ts\ndescription: a step in a script\ntarget:\n  script: {script}\nbackend: torch\n{profiler}"
            "points:\n  - class: Tiny\n    method: training_step\n    at: method_start\n")
