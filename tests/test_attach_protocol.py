"""runtime.attach.protocol: the states and reasons the agent and the attaching command share, typed; the channel
takes only their values, and a process is passed over on its reason code, never on words found in a message."""

from __future__ import annotations

import json
from types import SimpleNamespace as NS

import pytest

from patchkit.attach import channel, flow
from patchkit.runtime.attach import boot
from patchkit.runtime.attach.protocol import DONE, IN, ORDER, WRITTEN, Reason, State


def test_the_states_are_plain_strings_in_a_status_file_and_an_agent_only_goes_forwards():
    assert json.dumps({"state": State.RECORDING}) == '{"state": "recording"}' and str(State.NO_ANSWER) == "no answer"
    assert ORDER == (State.QUEUED, State.WATCHING, *IN)  # a watch (attach --auto) is a request of its own
    assert not set(IN) & set(DONE) and set(WRITTEN) - set(IN) - {State.WATCHING} <= set(DONE)
    assert State.WATCHED in DONE and State.WATCHING not in DONE
    assert channel.STATES == tuple(s.value for s in WRITTEN)


def test_boot_writes_the_withdrawn_reason_the_protocol_names():
    source = open(boot.__file__, encoding="ascii").read()
    assert f'"reason": "{Reason.WITHDRAWN.value}"' in source


@pytest.mark.parametrize("reason,kept", [("not imported", "not imported"), ("backend", "backend"),
                                         ("has not imported", None), (["not imported"], None), (7, None)])
def test_the_channel_takes_only_a_known_reason(reason, kept):
    said = channel.typed({"state": "refused", "error": "x", "reason": reason})
    assert said["state"] == "refused" and said.get("reason") == kept


def test_a_process_is_passed_over_on_its_reason_code_not_on_words_in_its_message():
    import os

    me = NS(proc=NS(uid=os.geteuid()))
    words = NS(state="refused", target=me, status={"error": "the job has not imported pkjob.train (yet?)"})
    code = NS(state="refused", target=me, status={"error": "anything", "reason": Reason.NOT_IMPORTED.value})
    assert not flow.passed_over(words, "job")  # one of your own processes that refused: a refusal
    assert flow.passed_over(code, "job")
    assert flow.why_passed("refused", "anything", "not imported") == "anything"
    assert flow.why_passed("refused", "the job has not imported m", None) == "refused: the job has not imported m"
