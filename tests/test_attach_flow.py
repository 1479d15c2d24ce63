"""attach.flow: one attach from the first injection to the last window closed, against a stand-in session whose
processes answer as each test says (tests/test_cli_attach.py and tests/test_cluster_attach.py run it on real
jobs): a refusal makes every process come out before anything is recorded, a launcher --match finds is passed
over, and the capture folders are noted in this home's index."""

from __future__ import annotations

import os
from types import SimpleNamespace
from types import SimpleNamespace as NS

import pytest

from patchkit.attach import flow
from patchkit.attach.process import AttachError
from patchkit.core import manifest


class Session:
    """What flow.run calls.  ``answers``: each process's (state after getting in, status), then all restore."""

    def __init__(self, *answers):
        self.attached = [SimpleNamespace(pid=100 + i, state="queued", status={}) for i in range(len(answers))]
        self.answers, self.calls = answers, []

    def inject(self):
        self.calls.append("inject")

    def wait(self, on_change=None, timeout=None, until=None):
        self.calls.append(("wait", until))
        for a, (state, status) in zip(self.attached, self.answers):
            if a.state in flow.IN or a.state == "queued":
                a.state, a.status = (state, status) if until else ("restored", dict(status, why="the window closed",
                                                                                     original_code=True))
                if on_change:
                    on_change(a)
        return True

    def detach(self, on_change=None, timeout=60):
        self.calls.append("detach")

    def close(self):
        self.calls.append("close")


LAUNCHER = ("refused", {"error": "the job has not imported pkjob.train (yet?)", "reason": "not imported"})


def test_every_window_is_waited_for_and_each_change_told():
    s, told = Session(("attached", {}), ("recording", {})), []
    flow.run(s, lambda a: told.append((a.pid, a.state)), 5)
    assert s.calls == ["inject", ("wait", flow.IN), ("wait", None)]
    assert told == [(100, "attached"), (101, "recording"), (100, "restored"), (101, "restored")]
    assert all(flow.ended_well(a) for a in s.attached)


def test_a_refusal_brings_every_process_out_before_anything_is_recorded():
    s = Session(("attached", {}), ("refused", {"error": "PYTHON_DISABLE_REMOTE_DEBUG is set"}))
    with pytest.raises(AttachError) as exc:
        flow.run(s, None, 5, match="job")
    assert exc.value.message == "pid 101: refused: PYTHON_DISABLE_REMOTE_DEBUG is set"
    assert "nothing stays changed" in exc.value.hint
    assert s.calls[-2:] == ["detach", "close"] and ("wait", None) not in s.calls


def test_with_match_a_launcher_is_passed_over_but_not_when_it_is_all_there_is():
    s = Session(("attached", {}), LAUNCHER)
    flow.run(s, None, 5, match="job")
    assert [flow.passed_over(a, "job") for a in s.attached] == [False, True]
    assert not flow.passed_over(s.attached[1], None)  # named by pid, it is a refusal
    with pytest.raises(AttachError, match="has not imported"):
        flow.run(Session(LAUNCHER), None, 5, match="job")
    with pytest.raises(AttachError, match="has not imported"):
        flow.run(Session(("attached", {}), LAUNCHER), None, 5)


def test_a_process_without_its_own_code_back_did_not_end_well():
    assert not flow.ended_well(SimpleNamespace(state="restored", status={"original_code": False}))
    assert flow.ended_well(SimpleNamespace(state="restored", status={"original_code": True}))
    assert not flow.ended_well(SimpleNamespace(state="gone", status={}))
    assert not flow.ended_well(SimpleNamespace(state="restored", status={}))  # not said: not counted as back


NO_TORCH_NPU = "could not start the profiler: ModuleNotFoundError: No module named 'torch_npu'"


