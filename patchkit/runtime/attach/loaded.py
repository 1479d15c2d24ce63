"""Whether the module a job imported is still the file on disk, byte for byte as the job loaded it.

:func:`pyc_problem`: the compiled copy (``.pyc``) the import wrote records the file's size and time (or its
hash), which must still be the file's.  :func:`changed_function`: every function of the module (and of its
classes) equals the file compiled afresh.  The agent (:mod:`patchkit.runtime.attach.agent`) refuses a job whose
file changed since its import: the instrumented text would not be the job's code.  Standard library only.
"""

from __future__ import annotations

import os
from types import CodeType

from patchkit.runtime.attach.swap import functions_in


def pyc_problem(module, path, source):
    """Why the compiled copy of the module says its file changed since it was compiled; "" if it does not."""
    import importlib.util

    cached = getattr(getattr(module, "__spec__", None), "cached", None)
    try:
        with open(cached, "rb") as handle:
            head = handle.read(16)
        st = os.stat(path)
    except (OSError, TypeError):
        return ""  # no compiled copy (read-only folder, -B): the code objects decide alone
    if len(head) < 16 or head[:4] != importlib.util.MAGIC_NUMBER:
        return ""
    flags = int.from_bytes(head[4:8], "little")
    if flags & 1:  # a hash-based .pyc
        return "" if head[8:16] == importlib.util.source_hash(source) else "its source hash"
    mtime, size = int.from_bytes(head[8:12], "little"), int.from_bytes(head[12:16], "little")
    if (mtime, size) != (int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF):
        return f"its size and time ({size} bytes, {mtime}) against the file's ({st.st_size} bytes, {int(st.st_mtime)})"
    return ""


def changed_function(module, original, path):
    """The first function of the module (or of a class it defines) that no longer matches the file ("" if none)."""
    fresh = {}
    for code in [original] + [c for c in original.co_consts if isinstance(c, CodeType)]:
        for c in code.co_consts:
            if isinstance(c, CodeType):
                fresh.setdefault(getattr(c, "co_qualname", c.co_name), []).append(c)  # 3.10: the name
    for value in list(vars(module).values()):
        holders = [value]
        if isinstance(value, type) and getattr(value, "__module__", None) == module.__name__:
            holders = list(vars(value).values())
        for item in holders:
            for fn in functions_in(item):
                code = fn.__code__
                if os.path.realpath(code.co_filename) != path:
                    continue
                name = getattr(code, "co_qualname", code.co_name)
                if name in fresh and not any(code == c for c in fresh[name]):
                    return f"{name} differs"
    return ""
