"""What the agent in a job and the attaching command say to each other: a process's states, in the order an
agent goes through them, and why an agent refused, as a code the attaching command acts on (the message beside it
is for people).  Both are ``str`` enums: a status file holds their plain values, and a value read back from a
stranger's file is one of them or is not taken (:mod:`patchkit.attach.channel`).  Standard library only.
"""

from __future__ import annotations

from enum import Enum


class State(str, Enum):
    """A process's state: written by its agent (attached to failed), or said by the attaching command."""

    QUEUED = "queued"  # the code is queued in the job; no answer yet
    WATCHING = "watching"  # attach --auto: its stacks are looked at, nothing changed
    WATCHED = "watched"  # attach --auto: what was seen is written (watch.json); nothing was changed
    ATTACHED = "attached"  # swapped in: the window waits for the next call
    RECORDING = "recording"
    CLOSING = "closing"  # detach asked mid-window: it closes at the job's next step
    RESTORED = "restored"  # the job's own code is back
    REFUSED = "refused"  # nothing changed (:class:`Reason` says why)
    FAILED = "failed"
    NO_ANSWER = "no answer"  # the job ran no Python within the timeout: the request was withdrawn
    GONE = "gone"  # the process ended
    HANDED_OVER = "handed over"  # detach from another command: the attaching command says what was recorded

    def __str__(self) -> str:
        return self.value


WRITTEN = (State.WATCHING, State.WATCHED, State.ATTACHED, State.RECORDING, State.CLOSING, State.RESTORED,
           State.REFUSED, State.FAILED)  # by an agent
ORDER = (State.QUEUED, State.WATCHING, State.ATTACHED, State.RECORDING, State.CLOSING)  # only forwards through these
IN = (State.ATTACHED, State.RECORDING, State.CLOSING)  # the recipe's code is in the job
DONE = (State.WATCHED, State.RESTORED, State.REFUSED, State.FAILED, State.GONE, State.NO_ANSWER, State.HANDED_OVER)
FAILING = (State.REFUSED, State.FAILED, State.NO_ANSWER, State.GONE)  # out before anything was recorded


class Reason(str, Enum):
    """Why an agent refused (its status's ``reason``)."""

    NOT_IMPORTED = "not imported"  # the job has not imported the recipe's module: it does not run that code
    APPLIED = "applied"  # the module runs patchkit's lines already
    NOT_PLANNED = "not planned"  # the module is not the planned file, or that file changed since
    BACKEND = "backend"  # the recipe's backend cannot record in the job
    ATTACHED = "attached already"
    WITHDRAWN = "withdrawn"  # the request was gone when the job ran the lines (boot.py writes this value)
    OTHER = "other"

    def __str__(self) -> str:
        return self.value
