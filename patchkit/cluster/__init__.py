"""Ray: the same command on every alive node.

- :mod:`.ray`: runs an operation on every node and gathers the results; :mod:`.node`: what runs on each node.
- :mod:`.gather`: ``traces`` and ``collect`` across nodes; :mod:`.capture`: ``capture --ray``.
- :mod:`.attach`: ``attach --ray --match``: each node's session, Ctrl-C making every node detach.
- :mod:`.autowatch`: ``attach --ray --match --auto``: each node watches, the first clear step's recipe comes back,
  taken only as ``--auto`` writes one.
"""
