"""runtime/program.py: a backend's plan as one Program, rendered without importing a profiler, and its notes."""

from __future__ import annotations

import pytest

from patchkit.runtime import program as prog
from patchkit.runtime.settings import DEFAULTS


def settings(**kw):
    return {**DEFAULTS, **kw}


def test_render_imports_nothing_and_names_the_settings_the_backend_has_no_equivalent_of():
    text = prog.render(settings(backend="nsys", level="level1"), key="r")
    assert "torch.cuda.profiler.start()" in text and "nvtx.range_push('r'" in text
    built = prog.program(settings(backend="nsys", level="level1"), "r", features={})
    assert any("level" in note for note in built.notes)  # nsys has no level: said, not silently dropped
    assert not any("level" in note for note in prog.program(settings(backend="nsys"), "r", features={}).notes)


def test_render_refuses_invalid_settings_with_every_problem():
    with pytest.raises(ValueError) as err:
        prog.render(settings(backend="torch", wait=-1, active=0))
    assert "wait" in str(err.value) and "active" in str(err.value)


def test_a_program_without_a_key_is_named_patchkit_and_knows_its_sections():
    built = prog.program(settings(backend="nsys"), features={})
    assert built.named is False and built.has("window_open") and not built.has("no such section")


def test_call_writes_one_argument_per_line():
    assert prog.call("f", []) == ["f()"]
    assert prog.call("f", ["a=1", "b"], "  ") == ["  f(", "      a=1,", "      b,", "  )"]
