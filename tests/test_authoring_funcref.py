"""A function named on the command line, found on disk without importing its package."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from patchkit.core.errors import AnchorError, TargetError
from patchkit.authoring.funcref import distribution_of, parse, read_outline, resolve

import realwheels

OWN = Path(__file__).resolve().parent / "own_code" / "installed"


def test_the_three_ways_to_name_a_function():
    assert parse("a.b:C.m") == ("a.b", None, "C.m")
    assert parse("a:f") == ("a", None, "f")
    assert parse("x/y.py::C.m.inner") == (None, "x/y.py", "C.m.inner")


@pytest.mark.parametrize("bad", ["a.b", "a.b:", "a b:f", ":f", "a:C.m.i.j", "a:1x", "x.py::"])
def test_anything_else_is_refused_with_the_forms(bad):
    with pytest.raises(TargetError) as caught:
        parse(bad)
    assert "module:Class.method" in caught.value.hint


def test_a_module_under_root_gives_file_package_distribution_and_version():
    ref = resolve("tinytrain.loop:Trainer.fit", str(OWN))
    assert ref.path == OWN / "tinytrain" / "loop.py" and ref.relpath == "tinytrain/loop.py"
    assert (ref.package, ref.distribution, ref.installed.version) == ("tinytrain", "tiny-train", "1.2.0")
    package = resolve("tinytrain:X", str(OWN))
    assert package.relpath == "tinytrain/__init__.py"


def test_a_real_release_is_found_the_same_way():
    root = realwheels.release_root("vllm", "0.33.0")
    ref = resolve("vllm.v1.worker.gpu_worker:Worker.execute_model", str(root))
    assert ref.relpath == "vllm/v1/worker/gpu_worker.py" and ref.installed.version == "0.33.0"
    assert distribution_of(realwheels.release_root("vllm-ascend", "0.23.0"), "vllm_ascend") == "vllm-ascend"


def test_a_file_path_finds_its_package_above_it():
    ref = resolve(f"{OWN}/tinytrain/loop.py::evaluate")
    assert (ref.module, ref.package, ref.relpath, ref.installed.version) == ("tinytrain.loop", "tinytrain",
                                                                            "tinytrain/loop.py", "1.2.0")


def test_a_file_in_no_package_is_read_but_names_no_package(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("def main():\n    work()\n")
    ref = resolve(f"{script}::main")
    assert ref.package == "" and ref.installed is None
    found, _ = read_outline(ref)
    assert [e.kind for e in found.entries] == ["def", "call", "end"]


def test_in_this_environment_the_package_is_found_by_find_spec_without_import(monkeypatch):
    monkeypatch.syspath_prepend(str(OWN))
    monkeypatch.delenv("PATCHKIT_ROOT", raising=False)
    ref = resolve("tinytrain.loop:evaluate")
    assert ref.path == OWN / "tinytrain" / "loop.py" and "tinytrain.loop" not in sys.modules


def test_what_is_not_there_says_where_it_looked(tmp_path):
    with pytest.raises(TargetError, match="no module nothere.x under"):
        resolve("nothere.x:f", str(OWN))
    with pytest.raises(TargetError, match=r"no tinytrain/nope.py nor tinytrain/nope/__init__.py"):
        resolve("tinytrain.nope:f", str(OWN))
    with pytest.raises(TargetError, match="no file"):
        resolve(f"{tmp_path}/none.py::f")
    with pytest.raises(AnchorError) as caught:
        read_outline(resolve("tinytrain.loop:Trainer.fitt", str(OWN)))
    assert "class Trainer has no method fitt" in caught.value.message
    assert caught.value.where.path.endswith("loop.py") and "`Trainer.fit`" in caught.value.hint


def test_a_file_path_is_read_under_the_root_and_its_absence_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHKIT_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)
    ref = resolve("tinytrain/loop.py::evaluate", str(OWN))  # not in the current folder: under --root
    assert ref.path == OWN / "tinytrain" / "loop.py" and ref.package == "tinytrain"
    with pytest.raises(TargetError) as caught:
        resolve("tinytrain/nope.py::f", str(OWN))
    assert caught.value.message == (f"no file tinytrain/nope.py under --root {OWN} "
                                    f"(looked for {OWN / 'tinytrain' / 'nope.py'})")
    (tmp_path / "mine.py").write_text("def f():\n    work()\n")
    with pytest.raises(TargetError) as caught:  # a path from here, with a root given: the hint names both
        resolve("mine.py::f", str(OWN))
    assert f"under --root {OWN}" in caught.value.message
    assert "mine.py is a file from the current folder" in caught.value.hint and f"{tmp_path / 'mine.py'}::f" in \
        caught.value.hint
    assert resolve("mine.py::f").path == tmp_path / "mine.py"  # no root: from the current folder
    with pytest.raises(TargetError, match=f"no file gone.py from the current folder {tmp_path}"):
        resolve("gone.py::f")
    monkeypatch.setenv("PATCHKIT_ROOT", str(OWN))
    assert resolve("tinytrain/loop.py::evaluate").path == OWN / "tinytrain" / "loop.py"
    with pytest.raises(TargetError, match=r"under \$PATCHKIT_ROOT"):
        resolve("mine.py::f")


def test_a_module_that_is_a_link_out_of_the_package_is_named_where_the_recipe_finds_it(tmp_path):
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("")
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text("def g():\n    work()\n")
    (site / "pkg" / "linked.py").symlink_to(elsewhere)
    ref = resolve("pkg.linked:g", str(site))
    assert ref.relpath == "pkg/linked.py" and ref.path.resolve() == elsewhere
    assert [e.kind for e in read_outline(ref)[0].entries] == ["def", "call", "end"]
