"""patchkit: reversible profiler patches for RL training stacks."""

__version__ = "0.2.0"

# The name on the package registry.  Import name and command are ``patchkit``,
# but the registry's "patchkit" is an unrelated project: install this one by
# this name (or from a wheel built from the checkout).
DISTRIBUTION = "patchkit-profiler"
