"""The command line: the click commands and what each says.  The only modules that print.

:mod:`.commands` holds the commands, :mod:`.options` the options several of them share; each calls the layers below and hands the result to
:mod:`.patch`, :mod:`.recipes`, :mod:`.run`, :mod:`.capture`, :mod:`.cluster`, :mod:`.traces` or
:mod:`.analysis` to be said; :mod:`.authoring` holds ``points`` and ``new`` (recipes of your own), :mod:`.attach`
``attach`` and ``detach`` (a running job profiled without restarting it).
Long work shows a bar on stderr when it is a terminal (:mod:`.progress`).
"""

from patchkit.cli.commands import main

__all__ = ["main"]
