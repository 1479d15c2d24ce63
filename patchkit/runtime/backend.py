"""What a backend is: the type every module of :mod:`patchkit.runtime.backends` defines one subclass of.

A backend turns the settings a recipe hands to ``patchkit.runtime.configure``
(validated and normalised by :mod:`patchkit.runtime.settings`) into *plain
profiler code*: a :class:`Plan` of short Python snippets, one per moment of a
capture (:data:`SECTIONS`).  The runtime compiles and runs exactly those
snippets, and ``patchkit show`` prints exactly those snippets, so what a
reviewer reads is what runs.  Nothing else of a backend runs in the training
process, and its module imports only the standard library: the profiler
library is imported by :meth:`Backend.probe` and by the snippets themselves.

:class:`Backend` is an abstract class, as LibCST's ``CodemodCommand`` and
import-linter's ``Contract`` are: a subclass that leaves out :meth:`~Backend.probe`
or :meth:`~Backend.plan` cannot be made, a type checker holds each method to
the signature written here, and ``tests/test_backends.py`` holds every backend
found to the rest (its class attributes, its sections).

Standard library only.
"""

from __future__ import annotations

import abc
import inspect
import sys
from typing import Any, ClassVar, Dict, List, Mapping, NamedTuple, Optional, Tuple

# The moments a backend's code may run at, in the order `patchkit show` prints them, with what is bound there.
WHEN: Dict[str, Optional[str]] = {
    "create": "When the capture starts: at the first start/step point, in the thread that reaches it.",
    "begin": None,  # printed under "create"
    "advance": "At every later step point (step += 1):",
    "window_open": "When a recording window opens (before its first recorded step):",
    "step_enter": "At the start of each recorded step:",
    "step_exit": "At the end of each recorded step:",
    "window_close": "When a recording window closes (after its last recorded step):",
    "end": "When the schedule is over, or at process exit while the capture runs:",
    "range_open": "A labelled range opens in a window (`name`; `handle` is what range_close gets):",
    "range_close": "The range closes (`name`, `handle`):",
    "mark": "A labelled mark in a window (`name`):",
}
SECTIONS: Tuple[str, ...] = tuple(WHEN)


class Plan(NamedTuple):
    """What :meth:`Backend.plan` returns: the code of one capture."""

    sections: Dict[str, str]  # a name of SECTIONS -> Python statements (the names `step`, `name`, `handle` are bound)
    trace_dir: Optional[str] = None  # where traces appear (None: written by an outside tool)
    notes: Tuple[str, ...] = ()  # comments for the reader (dropped or unused settings)


class Backend(abc.ABC):
    """One profiler behind patchkit's vocabulary.  Its name is its module's (``backends/torch.py`` is ``torch``);
    its description, for the reference, is its module's docstring.

    Subclasses define :meth:`probe` and :meth:`plan`, and may set the class attributes and override
    :meth:`check` and :meth:`launch`.
    """

    #: What :meth:`plan` may assume when nothing is probed (``patchkit show``, the reference): the newest API.
    #: An ``"assumed"`` entry is printed above the code as a comment.
    STATIC_FEATURES: ClassVar[Mapping[str, Any]] = {"version": None}
    #: The profiler it drives, as its notes name it ("torch.profiler"); empty: the backend's name.
    PROFILER: ClassVar[str] = ""
    #: The settings its profiler has no equivalent of (names of :mod:`patchkit.core.vocabulary`'s rows): one note
    #: names each one a recipe sets away from its default, and the reference lists them as unused.
    UNUSED: ClassVar[Tuple[str, ...]] = ()
    #: True when every process writes into the one ``save_path`` with its pid in its traces' names (the runtime then
    #: reports only this process's traces as its own).
    PID_IN_TRACE_NAMES: ClassVar[bool] = False
    #: The top-level module its code imports (``"torch_npu"``): ``patchkit attach`` asks a job whether it can import
    #: it before changing anything there, and ``patchkit new`` picks the backend whose library the target's
    #: environment has (:mod:`patchkit.runtime.ready`).  Empty: nothing to ask.
    LIBRARY: ClassVar[str] = ""
    #: The devices it records on (``"cuda"``, ``"npu"``), one of which the job must be using; empty: none needed.
    DEVICES: ClassVar[Tuple[str, ...]] = ()
    #: The item of ``profiler.contents`` that needs one of :attr:`DEVICES` (``"npu"``); empty: they are always needed.
    DEVICE_CONTENT: ClassVar[str] = ""

    @abc.abstractmethod
    def probe(self) -> Dict[str, Any]:
        """Import the profiler library and detect what the installed one accepts (may raise, e.g. ImportError)."""

    @abc.abstractmethod
    def plan(self, settings: Mapping[str, Any], features: Mapping[str, Any], key: str) -> Plan:
        """The code for normalised ``settings``, given ``features`` (:meth:`probe`'s, or :data:`STATIC_FEATURES`)
        and the capture key (``"recipe-id"`` or ``"recipe-id/role"``)."""

    def check(self, settings: Mapping[str, Any]) -> List[str]:
        """What this profiler would get wrong silently with settings that are otherwise valid (standard library
        only: recipes are checked with it, with no profiler installed).  None by default."""
        return []

    def launch(self, settings: Mapping[str, Any]) -> List[str]:
        """How to start the job under the backend's own tool, printed by ``patchkit show`` (nsys).  None by default."""
        return []

    def describe(self) -> str:
        """What the reference says of it: the class's own docstring, else its module's."""
        own = type(self).__dict__.get("__doc__")
        module = sys.modules.get(type(self).__module__)
        return inspect.cleandoc(own or getattr(module, "__doc__", None) or "")
