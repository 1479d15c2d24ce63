"""What ``patchkit attach`` runs inside a job: standard library, ``patchkit.runtime`` and ``patchkit.core`` only.

- :mod:`.boot`: the lines gdb or ``sys.remote_exec`` hands the job (a real module: the attaching command sends
  its text, with the request's path and sha256): read the hash-checked request, import the agent, never raise.
- :mod:`.agent`: checks, swaps in, watches, swaps back.
- :mod:`.loaded`: whether the module the job imported is still the file on disk, as the job loaded it.
- :mod:`.swap`: the live functions behind their decorators, their code objects swapped and swapped back.
- :mod:`.live`: the recipe's statements for a call already running on the main thread, from a line trace on its
  frame alone.
- :mod:`.decorate`: a recipe's decorators put where the job holds each decorated function, and taken off.
- :mod:`.fork`: a child forked while attached gets the job's own code back and records nothing.
- :mod:`.watch`: ``attach --auto``'s watcher: every thread's stack looked at from a thread of its own, and every
  optimizer step, until the step's shape repeats; nothing of the job's changed.
- :mod:`.protocol`: the states and refusal reasons the agent and the attaching command share, typed.

The attaching side is :mod:`patchkit.attach`; tests/test_layers.py holds everything under
:mod:`patchkit.runtime` to an allow-list of imports.
"""
