"""Where the code is, and changing it: targets, versions, git, the ledger, apply and revert.

- :mod:`.targets`, :mod:`.treeversion`, :mod:`.gitrepo`, :mod:`.environment`: which files, which version,
  which checkout, and whether the job's Python has patchkit; :mod:`.versioncheck`: whether a recipe may patch
  that version (the range it is proven on, what it excludes, strict or not) and the note for one past its range.
- :mod:`.planning`: ``plan``: a recipe's change, computed, nothing written; :mod:`.scopes`: a file with only the
  functions a recipe's points are in, which attach plans.
- :mod:`.transaction`: ``apply`` and ``revert``, all files or none; :mod:`.targetfile`: one target replaced
  only over the bytes planned from; :mod:`.review`: the git checks and ``apply --commit``.
- :mod:`.ledger` (:mod:`.ledger_format`): the records and backups; :mod:`.compiled`: the compiled copies apply
  deletes and revert puts back; :mod:`.status` and :mod:`.unrecorded`:
  what is applied where.
"""
