"""patchkit: reversible profiler patches for RL training stacks."""

__version__ = "0.1.0"
