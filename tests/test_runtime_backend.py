"""patchkit.runtime.backend: what a backend is, as a type (each backend found is held to it in test_backends.py)."""

from __future__ import annotations

import pytest

from patchkit.runtime.backend import SECTIONS, WHEN, Backend, Plan


class Least(Backend):
    def probe(self):
        return {"version": "1"}

    def plan(self, settings, features, key):
        return Plan(sections={"advance": "pass\n"})


class Described(Least):
    """A backend that says what it is."""


def test_a_backend_without_probe_or_plan_cannot_be_made():
    with pytest.raises(TypeError, match="abstract"):
        Backend()  # type: ignore[abstract]

    class NoPlan(Backend):
        def probe(self):
            return {}

    with pytest.raises(TypeError, match="plan"):
        NoPlan()  # type: ignore[abstract]


def test_the_least_backend_takes_every_setting_checks_nothing_and_launches_nothing():
    least = Least()
    assert least.STATIC_FEATURES == {"version": None} and least.UNUSED == () and least.PROFILER == ""
    assert least.check({}) == [] and least.launch({}) == [] and not least.PID_IN_TRACE_NAMES


def test_a_backend_is_described_by_its_class_s_docstring_else_its_module_s():
    assert Described().describe() == "A backend that says what it is."
    assert Least().describe() == __doc__


def test_a_plan_is_sections_and_by_default_no_trace_folder_and_no_notes():
    assert Plan(sections={}) == Plan({}, None, ())
    assert SECTIONS == tuple(WHEN) and SECTIONS[0] == "create" and "advance" in SECTIONS
