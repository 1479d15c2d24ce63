"""patchkit.runtime.roles: a capture key's role, safe in file names, and the name a backend gives its traces."""

from __future__ import annotations

import os
import socket

import pytest

from patchkit.runtime.roles import role_of, worker_name


@pytest.mark.parametrize("key, role", [(None, ""), ("", ""), ("recipe", ""), ("recipe/actor", "actor"),
                                       ("r/ref model", "ref_model"), ("r/../x", ".._x"), ("r/a/b", "a_b")])
def test_the_role_is_the_part_after_the_slash_made_safe(key, role):
    assert role_of(key) == role


def test_the_worker_name_is_host_pid_and_role():
    ns = {"os": os, "socket": socket}
    host, pid = socket.gethostname(), os.getpid()
    assert eval(worker_name(""), ns) == f"{host}_{pid}"
    assert eval(worker_name("actor"), ns) == f"{host}_{pid}_actor"
    assert eval(worker_name("it's"), ns) == f"{host}_{pid}_it's"  # quoted: a role never escapes the string
    assert eval(worker_name("ref", pid=False), ns) == f"{host}_ref"
