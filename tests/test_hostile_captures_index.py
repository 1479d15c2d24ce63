"""A second user's job that root attached names trace paths with a line break in them: none reaches root's
captures index ($PATCHKIT_HOME/captures), and root's ``patchkit traces`` never lists ``/etc``.

The real second user (the ``stranger`` fixture: useradd, so root only) makes, inside the save folder root named,
``<save>/<U+2028>/etc/x.pt.trace.json`` (a regular file of hers, as the checks on a trace want) and the like for each
character ``str.splitlines`` ends a line at, and her job's status names them.  Before: the index held
``<save>/<U+2028>/etc``, read back as ``<save>/`` and ``/etc``, and ``patchkit traces`` walked ``/etc``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace as NS

import attach_helpers as helpers
from patchkit.attach import flow
from patchkit.core import manifest

SEPARATORS = ["\u2028", "\u2029", "\x85", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\n"]


def trace(stranger, path):
    stranger.run("sh", "-c", 'printf %s \'{"traceEvents": []}\' > "$1"', "sh", path)


def traces(home):
    env = dict(os.environ, PYTHONPATH=str(helpers.REPO), PATCHKIT_HOME=str(home))
    env.pop("PATCHKIT_RUN", None)
    return subprocess.run([sys.executable, "-m", "patchkit", "traces"], capture_output=True, text=True, env=env,
                          timeout=120, stdin=subprocess.DEVNULL, cwd="/")


def test_a_line_break_in_a_trace_path_never_brings_etc_into_root_s_index(stranger, patchkit_home, monkeypatch):
    save = stranger.sticky / "traces"
    stranger.run("mkdir", str(save))
    trace(stranger, str(save / "rank0.pt.trace.json"))
    named = [str(save / "rank0.pt.trace.json")]
    for sep in SEPARATORS:
        stranger.run("mkdir", "-p", f"{save}/{sep}/etc")
        trace(stranger, f"{save}/{sep}/etc/x.pt.trace.json")
        named.append(f"{save}/{sep}/etc/x.pt.trace.json")
    status = {"state": "restored", "original_code": True, "captures": [{"recorded": [[0, 1]], "traces": named}]}
    assert flow.trace_folders(status, str(save), stranger.uid) == [str(save)]  # before: her ten folders too
    monkeypatch.setattr(manifest, "_noted", set())
    flow.note_folders(NS(attached=[NS(status=status, save_folder=str(save), target=NS(proc=NS(uid=stranger.uid)))]))
    assert manifest.indexed_folders() == [str(save)]  # before: <save>/, /etc and the like besides
    index = (patchkit_home / manifest.INDEX).read_bytes()
    assert index == f"{save}\n".encode()
    shown = traces(patchkit_home)
    assert shown.returncode == 0, shown.stderr
    said = (shown.stdout + shown.stderr).split()
    assert str(save) in shown.stdout + shown.stderr  # her own capture is listed (a check the command ran)
    assert not [word for word in said if word.rstrip(":,;").startswith("/etc")]  # before: /etc was listed


def test_her_links_in_a_relative_save_path_never_name_a_folder_for_root_s_index(stranger, patchkit_home, monkeypatch):
    """The recipe's relative save path (``./outputs/patchkit/ID``, the default) resolved in her job's working
    folder, where her links lead ``outputs`` to a folder of hers and the capture's folder on to ``/tmp`` (or to
    her job's ``/proc/PID``, whose files are regular files of hers): no folder for the index, and a trace of hers
    in ``/tmp`` brings nothing into it."""
    cwd, other = stranger.sticky / "c", stranger.sticky / "o"
    stranger.run("mkdir", "-p", str(cwd), str(other / "patchkit"))
    stranger.run("ln", "-s", "../o", str(cwd / "outputs"))
    stranger.run("ln", "-s", "/tmp", str(other / "patchkit" / "pk"))
    job = subprocess.Popen(["sleep", "60"], user=stranger.uid, group=stranger.gid, extra_groups=[], cwd=cwd)
    try:
        assert flow.indexable("/tmp", stranger.uid) is False
        from patchkit.attach import channel

        for _ in range(600):  # until the child is in her folder (before its exec it is a copy of this Python)
            if os.readlink(f"/proc/{job.pid}/cwd") == str(cwd):
                break
            time.sleep(0.05)
        assert channel.save_folder("./outputs/patchkit/pk", job.pid) == ""  # before: /tmp
        trace(stranger, str(stranger.sticky / "x.pt.trace.json"))
        status = {"state": "restored", "original_code": True,
                  "captures": [{"recorded": [[0, 1]], "traces": [str(stranger.sticky / "x.pt.trace.json")]}]}
        assert flow.trace_folders(status, "/tmp", stranger.uid) == []  # a shared folder is never walked on her word
        monkeypatch.setattr(manifest, "_noted", set())
        flow.note_folders(NS(attached=[NS(status=status, save_folder=channel.save_folder("./outputs/patchkit/pk",
                                                                                          job.pid),
                                          target=NS(proc=NS(uid=stranger.uid)))]))
        assert manifest.indexed_folders() == []
    finally:
        job.kill()
        job.wait()

