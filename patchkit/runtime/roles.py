"""A capture's role (the ``actor`` of ``"recipe-id/actor"``) and how the backends put it into trace file names.

The processes of several roles (actor, ref, ...) write into one folder, so a
backend names its traces after the host, the process and the role.

Standard library only.
"""

from __future__ import annotations

import re
from typing import Optional


def role_of(key: Optional[str]) -> str:
    """The role part of a capture key ("recipe/role"), made safe for file names ('' if none)."""
    if not key or "/" not in key:
        return ""
    return re.sub(r"[^A-Za-z0-9._-]", "_", key.partition("/")[2])


def worker_name(role: str, pid: bool = True) -> str:
    """Python source (for a backend's code, which imports os and socket) of ``<host>[_<pid>][_<role>]``: the name
    ``tensorboard_trace_handler`` gives a process's traces, with the role after it."""
    name = "socket.gethostname()" + (" + '_' + str(os.getpid())" if pid else "")
    return name + (f" + {('_' + role)!r}" if role else "")
