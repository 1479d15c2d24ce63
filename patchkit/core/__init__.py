"""The data and the safe file access every layer uses; imports nothing else of patchkit.

- :mod:`.errors`: the error hierarchy, each error located (file, line, column) and rendered with a hint.
- :mod:`.vocabulary`: every profiler and schedule setting with its type, values and default; positions, actions.
- :mod:`.spellings`: the users' own names (torch_npu's values, verl's and MindSpeed-RL's keys) for patchkit's.
- :mod:`.model`: ``Recipe``, ``Point``, ``Settings``: what a recipe says, validated.
- :mod:`.outcome`: ``Outcome``, ``Status`` and the words patchkit prints for them.
- :mod:`.private`: the state folder ($PATCHKIT_HOME), created and checked private (owner, mode, no links).
- :mod:`.confined`: reading what others wrote: no link followed, no FIFO waited on, no path out, bytes bounded as read.
- :mod:`.reach`: a folder reached, and a file written in it, through no link another user owns.
- :mod:`.folders`: ``reach``'s walk with the state folder's rules: nothing another user controls on the way.
- :mod:`.printable`: text from others' files, escaped for the terminal.
- :mod:`.manifest`: the record the runtime writes beside each capture, read by everything after it.
- :mod:`.wholejson`: a JSON file (a trace) whole or cut short, by its structure, and where it stops.
- :mod:`.progress`: how long work says how far it got (bytes copied, nodes answered), for the command line to show.
"""