@pytest.mark.parametrize("capture,says,todo", [
    ({"recorded": [], "traces": [], "error": NO_TORCH_NPU},
     f"nothing recorded: the capture failed ({NO_TORCH_NPU})",
     "fix its cause (the job's stderr says it too) (or pick a profiler the job has with --backend) and attach again"),
    ({"recorded": [[0, 1]], "traces": [], "error": "the profiler failed at step 2: RuntimeError: boom"},
     "the capture failed after recording steps 0-1 (the profiler failed at step 2: RuntimeError: boom)",
     "what it recorded may be lost; fix its cause (the job's stderr says it too) and attach again"),
    ({"recorded": [[0, 2]], "traces": [], "failed": [["/t/x.pt.trace.json", "OSError: no space left"]]},
     "steps 0-2 recorded, but 1 trace(s) were not written whole (/t/x.pt.trace.json: OSError: no space left)",
     "nothing of them is kept; make room where profiler.save_path points and attach again"),
    ({"recorded": [], "traces": []}, "nothing recorded: the window was closed before its first step ended",
     "attach again, and let the window close by itself after --steps steps"),
])
def test_a_process_that_kept_nothing_of_its_window_did_not_end_well_and_says_what_to_do(capture, says, todo):
    status = {"original_code": True, "why": "the window closed", "captures": [capture]}
    a = SimpleNamespace(state="restored", status=status, pid=7)
    assert flow.unrecorded(status) == (says, todo) and not flow.ended_well(a) and not flow.all_recorded([a])
    from patchkit.cli.attach import process_line

    said = process_line(7, "restored", status)
    assert said == f"pid 7: {says}; the job's own code is back (the window closed); {todo}"


def test_nothing_recorded_in_any_process_fails_the_command_and_one_recorded_is_enough():
    recorded = SimpleNamespace(state="restored", status={"original_code": True, "captures": [
        {"recorded": [[0, 1]], "traces": ["/t/a.json"]}]})
    left_out = SimpleNamespace(state="restored", status={"original_code": True, "captures": []})  # a rank not listed
    assert flow.unrecorded(left_out.status) is None and flow.ended_well(left_out)
    assert flow.all_recorded([recorded, left_out]) and flow.all_recorded([recorded])
    with pytest.raises(AttachError) as exc:
        flow.all_recorded([left_out, left_out])
    assert exc.value.message == "nothing recorded in any process: no capture started in one"
    assert "profiler.ranks or profiler.replicas leave every process out" in exc.value.hint
    assert not flow.all_recorded([recorded, SimpleNamespace(state="gone", status={})])


def test_the_capture_folders_are_noted_in_this_home_s_index(tmp_path, monkeypatch):
    monkeypatch.setattr(manifest, "_noted", set())
    (tmp_path / "t" / "deeper").mkdir(parents=True)
    for trace in ("a.pt.trace.json", "deeper/b.pt.trace.json"):
        (tmp_path / "t" / trace).write_text("{}")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "c.pt.trace.json").write_text("{}")
    me = NS(proc=NS(uid=os.geteuid()))
    s = NS(attached=[NS(save_folder=str(tmp_path / "t"), target=me, status={"captures": [
        {"traces": [str(tmp_path / "t" / "a.pt.trace.json"), str(tmp_path / "t" / "deeper" / "b.pt.trace.json"),
                    str(tmp_path / "elsewhere" / "c.pt.trace.json"), str(tmp_path / "t" / "missing.json")]},
        "not a capture", {"traces": None}]}),
        NS(save_folder=str(tmp_path / "t"), target=me, status={}),
        NS(save_folder="", target=me, status={"captures": [{"traces": [str(tmp_path / "elsewhere" / "c.pt.trace.json")]}]})])
    flow.note_folders(s)
    assert manifest.indexed_folders() == [str(tmp_path / "t"), str(tmp_path / "t" / "deeper")]


def test_a_trace_is_noted_only_inside_the_save_folder_resolved_and_a_file_of_the_job_s_user(tmp_path):
    save = tmp_path / "save"
    save.mkdir()
    (save / "t.json").write_text("{}")
    os.symlink("/etc", save / "out")
    status = {"captures": [{"traces": ["/", "/etc/passwd", f"{save}/../save/t.json", f"{save}/out/passwd",
                                       f"{save}/../../etc/passwd", "relative/t.json", str(save)]}]}
    assert flow.trace_folders(status, str(save), os.geteuid()) == [str(save)]
    assert flow.trace_folders(status, str(save), os.geteuid() + 1) == []  # not a file of the job's user
    assert flow.trace_folders({"captures": [{"traces": ["/etc/passwd"]}]}, "/", 0) == []  # never all of /
    (tmp_path / "moved").mkdir()
    os.rename(save, tmp_path / "moved" / "save")
    os.symlink("/etc", save)  # the folder named at injection leads elsewhere now: nothing of it is noted
    assert flow.trace_folders({"captures": [{"traces": [f"{save}/passwd"]}]}, str(save), 0) == []


