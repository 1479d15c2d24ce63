"""runtime.attach.loaded: a module whose file changed since the job imported it is told apart from one that did not,
by its compiled copy's size and time and by its functions compiled afresh."""

from __future__ import annotations

import importlib
import importlib.util
import os
import py_compile
import sys
import time

from patchkit.runtime.attach.loaded import changed_function, pyc_problem

SOURCE = "class Trainer:\n    def step(self, i):\n        return i + 1\n\n\ndef helper():\n    return 2\n"


def imported(tmp_path, name):
    (tmp_path / f"{name}.py").write_text(SOURCE)
    py_compile.compile(str(tmp_path / f"{name}.py"), cfile=importlib.util.cache_from_source(str(tmp_path / f"{name}.py")))
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))
    return module, str((tmp_path / f"{name}.py").resolve())


def test_an_unchanged_module_has_no_problem(tmp_path):
    module, path = imported(tmp_path, "pkloaded_same")
    source = open(path, "rb").read()
    assert pyc_problem(module, path, source) == ""
    assert changed_function(module, compile(source, path, "exec", dont_inherit=True), path) == ""


def test_a_file_written_since_the_import_is_told_by_its_compiled_copy_and_its_functions(tmp_path):
    module, path = imported(tmp_path, "pkloaded_changed")
    time.sleep(1.1)  # another time than the compiled copy records
    changed = SOURCE.replace("return i + 1", "return i + 2")
    with open(path, "w") as handle:
        handle.write(changed)
    source = changed.encode()
    assert "size and time" in pyc_problem(module, path, source)
    assert changed_function(module, compile(source, path, "exec", dont_inherit=True), path) == "Trainer.step differs"


def test_no_compiled_copy_leaves_the_functions_to_decide(tmp_path):
    module, path = imported(tmp_path, "pkloaded_nopyc")
    cached = module.__spec__.cached
    if cached and os.path.exists(cached):
        os.unlink(cached)
    assert pyc_problem(module, path, open(path, "rb").read()) == ""
