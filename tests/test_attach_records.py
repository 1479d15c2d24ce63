"""attach.records: the record another command finds (``attach --status``, ``detach``), and a record of an ended
process forgotten."""

from __future__ import annotations

import json
import os

import pytest

import attach_helpers as helpers
from attach_helpers import Job
from patchkit.attach import records, session
from patchkit.attach.process import AttachError


@pytest.mark.skipif(bool(helpers.gdb_missing() or helpers.ptrace_denied()),
                    reason=helpers.gdb_missing() or helpers.ptrace_denied() or "")
def test_status_and_detach_find_the_agent_through_the_record(tmp_path):
    site = helpers.site(tmp_path)
    job = Job(tmp_path, site, steps=100000)
    try:
        job.wait_steps(5)
        s = session.Session([job.pid], str(helpers.recipe(tmp_path, "logged")), root=str(site), steps=1000)
        s.prepare()
        s.inject()
        seen = []
        assert s.wait(seen.append, 60, until=("recording",)) and [a.state for a in seen][-1] == "recording"
        (shown,) = records.status(job.pid)
        assert shown["state"] == "recording" and shown["recipe"] == "pkjob-logged"
        (rec,) = records.records(job.pid)
        assert rec.attacher == os.getpid() and oct(os.stat(rec.path).st_mode & 0o777) == "0o600"
        (done,) = records.detach(job.pid)
        assert done["state"] == "restored" and done["why"] == "detached" and done["captures"][0]["traces"]
        assert records.records(job.pid), "this process attached and still runs: it cleans up"
        assert s.wait(None, 30) and s.attached[0].state == "restored"
        s.close()
        assert records.records(job.pid) == [] and not os.path.exists(s.attached[0].folder.base)
        with pytest.raises(AttachError, match="nothing is attached to process"):
            records.detach(job.pid)
        final, _ = job.finish()
        assert all(final["original"].values())
    finally:
        job.kill()


def test_a_record_of_an_ended_process_is_forgotten(tmp_path):
    with records.records_dir() as folder:
        path = folder.join(f"{os.getpid()}-1.json")  # this pid, but another start: an earlier process
    with open(path, "w") as handle:
        json.dump({"pid": os.getpid(), "started": 1, "base": "/x", "out": "/x/out", "recipe": "r", "attacher": 1},
                  handle)
    os.chmod(path, 0o600)
    assert records.records(os.getpid()) == [] and not os.path.exists(path)
    assert records.status(os.getpid()) == []


def test_an_attaching_command_is_running_only_while_the_process_with_its_pid_and_start_runs(tmp_path):
    from patchkit.attach.process import read

    me = read(os.getpid())
    assert records._running(me.pid, me.started)
    assert not records._running(me.pid, me.started + 1)  # its pid taken by a later process: that one ended
    assert not records._running(me.pid, -1)  # a record without the start: never taken for running
    base = tmp_path / "req"
    (base / "out").mkdir(parents=True)
    rec = records.Record(4242, 1, str(base), str(base / "out"), "r", me.pid, str(tmp_path / "rec.json"), me.started + 1)
    assert records.cleaned(rec) == {} and not base.exists()  # its command is gone: the folder goes with the record
