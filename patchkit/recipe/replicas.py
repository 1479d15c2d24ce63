"""Recipe checks for ``profiler.replicas``: Agent Loop replicas of rollout workers, whole replicas only.

The runtime's rule (which replica a process is in) is :func:`patchkit.runtime.control.replica`; here only
what a recipe may say.  Standard library only.
"""

from __future__ import annotations

from typing import Any

ROLLOUT_PACKAGES = ("vllm", "vllm_ascend", "sglang")  # where an Agent Loop replica runs
SHORT_KEYS = {"replicas": ("profiler", "replicas")}  # `replicas=[0]`, as the users write it


def check(reader: Any, target: Any, profiler: Any) -> None:
    """Raise ``reader.fail(...)`` at ``profiler.replicas`` when it is set off a rollout worker or with ranks."""
    if profiler.replicas == "all":
        return
    here = ("profiler", "replicas")
    if target.package not in ROLLOUT_PACKAGES:
        raise reader.fail(here, f"profiler.replicas is for rollout workers ({', '.join(ROLLOUT_PACKAGES)}), "
                          f"not {target.package}", "use profiler.ranks for training processes")
    if profiler.ranks != "all":
        raise reader.fail(here, "profiler.replicas and profiler.ranks are both set",
                          "pick one: replicas=[0] profiles every process of replica 0; set profiler.ranks: all")
