"""attach.channel: what a job's agent writes is read as a stranger's (typed, bounded, never followed or waited on),
asked out without blocking, and the folder root named for a capture found at injection.
tests/test_hostile_attach_channel.py does the same as a real second user, through the commands."""

from __future__ import annotations

import json
import os
import stat

import pytest

from attach_helpers import fake_process as proc
from patchkit.attach import channel, payload


@pytest.fixture
def folder():
    f = payload.folder(proc(os.geteuid()), {"recipe": "r"}, "")
    yield f
    payload.remove(f)


def write(f, data) -> None:
    with open(os.path.join(f.out, channel.STATUS), "wb") as handle:
        handle.write(data if isinstance(data, bytes) else json.dumps(data).encode())


def agent_status(**extra):
    """A status as agent.Attachment.report writes it."""
    return dict({"pid": 7, "recipe": "r", "id": "ab", "state": "restored", "time": 1.5, "attached_at": 1.0,
                 "targets": ["m:T.f"], "steps": 2, "functions": 1, "why": "the window closed", "original_code": True,
                 "clean": True, "captures": [{"key": "r", "state": "finished", "backend": "torch", "rank": 0,
                                              "step": 2, "recorded": [[0, 1]], "traces": ["/o/t.json"],
                                              "failed": [], "error": None}]}, **extra)


def test_what_an_agent_writes_reads_back_as_it_was(folder):
    assert channel.read(folder.base) is None  # nothing written yet
    status = agent_status()
    write(folder, status)
    status["captures"][0].pop("error")  # None: nothing to say
    assert channel.read(folder.base) == status


@pytest.mark.parametrize("field,value", [
    ("pid", "7"), ("targets", "m:T.f"), ("targets", [1, None]), ("steps", True), ("original_code", "yes"),
    ("captures", "x"), ("captures", {"recorded": [0, 1]}), ("why", ["a"]), ("time", float("inf")),
    ("attached_at", "now"), ("running", {"a": 1}), ("functions", 1 << 70), ("calls", -1), ("calls", 2.5),
    ("calls", True), ("calls", "450")])
def test_a_field_of_the_wrong_type_is_left_out(folder, field, value):
    write(folder, json.dumps(agent_status(**{field: value}), allow_nan=True).encode()
          if field != "time" else b'{"state": "attached", "time": 1e999}')
    got = channel.read(folder.base)
    assert got["state"] in channel.STATES and got.get(field) in (None, [])


def test_the_calls_a_waiting_window_counts_read_back_bounded(folder):
    write(folder, agent_status(state="attached", calls=450))
    assert channel.read(folder.base)["calls"] == 450
    write(folder, agent_status(state="attached", calls=1 << 80))  # the job's user wrote it: said as the bound
    assert channel.read(folder.base)["calls"] == channel.COUNT
    write(folder, b'{"state": "attached", "calls": 1' + b"0" * 5000 + b"}")  # past what json reads as a number
    assert channel.read(folder.base)["state"] == channel.UNREADABLE


def test_each_capture_keeps_its_typed_pairs_and_names_and_nothing_else():
    got = channel.typed({"state": "restored", "captures": [
        {"recorded": [[0, 1], [2], ["a", 3], [True, 1], "x", [4, 5]], "traces": ["/t/a", 5, {"x": 1}],
         "failed": [["/t/b", "no space"], [1, 2]], "rank": "0", "extra": "dropped"}, "not a capture", 5]})
    assert got["captures"] == [{"recorded": [[0, 1], [4, 5]], "traces": ["/t/a"], "failed": [["/t/b", "no space"]]}]


@pytest.mark.parametrize("data,says", [
    ({"state": 3}, "its state is a JSON int"),
    ({"state": "pwned"}, "its state is 'pwned'"),
    ({"state": ["attached"]}, "its state is a JSON list"),
    ([{"state": "attached"}], "a JSON list, not an object"),
    (None, "a JSON NoneType, not an object"),
])
def test_a_status_that_is_not_one_is_unreadable(folder, data, says):
    write(folder, data)
    assert channel.read(folder.base) == {"state": "unreadable",
                                         "error": f"the job wrote an unreadable status ({says})"}