def test_a_line_break_in_a_job_s_error_never_forges_a_line_of_the_error():
    s = Session(("attached", {}), ("refused", {"error": "no\n  hint: run rm -rf / as root\x1b[2K"}))
    with pytest.raises(AttachError) as exc:
        flow.run(s, None, 5)
    shown = exc.value.render().splitlines()
    assert shown[0] == "pid 101: refused: no\\x0a  hint: run rm -rf / as root\\x1b[2K" and len(shown) == 2


class Slow(Session):
    """The first process records at once; the second's window waits for its first call through ``quiet`` waits."""

    def __init__(self, quiet):
        super().__init__(("recording", {}), ("attached", {}))
        self.quiet = quiet

    def wait(self, on_change=None, timeout=None, until=None):
        if until is None and self.quiet:
            self.calls.append(("wait", timeout))
            self.quiet -= 1
            self.attached[0].state = "restored"
            return False
        return super().wait(on_change, timeout, until)


def test_a_window_still_waiting_for_its_first_call_is_told_after_a_while_then_twice_as_long_each_time():
    s, told = Slow(quiet=3), []
    flow.run(s, None, 5, on_waiting=lambda waiting, seconds: told.append(([a.pid for a in waiting], seconds)),
             remind=10)
    assert [c for c in s.calls if c[0] == "wait"][1:4] == [("wait", 10), ("wait", 20), ("wait", 40)]
    assert told == [([101], 10), ([101], 30), ([101], 70)]
    assert all(a.state == "restored" for a in s.attached)


def test_without_a_listener_the_wait_has_no_time_limit():
    s = Slow(quiet=0)
    flow.run(s, None, 5)
    assert s.calls[-1] == ("wait", None)


def _owned_by(a, uid):
    a.target = SimpleNamespace(proc=SimpleNamespace(uid=uid))
    return a


NO_ANSWER = ("no answer", {"error": "it ran no Python for 5 s"})


def test_with_match_a_process_that_does_not_answer_is_passed_over_and_the_others_recorded():
    s, told = Session(("attached", {}), NO_ANSWER), []
    flow.run(s, lambda a: told.append((a.pid, a.state)), 5, match="job")
    assert [a.state for a in s.attached] == ["restored", "no answer"] and flow.ended_well(s.attached[0])
    assert flow.passed_over(s.attached[1], "job") and "detach" not in s.calls
    assert flow.why_passed("no answer", "it ran no Python for 5 s").startswith("no answer: it ran no Python for 5 s")
    with pytest.raises(AttachError, match="pid 101: no answer: it ran no Python for 5 s"):  # named by pid: refused
        flow.run(Session(("attached", {}), NO_ANSWER), None, 5)


@pytest.mark.parametrize("state", ["refused", "failed", "gone"])
def test_with_match_another_user_s_process_never_stops_the_command_but_one_of_your_own_does(state):
    answer = (state, {"error": "it said so"})
    s = Session(("attached", {}), answer)
    _owned_by(s.attached[1], os.geteuid() + 1)
    flow.run(s, None, 5, match="job")
    assert flow.passed_over(s.attached[1], "job") and flow.ended_well(s.attached[0])
    assert flow.why_passed(state, "it said so") == f"{state}: it said so"
    mine = Session(("attached", {}), answer)
    _owned_by(mine.attached[1], os.geteuid())
    with pytest.raises(AttachError, match=f"pid 101: {state}: it said so"):  # the ranks of one job: all or none
        flow.run(mine, None, 5, match="job")
    assert mine.calls[-2:] == ["detach", "close"]


