"""errors: every error a user can fix renders as `PATH:LINE:COL: message` and a hint, and exits 1."""

from __future__ import annotations

from patchkit.core.errors import (
    AnchorError, LedgerError, Location, LockedError, OverrideError, PatchkitError, RecipeError, TargetError,
    TraceError,
)


def test_a_location_prints_as_much_as_it_knows():
    assert str(Location("r.yaml", 3, 7)) == "r.yaml:3:7"
    assert str(Location("r.yaml", 3)) == "r.yaml:3"
    assert str(Location("r.yaml")) == "r.yaml"


def test_an_error_renders_its_place_message_and_hint():
    err = RecipeError("unknown key 'x'", Location("r.yaml", 2, 1), "valid keys: a, b")
    assert err.render() == "r.yaml:2:1: unknown key 'x'\n  hint: valid keys: a, b"
    assert str(err) == "unknown key 'x'" and err.exit_code == 1
    assert TargetError("no package verl").render() == "no package verl"


def test_the_hierarchy_lets_callers_catch_by_kind():
    for cls in (RecipeError, OverrideError, TargetError, AnchorError, LedgerError, LockedError, TraceError):
        assert issubclass(cls, PatchkitError) and cls.title and cls.exit_code == 1
    assert issubclass(OverrideError, RecipeError) and issubclass(LockedError, LedgerError)
    assert len({cls.title for cls in (RecipeError, OverrideError, TargetError, AnchorError, LedgerError, LockedError,
                                      TraceError)}) == 7


def test_a_name_from_someone_elses_file_cannot_reach_the_terminal_raw():
    from patchkit.core.errors import Location, TraceError

    error = TraceError("bad operator \x1b]0;owned\x07\rrank 0: fine", Location("/x/\x1b[2Jtrace.json", 3),
                       "move it\naside")
    assert error.render() == ("/x/\\x1b[2Jtrace.json:3: bad operator \\x1b]0;owned\\x07\\x0drank 0: fine\n"
                              "  hint: move it\naside")