@pytest.mark.parametrize("raw,says", [
    (b"[" * 10000 + b"]" * 10000, "nested more than 8 deep"),
    (b'{"state": "attached", "x": ' + b'{"a": ' * 10000 + b"1" + b"}" * 10001, "nested more than 8 deep"),
    (b'{"state": "attached", "t": NaN}', "not JSON: NaN is not a number"),
    (b"\xff\xfe{", "not UTF-8"),
    (('{"state": "restored", "why": "\u0122", "x": ' + "[" * 900 + "]" * 900 + "}").encode("utf-16-le"), "not JSON"),
    # read as UTF-8 (its NULs are): never as the UTF-16 json.loads of bytes would take it, nesting uncounted
    (b'{"state": "attached", "pid": ' + b"9" * 5000 + b"}", "not JSON"),
    (b" " * (channel.LIMIT + 1), "status.json is larger than 1 MiB"),
])
def test_deep_huge_or_broken_json_is_unreadable_without_a_traceback(folder, raw, says):
    write(folder, raw)
    got = channel.read(folder.base)
    assert got["state"] == "unreadable" and says in got["error"], got


def test_nesting_is_counted_on_the_raw_text_outside_strings():
    assert not channel.deeper_than(b'{"a": "[[[[[[[[[[[[", "b": "\\"[[[[[[[[[[[[[[[[[["}', 2)
    assert not channel.deeper_than(b'{"a": "\\\\", "b": [[1]]}', 3)
    assert channel.deeper_than(b'{"a": "\\\\", "b": [[[1]]]}', 3)


def test_text_from_the_job_is_one_line_and_bounded():
    got = channel.typed({"state": "failed", "error": "x\n  hint: run rm -rf /\x1b[2J" + "y" * 5000,
                         "targets": ["a\rb"] * 1000})
    assert got["error"].startswith("x\\x0a  hint: run rm -rf /\\x1b[2J") and len(got["error"]) == channel.TEXT
    assert got["targets"] == ["a\\x0db"] * channel.MANY and "\n" not in json.dumps(got).replace("\\n", "")


@pytest.mark.parametrize("plant,says", [
    (lambda p: os.symlink("/etc/passwd", p), "status.json is a symbolic link: never followed"),
    (lambda p: os.mkfifo(p), "status.json is not a regular file (a FIFO): never read"),
    (lambda p: os.mkdir(p), "status.json is not a regular file (a folder): never read"),
])
def test_a_link_fifo_or_folder_in_place_of_the_status_is_said_never_followed_or_waited_on(folder, plant, says):
    plant(os.path.join(folder.out, channel.STATUS))
    assert channel.read(folder.base) == channel.unreadable(says)


def test_a_channel_that_is_not_this_user_s_folder_is_not_read(folder, tmp_path):
    write(folder, agent_status())
    os.chmod(folder.base, 0o777)
    assert "is not this user's request folder" in channel.read(folder.base)["error"]
    assert "is not this user's request folder" in channel.ask_detach(folder.base)
    os.chmod(folder.base, 0o700)
    os.rename(folder.out, folder.out + ".x")
    os.symlink(folder.out + ".x", folder.out)
    assert channel.read(folder.base) == channel.unreadable("its channel is a symbolic link, not a folder")


@pytest.mark.parametrize("plant,says", [
    (lambda p: os.mkdir(p), "the job put a folder where the detach file goes"),
    (lambda p: os.mkfifo(p), "the job put a FIFO where the detach file goes"),
    (lambda p: os.symlink("/etc/passwd", p), "the job put a symbolic link where the detach file goes"),
    (lambda p: open(p, "w").close(), ""),  # asked already
])
def test_detach_is_asked_without_following_or_waiting_on_what_the_job_put_there(folder, plant, says):
    plant(os.path.join(folder.out, channel.DETACH))
    assert channel.ask_detach(folder.base) == says  # a FIFO with no reader: before, this blocked for ever


def test_detach_is_a_new_private_file_and_a_channel_gone_needs_none(folder):
    assert channel.ask_detach(folder.base) == ""
    st = os.lstat(os.path.join(folder.out, channel.DETACH))
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    payload.remove(folder)
    assert channel.ask_detach(folder.base) == "" and channel.read(folder.base) is None


def test_the_save_folder_is_the_recipe_s_resolved_against_the_job_s_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert channel.save_folder("out/traces", os.getpid()) == str(tmp_path / "out" / "traces")
    os.symlink(tmp_path / "elsewhere", tmp_path / "link")
    assert channel.save_folder("link/t", os.getpid()) == ""  # a link on the way: it may name any folder at all
    assert channel.save_folder("/abs/../t", os.getpid()) == "/t"
    assert channel.save_folder("", os.getpid()) == "" and channel.save_folder("x", 999999999) == ""
