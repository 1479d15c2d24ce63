"""core.progress: the default that tells nobody, and what a Progress is asked to do."""

from __future__ import annotations

from patchkit.core.progress import BYTES, SILENT, Progress, Silent, given

from progress_helpers import Recorder


def test_nothing_given_is_the_silent_progress_which_takes_every_call():
    assert given(None) is SILENT and isinstance(SILENT, Silent)
    SILENT.start(10, "copying", BYTES)
    SILENT.advance(4, "file 1/2")
    SILENT.advance()


def test_a_given_progress_is_used_as_it_is():
    recorder = Recorder()
    assert given(recorder) is recorder
    progress: Progress = given(recorder)
    progress.start(3, "waiting", "nodes")
    progress.advance(2, "a")
    progress.advance()
    assert recorder.summary() == [("waiting", "nodes", 3, 3)] and recorder.stages[0]["items"] == ["a"]