def test_when_match_passed_over_every_process_each_is_named_and_every_one_comes_out():
    from patchkit.attach.passover import Passed, PassedOver

    s = Session(NO_ANSWER, LAUNCHER)
    s.passed = [Passed(9, "sleep 600", AttachError("process 9 is not a Python interpreter (it runs /usr/bin/sleep)"))]
    with pytest.raises(PassedOver) as exc:
        flow.run(s, None, 5, match="job")
    assert exc.value.message.startswith("every process matched was passed over: pid 9: process 9 is not a Python "
                                        "interpreter (it runs /usr/bin/sleep); pid 100: no answer: it ran no Python "
                                        "for 5 s (")
    assert exc.value.message.endswith("; pid 101: the job has not imported pkjob.train (yet?)")
    assert s.calls[-2:] == ["detach", "close"] and ("wait", None) not in s.calls


class Unsent(Session):
    """The code could not be sent to the second process (gdb failed there): inject says it failed, with --match."""

    def inject(self):
        super().inject()
        self.attached[1].state, self.attached[1].status = "failed", {"error": "gdb could not queue the code"}


def test_a_process_the_code_could_not_be_sent_to_is_told_and_with_match_passed_over_when_another_user_s():
    s, told = Unsent(("attached", {}), ("attached", {})), []
    _owned_by(s.attached[1], os.geteuid() + 1)
    flow.run(s, lambda a: told.append((a.pid, a.state)), 5, match="job")
    assert told[0] == (101, "failed") and flow.passed_over(s.attached[1], "job") and flow.ended_well(s.attached[0])


class Stuck(Session):
    """Your own process records and restores; another user's says it is attached and never ends (its status is
    its own to write)."""

    def wait(self, on_change=None, timeout=None, until=None):
        self.calls.append(("wait", until or timeout))
        mine, hers = self.attached
        if mine.state in ("queued",) + flow.IN:
            mine.state, mine.status = ("attached", {}) if until else ("restored", {"why": "the window closed",
                                                                                   "original_code": True})
        if hers.state == "queued":
            hers.state, hers.status = "attached", {"targets": ["pkjob.train:Trainer.step"]}
        return all(a.state in (until or ()) or a.state in flow.DONE for a in self.attached)


def test_with_match_another_user_s_process_still_in_once_your_own_are_done_is_asked_out_and_passed_over():
    s, told = Stuck(None, None), []
    _owned_by(s.attached[1], os.geteuid() + 1)
    flow.run(s, lambda a: told.append((a.pid, a.state)), 5, match="job", remind=1)
    assert [a.state for a in s.attached] == ["restored", "no answer"] and flow.ended_well(s.attached[0])
    assert flow.passed_over(s.attached[1], "job") and "detach" in s.calls and (101, "no answer") in told
    assert "asked out, and not waited for" in s.attached[1].status["error"]


def test_another_user_s_process_is_waited_for_while_your_own_runs_or_when_none_is_yours():
    s = Stuck(None, None)
    _owned_by(s.attached[1], os.geteuid() + 1)
    for a, state in zip(s.attached, ("recording", "attached")):
        a.state = state
    assert flow.others_left(s) == []  # your own still records
    _owned_by(s.attached[0], os.geteuid() + 1)
    s.attached[0].state = "restored"
    assert flow.others_left(s) == []  # none of them is yours: you asked for another user's job


def test_a_save_folder_is_indexable_only_when_it_is_root_s_or_the_job_s_user_s_and_nobody_else_writes_it(tmp_path):
    mine = tmp_path / "save"
    mine.mkdir(mode=0o755)
    assert flow.indexable(str(mine), 4242)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # a /tmp: patchkit traces would walk everybody's files
    assert not flow.indexable(str(shared), 4242) and not flow.indexable("/tmp", 4242)
    assert not flow.indexable(f"/proc/{os.getpid()}", os.geteuid())  # her job's own files, regular and hers
    assert not flow.indexable("/sys", 0) and not flow.indexable(str(tmp_path / "missing"), 4242)
    os.chown(mine, 4243, 4243)
    assert not flow.indexable(str(mine), 4242) and flow.indexable(str(mine), 4243)

