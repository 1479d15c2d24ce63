"""The command line: the click commands, each calling the public API (:mod:`patchkit`) and saying what it did.
The only modules that print.

:mod:`.commands` holds the group and names every command, loading its module only when the command is asked
for; each command is declared in the module that says its output: :mod:`.patch` (diff, apply, revert, status),
:mod:`.recipes` (list, show, validate, test), :mod:`.run`, :mod:`.capture`, :mod:`.attach` (attach: a
running job profiled without a restart; :mod:`.auto` its ``--auto``, :mod:`.detach` detach and ``--status``, :mod:`.attachlines` the
line each process's state says), :mod:`.demo`, :mod:`.traces` (traces, collect), :mod:`.analysis`
(analyse, summary, compare) and :mod:`.authoring` (points, new: recipes of your own).  :mod:`.options` declares
the options several share, ``--ray`` among them: with it a command runs on every node of a Ray cluster, said by
:mod:`.cluster`.  Long work shows a bar on stderr when it is a terminal (:mod:`.progress`).
"""

from patchkit.cli.commands import main

__all__ = ["main"]
