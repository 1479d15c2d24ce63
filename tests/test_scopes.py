"""state.scopes: attach plans a file with only the functions its points are in.  The code of each target function
comes out equal (bytecode, constants, names, line numbers: ``==`` on code objects) to the whole file's, for every
built-in recipe on every fixture it plans on; lines keep their numbers; what ast cannot read is given back whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.core.model import Point
from patchkit.state.scopes import only
from patchkit.runtime.attach.swap import code_at, outer_path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = sorted(p for p in (REPO / "fixtures").iterdir() if p.is_dir())
RECIPES = sorted(p.stem for p in (REPO / "recipes").glob("*.yaml"))

TEXT = '''"""doc"""
from __future__ import annotations
import os

X = 1


@decorated(
    1)
def helper():
    return 1


class Trainer:
    size = 2

    def other(self):
        return 0

    @staticmethod
    def step(i):
        return i


class Other:
    def step(self):
        pass
'''


def point(cls, method):
    return Point(cls=cls, method=method, at="method_start")


def test_other_functions_and_classes_are_blanked_and_lines_keep_their_numbers():
    out = only(TEXT, [point("Trainer", "step")])
    assert len(out.splitlines()) == len(TEXT.splitlines())
    kept = [ln for ln in out.splitlines() if ln.strip()]
    assert kept == ['"""doc"""', "from __future__ import annotations", "import os", "X = 1", "class Trainer:",
                    "    size = 2", "    @staticmethod", "    def step(i):", "        return i"]
    assert out.splitlines().index("    def step(i):") == TEXT.splitlines().index("    def step(i):")
    compile(out, "<scoped>", "exec")


def test_a_top_level_function_keeps_its_decorators():
    out = only(TEXT, [point(None, "helper")])
    assert "@decorated(" in out and "    1)" in out and "class Trainer" not in out


@pytest.mark.parametrize("text", ["def f(:\n", "x = 1; def f(): pass\n", "class A: pass; x = 1\n"])
def test_what_cannot_be_blanked_line_by_line_is_given_back_whole(text):
    assert only(text, [point(None, "g")]) == text


def test_line_endings_are_kept():
    text = TEXT.replace("\n", "\r\n")
    out = only(text, [point("Trainer", "step")])
    assert out.count("\r\n") == text.count("\r\n")


def _plans():
    from patchkit.recipe.load import load
    from patchkit.state.planning import plan

    for rid in RECIPES:
        settings = load(rid, [], None)
        for fixture in FIXTURES:
            if not (fixture / settings.recipe.target.package).is_dir():
                continue
            try:
                whole = plan(settings, str(fixture), skip_version_check=True)
            except Exception:  # noqa: BLE001 - this recipe does not fit this fixture: nothing to compare
                continue
            yield rid, fixture.name, whole, plan(settings, str(fixture), skip_version_check=True, scopes_only=True)


def test_every_target_function_s_code_equals_the_whole_file_s_on_every_fixture():
    compared = 0
    for rid, fixture, whole, scoped in _plans():
        for a, b in zip(whole.files, scoped.files):
            assert a.path == b.path and a.data == b.data
            assert len([ln for ln in b.result.text.splitlines() if ln.strip()]) < \
                len([ln for ln in a.result.text.splitlines() if ln.strip()])  # other functions are left out
            full, part = (compile(f.result.text, str(f.path), "exec", dont_inherit=True) for f in (a, b))
            for target in {(p.cls, p.method, p.nested) for p in a.points}:
                mine, theirs = code_at(full, outer_path(target)), code_at(part, outer_path(target))
                assert mine and mine == theirs, f"{rid} on {fixture}: {target}"
                compared += 1
    assert compared >= 20  # the built-in recipes on the fixtures they fit
