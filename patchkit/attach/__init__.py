"""Attach: a job started without patchkit records its next steps with a recipe's code, then runs as it was.

The attaching side, in the command's process:

- :mod:`.process`: a process as ``/proc`` shows it; ``--match``; :class:`~.process.AttachError`.
- :mod:`.probe`: the job's Python (version, flavour) and what its user can read, never running the job's files.
- :mod:`.elfinfo`: a process's Python read as data from ``/proc/PID/maps`` and the ELF of its libpython or interpreter.
- :mod:`.sandbox`: patchkit's own interpreter run as another user, apart (new session, no terminal, bounded).
- :mod:`.access`: every check made before anything is injected (owner or root, Yama, CAP_SYS_PTRACE, gdb,
  remote debugging turned off, the runtime).
- :mod:`.jobpath`: where a job's code is: its ``sys.path`` rebuilt from ``/proc`` as data (script, PYTHONPATH, venv).
- :mod:`.jobfiles`: the recipe planned on a private copy of the job's own files, read as a stranger's.
- :mod:`.plans`: one plan for each environment the processes run in (``--root`` wins), this user's first.
- :mod:`.livepoints`: where a call already running when attach gets in (a ``train()`` that never returns) takes the
  recipe's statements from a line trace, since it keeps its own code.
- :mod:`.payload`: the recipe planned with the engine into the agent's request, in a private folder.
- :mod:`.inject`: getting in: gdb and the interpreter's pending calls (3.10-3.13), ``sys.remote_exec`` (3.14+).
- :mod:`.gdbrun`: gdb (or the sender) run apart from this command's terminal and signals, let go of the job cleanly.
- :mod:`.channel`: what the job's agent writes, read as a stranger's: typed, bounded, never followed or waited on.
- :mod:`.sweep`: a request folder taken back from the job's user and removed, in bounded walks.
- :mod:`.session`: ``attach`` as an API: check every process, plan, get in, wait, get out.
- :mod:`.records`: what this state folder attached, for ``detach`` and ``attach --status`` from another terminal.
- :mod:`.passover`: ``--match`` among strangers: a process that a check of its own refuses (not Python, stopped...)
  is passed over with why, not the whole command.
- :mod:`.auto`: ``attach --auto``: the job's stacks watched (no recipe, nothing changed), its step found, chosen.
- :mod:`.watchread`: what a job's watcher saw, read as a stranger's file: typed, bounded, every index checked.
- :mod:`.autorecipe`: the step written as a recipe, from the job's own files read as a stranger's.
- :mod:`.flow`: one attach from the first injection to the last window closed, as ``patchkit attach`` runs it and
  each node of ``attach --ray`` runs it (a launcher ``--match`` finds passed over).
- :mod:`.stepfind`: ``attach --auto``'s step found with no recipe, from what the job's watcher saw of its stacks:
  the functions and loops that repeat, ranked by the optimizer steps (or model forwards) each repetition holds.
- :mod:`.stepcalls`: where no loop or function holds exactly one step, the job's own call of the optimizer (or of
  the model) is the step's place.
- :mod:`.steploops`: a function's own loops read with ast, and which loops each of the watcher's moves entered,
  turned or left (an optimizer step's marker put in where it was between two looks).
- :mod:`.stepwatch`: the watch's rows as the step finder reads them, each checked; its markers, and where each
  marker was in each call of its chain.

What runs inside the job is :mod:`patchkit.runtime.attach` (the agent, the swap, the decorators, the fork
guard and the lines gdb or ``sys.remote_exec`` hand the job), with the rest of the runtime: one place, held to
the standard library and ``patchkit.runtime``/``patchkit.core`` by tests/test_layers.py.
"""
