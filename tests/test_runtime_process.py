"""patchkit.runtime.process: the process-wide tables, lines said once, failures that finish a key."""

from __future__ import annotations

import pytest

from patchkit.runtime import process

pytestmark = pytest.mark.usefixtures("clean_runtime")  # from conftest.py


class Cap:
    """A stand-in capture: notes that it was told to release its profiler."""

    def __init__(self):
        self.error = None
        self.released = 0

    def quiet_end(self):
        self.released += 1


def err_lines(capsys):
    return capsys.readouterr().err.splitlines()


def test_none_is_always_finished_even_after_clearing():
    process.finished.add("k")
    process.clear()
    assert process.finished == {None}


def test_retire_finishes_the_key_and_frees_the_one_capture_slot():
    cap = Cap()
    process.captures["k"] = cap
    process.quick["k"] = lambda: True
    process.state["active"] = "k"
    process.retire("k", cap)
    assert "k" in process.finished and process.done["k"] is cap
    assert "k" not in process.captures and "k" not in process.quick and process.state["active"] is None


def test_retire_leaves_another_key_capturing():
    process.state["active"] = "other"
    process.retire("k", None)
    assert process.state["active"] == "other" and "k" in process.finished and "k" not in process.done


def test_fail_is_one_line_releases_the_profiler_and_the_job_goes_on(capsys):
    cap = Cap()
    process.captures["k"] = cap
    process.fail("k", "the profiler failed at step 3", OSError("disk gone\nmore detail"))
    assert err_lines(capsys) == ["[patchkit] k: the profiler failed at step 3: OSError: disk gone; not profiling k "
                                 "in this process, the job runs on"]
    assert cap.released == 1 and cap.error == "the profiler failed at step 3: OSError: disk gone\nmore detail"
    assert "k" in process.finished and process.done["k"] is cap


@pytest.mark.parametrize("how", ["env", "call"])
def test_fail_raises_in_strict_mode(how, monkeypatch, capsys):
    if how == "env":
        monkeypatch.setenv("PATCHKIT_STRICT", "1")
    else:
        process.state["strict"] = True
    with pytest.raises(ValueError, match="bad"):
        process.fail("k", "could not start the profiler", ValueError("bad"))
    assert "k" in process.finished and len(err_lines(capsys)) == 1


def test_strict_mode_off_for_an_empty_or_zero_variable(monkeypatch):
    for value in ("", "0"):
        monkeypatch.setenv("PATCHKIT_STRICT", value)
        assert not process.strict()


def test_once_says_a_topic_once(capsys):
    for _ in range(3):
        process.once(("k", "busy"), "k: busy")
    process.once(("j", "busy"), "j: busy")
    assert err_lines(capsys) == ["[patchkit] k: busy", "[patchkit] j: busy"]


def test_say_survives_a_closed_stderr(monkeypatch):
    class Closed:
        def write(self, text):
            raise ValueError("I/O operation on closed file")

    monkeypatch.setattr("sys.stderr", Closed())
    process.say("nothing raises")


# guards and roles as the inserted lines pass them: callables, read as false / None when they raise


def test_a_guard_that_raises_is_false_and_said_once_naming_its_line(capsys):
    guard = lambda: 1 / 0  # noqa: E731  (one point: one code object)
    assert process.holds(guard, "k") is False and process.holds(guard, "k") is False
    (said,) = err_lines(capsys)
    line = guard.__code__.co_firstlineno
    assert said.startswith("[patchkit] k: the guard at ") and f"test_runtime_process.py:{line} raised " in said
    assert "ZeroDivisionError" in said and "read as false" in said and "the job runs on" in said
    other = lambda: {}["x"]  # noqa: E731  (another point: its own line)
    assert process.holds(other) is False and "KeyError" in err_lines(capsys)[0]


def test_a_guard_whose_value_has_no_truth_is_false_too(capsys):
    class NoTruth:
        def __bool__(self):
            raise ValueError("ambiguous")

    assert process.holds(lambda: NoTruth()) is False and "ValueError: ambiguous" in err_lines(capsys)[0]
    assert process.holds(lambda: 1) is True and process.holds(lambda x: x, args=(0,)) is False


def test_a_role_chosen_as_the_line_runs_is_its_key_or_none(capsys):
    assert process.chosen(lambda: "r/actor") == "r/actor" and process.chosen(lambda: None) is None
    role = lambda: "r/a" if missing_name else None  # noqa: E731,F821
    assert process.chosen(role) is None and process.chosen(role) is None
    (said,) = err_lines(capsys)
    assert "choosing the role at " in said and "NameError" in said
    assert process.chosen(lambda: 3) is None and "is 3, not a string" in err_lines(capsys)[0]


def test_a_guard_that_raises_never_raises_even_in_strict_mode(capsys):
    process.state["strict"] = True
    assert process.holds(lambda: [][1]) is False and process.chosen(lambda: [][1]) is None


def test_forget_lets_a_recipe_start_afresh_and_keeps_a_running_capture():
    process.finished.update({"r", "r/actor", "other"})
    process.done["r"] = Cap()
    process.checked["r/actor"] = ()
    process.refused["r"] = "detached"
    process.said.update({("r", "busy"), ("r/actor", "thread"), ("other", "busy"), "plain"})
    process.captures["r/ref"] = Cap()
    process.finished.add("r/ref")  # (a key is never both; forget must not drop a running one's entries)
    process.forget("r")
    assert process.finished == {None, "other", "r/ref"} and process.done == {} and process.checked == {}
    assert "r" not in process.refused and process.said == {("other", "busy"), "plain"}
    assert process.recipe_of("r/actor") == "r" and process.recipe_of(None) is None
    process.captures.clear()
