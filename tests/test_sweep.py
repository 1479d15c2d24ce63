"""scripts/sweep.py: which versions it sweeps, the shape of the inserted lines, the table, each row's result.

Nothing here asks the registry: the versions are given, the releases are the
fixture trees (or, for the real shapes, roots from tests/realwheels.py's cache).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

import patchkit

import realwheels
from conftest import FIXTURES

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "sweep.py"


def _sweep_module():
    spec = importlib.util.spec_from_file_location("patchkit_sweep_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sweep = _sweep_module()
Shape = sweep.Shape


# ---- which versions ------------------------------------------------------------------------------------------

INDEX = """vllm-ascend (0.30.0rc2)
Available versions: 0.30.0rc2, 0.30.0rc1, 0.29.0rc1, 0.24.0rc1, 0.23.0.post1, 0.23.0, 0.9.1
"""


def test_the_registry_s_answer_is_read_and_only_newer_versions_are_swept():
    available = sweep.parse_index_versions(INDEX)
    assert available[:2] == ["0.30.0rc2", "0.30.0rc1"] and len(available) == 7
    assert sweep.parse_index_versions("WARNING: nothing\n") == []
    assert sweep.newer_than(available, "0.23.0") == ["0.23.0.post1", "0.24.0rc1", "0.29.0rc1", "0.30.0rc1",
                                                     "0.30.0rc2"]
    assert sweep.newer_than(available + ["not-a-version", "0.30.0rc2"], "0.30.0rc1") == ["0.30.0rc2"]
    assert sweep.newer_than(available, "0.30.0rc2") == []


def test_the_older_sweep_walks_down_from_the_table_newest_first_one_per_minor_when_sampled():
    available = sweep.parse_index_versions(INDEX) + ["0.8.5rc1", "0.8.4rc2", "0.8.4rc1", "0.7.3.post1", "0.7.3", "x"]
    assert sweep.older_than(available, "0.9.1") == ["0.8.5rc1", "0.8.4rc2", "0.8.4rc1", "0.7.3.post1", "0.7.3"]
    assert sweep.older_than(available, "0.7.3") == []
    assert sweep.newest_of_each_minor(["0.9.1", "0.9.0.1", "0.9.0", "0.8.5.post1", "0.8.5", "0.8.0", "0.7.3"]) == [
        "0.9.1", "0.8.5.post1", "0.7.3"]
    assert sweep.newest_of_each_minor(["0.3.0.post1", "0.3.0.post0", "0.2", "0.1", "0.1rc2"]) == [
        "0.3.0.post1", "0.2", "0.1"]
    assert sweep.SAMPLED == {"vllm": "minor"}  # 300-500 MB wheels; the others are swept release by release


def test_each_recipe_is_tried_below_its_own_oldest_proven_release():
    starts = sweep.older_starts("verl")
    assert starts["verl-engine-update"] == sweep.oldest_proven("verl", patchkit.load(
        "verl-engine-update").recipe.target.versions)
    assert sweep.Version(starts["verl-engine-update"]) > sweep.Version(starts["verl-fsdp-update"])
    assert starts["verl-fsdp-update"] == sweep.oldest_proven("verl", patchkit.load(
        "verl-fsdp-update").recipe.target.versions)
    assert sweep.oldest_proven("vllm-ascend", ">=0.9.1,<0.24") == "0.9.1"
    assert sweep.oldest_proven("vllm-ascend", "<0.5") is None


def test_the_newest_pinned_and_the_proven_release_come_from_the_table():
    pinned = sweep.newest_pinned("vllm-ascend")
    assert pinned == max((r.version for r in realwheels.releases("vllm-ascend")), key=sweep.Version)
    assert sweep.proven_release("vllm-ascend", ">=0.9.1,<0.24") == "0.23.0.post1"
    assert sweep.proven_release("vllm-ascend", ">=0.9.1,<=0.30.0rc2") == "0.30.0rc2"
    assert sweep.proven_release("vllm-ascend", "<0.5") is None


# ---- the shape of the inserted lines ----------------------------------------------------------------------------

PATCHED = '''\
try:  # patchkit:demo
    import patchkit.runtime as _patchkit_runtime  # patchkit:demo
except Exception:  # patchkit:demo
    pass  # patchkit:demo
import os


class Worker:
    @staticmethod
    @_patchkit_runtime.on_exit("demo", lambda self: True)  # patchkit:demo
    def forward(self):
        return 1

    def update(self, batches):
        x = 1
        _patchkit_runtime.start("demo")  # patchkit:demo
        for batch in batches:
            while batch:
                batch = self.step(
                    batch)
                if self.ref: _patchkit_runtime.step("demo")  # patchkit:demo
        match x:
            case 1:
                _patchkit_runtime.step("demo")  # patchkit:demo

    def logprob(self):
        """Words that change from release to release."""
        _patchkit_runtime.start("demo")  # patchkit:demo
'''


def test_the_shape_of_each_inserted_line_leaves_out_line_numbers_and_the_module_header():
    got = sweep.shapes(PATCHED, "demo")
    assert got == [
        Shape("Worker.forward", (), '@_patchkit_runtime.on_exit("demo", lambda self: True) # patchkit:demo',
              "@staticmethod"),
        Shape("Worker.update", (), '_patchkit_runtime.start("demo") # patchkit:demo', "x = 1"),
        Shape("Worker.update", ("for batch in batches:", "while batch:"),
              'if self.ref: _patchkit_runtime.step("demo") # patchkit:demo', "batch = self.step(batch)"),
        Shape("Worker.update", (), '_patchkit_runtime.step("demo") # patchkit:demo', "case 1:"),
        Shape("Worker.logprob", (), '_patchkit_runtime.start("demo") # patchkit:demo', "(docstring)"),
    ]
    moved = "\n\n\n" + PATCHED.replace("import os\n", "import os\nimport sys\n").replace(
        "batch = self.step(\n                    batch)", "batch = self.step(batch)  # reformatted").replace(
        "Words that change", "Other words")
    assert sweep.shapes(moved, "demo") == got  # other lines elsewhere, layout, comments, docstrings: the same shape
    assert sweep.shapes(PATCHED, "other") == []


def test_compare_names_the_first_difference():
    base = sweep.shapes(PATCHED, "demo")
    assert sweep.compare(base, list(base), "1.0") == ("same", "")
    assert sweep.compare(base, base[:2], "1.0") == ("differs", "2 inserted line(s), 5 on 1.0")
    moved = [base[0], base[1]._replace(before="y = 2")] + base[2:]
    assert sweep.compare(base, moved, "1.0") == ("differs", "line 2, before: 'y = 2' (on 1.0: 'x = 1')")
    deeper = base[:2] + [base[2]._replace(loops=("for batch in batches:",))] + base[3:]
    assert sweep.compare(base, deeper, "1.0") == (
        "differs", "line 3, loops: 'for batch in batches:' (on 1.0: 'for batch in batches: / while batch:')")
    longer = [base[0]._replace(text=base[0].text.replace("lambda self:", "lambda self, forward_batch, n=1:"))]
    assert sweep.compare(base[:1], longer, "1.0") == (  # from a little before where they part
        "differs", "line 1, text: '...o\", lambda self, forward_batch, n=1: True) # patch...' "
                   "(on 1.0: '...o\", lambda self: True) # patchkit:demo')")


def test_the_real_vllm_ascend_worker_keeps_its_shape_from_0_23_0_to_0_24_0rc1():
    """Roots from the real-target cache; 0.24.0rc1 dropped a line above the call, not the ones around it."""
    got = {}
    for version in ("0.23.0", "0.24.0rc1"):
        root = realwheels.release_root("vllm-ascend", version)
        plan = patchkit.plan_recipe("vllm-ascend-decode", root=str(root))
        got[version] = sweep.shapes(plan.files[0].result.text, "vllm-ascend-decode")
    assert [s.scope for s in got["0.23.0"]] == ["NPUWorker.execute_model"] * 2
    assert got["0.23.0"][1].before == "output = self.model_runner.execute_model(scheduler_output, intermediate_tensors)"
    assert sweep.compare(got["0.23.0"], got["0.24.0rc1"], "0.23.0") == ("same", "")


# ---- the table -----------------------------------------------------------------------------------------------

def test_the_table_aligns_its_columns_and_puts_the_note_last():
    rows = [sweep.Row("vllm-ascend-decode", "0.30.0rc2", "beyond (note)", "ok", "same", "proven on >=0.9.1,<0.24"),
            sweep.Row("verl-fsdp-update", "0.9.1", "refused", "ok", "n/a", "none of the recipe's files is in <root>")]
    assert sweep.table(rows) == (
        "RECIPE              VERSION    RESULT         EXAMPLES  SHAPE  NOTE\n"
        "vllm-ascend-decode  0.30.0rc2  beyond (note)  ok        same   proven on >=0.9.1,<0.24\n"
        "verl-fsdp-update    0.9.1      refused        ok        n/a    none of the recipe's files is in <root>\n")
    assert sweep.table([sweep.Row("a", "1", "applies", "ok", "same")]).splitlines()[1] == "a       1        applies  ok        same"
    older = [sweep.Row("a", "0.1", "placed", "ok", "same", "", "exact"),
             sweep.Row("a", "0.0", "no target", "ok", "n/a", "none of x.py: older releases not tried", "n/a")]
    assert sweep.table(older) == (  # the older sweep's REVERT column, before NOTE
        "RECIPE  VERSION  RESULT     EXAMPLES  SHAPE  REVERT  NOTE\n"
        "a       0.1      placed     ok        same   exact\n"
        "a       0.0      no target  ok        n/a    n/a     none of x.py: older releases not tried\n")


# ---- each row's result -------------------------------------------------------------------------------------------

def _release(tree, version):
    """fixtures/vllm-ascend-0.23 with its METADATA saying ``version``."""
    root = tree("vllm-ascend-0.23")
    (meta,) = root.glob("*.dist-info/METADATA")
    meta.write_text(meta.read_text().replace("Version: 0.23.0", "Version: " + version))
    return root


def _recipe(tmp_path, versions):
    text = patchkit.recipe_path("vllm-ascend-decode").read_text()
    old = patchkit.load("vllm-ascend-decode").recipe.target.versions
    path = tmp_path / "mine" / "vllm-ascend-decode.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(text.replace('versions: "%s"' % old, 'versions: "%s"' % versions))
    return str(path)


def test_a_release_is_applied_beyond_or_refused_as_its_version_and_its_code_say(tmp_path, tree):
    root = _release(tree, "0.23.0")
    assert sweep.try_recipe(_recipe(tmp_path, ">=0.9.1,<0.25"), ">=0.9.1,<0.25", "0.23.0", root)[:2] == ("applies", "")
    mine = _recipe(tmp_path / "older", ">=0.24")
    result, note, plan = sweep.try_recipe(mine, ">=0.24", "0.23.0", root)  # older than the range: no retry
    assert (result, plan) == ("refused", None) and "vllm-ascend 0.23.0 is installed" in note
    mine = _recipe(tmp_path / "newer", ">=0.9.1,<0.20")
    result, note, plan = sweep.try_recipe(mine, ">=0.9.1,<0.20", "0.23.0", root)
    assert result == "beyond (note)" and plan.files and "is newer than the releases" in note
    (root / "vllm_ascend/worker/worker.py").write_text("class NPUWorker:\n    pass\n")
    result, note, plan = sweep.try_recipe(mine, ">=0.9.1,<0.20", "0.23.0", root)
    assert (result, plan) == ("refused", None) and "execute_model" in note  # the points do not fit


class _Plan:
    def __init__(self, note=""):
        self.files = []
        if note:
            self.version_note = note


def test_the_beyond_case_is_the_plan_s_note(monkeypatch):
    monkeypatch.setattr(sweep.patchkit, "plan_recipe", lambda *a, **k: _Plan("vllm-ascend 0.31.0 is newer than\n proven"))
    assert sweep.try_recipe("r", "<=0.30", "0.31.0", Path("."))[:2] == ("beyond (note)", "vllm-ascend 0.31.0 is newer than proven")
    monkeypatch.setattr(sweep.patchkit, "plan_recipe", lambda *a, **k: _Plan())
    assert sweep.try_recipe("r", "<=0.30", "0.3", Path("."))[:2] == ("applies", "")


def test_a_sweep_of_one_release_gives_one_row_per_recipe(tmp_path, tree, monkeypatch):
    """The fetches answered from a fixture tree: no registry, no cache."""
    root = _release(tree, "9.0.0")
    proven = tmp_path / "proven"
    shutil.copytree(FIXTURES / "vllm-ascend-0.23", proven)
    monkeypatch.setattr(sweep.realwheels, "fetch_release", lambda rel, optional=(): {"root": root, "cached": True})
    monkeypatch.setattr(sweep.realwheels, "release_root", lambda dist, version: proven)
    rows, shapes_from = sweep.sweep("vllm-ascend", ["9.0.0"])
    (row,) = rows
    assert row.recipe == "vllm-ascend-decode" and row.version == "9.0.0" and row.result.startswith("beyond")
    assert (row.examples, row.shape) == ("ok", "same")
    assert shapes_from == {"vllm-ascend-decode": sweep.proven_release(
        "vllm-ascend", patchkit.load("vllm-ascend-decode").recipe.target.versions)}


def test_an_older_release_is_tried_with_the_version_check_skipped_and_a_refusal_names_the_point(tmp_path, tree):
    root = _release(tree, "0.1.0")  # far older than the range: placed by the structure alone
    result, note, plan = sweep.try_recipe("vllm-ascend-decode", "", "0.1.0", root, skip_version_check=True)
    assert (result, note) == ("placed", "") and plan.files and plan.version_skipped
    assert sweep.try_recipe("vllm-ascend-decode", "", "0.1.0", root)[0] == "refused"  # without the skip: the version
    (root / "vllm_ascend/worker/worker.py").write_text("class NPUWorker:\n    def load_model(self):\n        pass\n")
    result, note, plan = sweep.try_recipe("vllm-ascend-decode", "", "0.1.0", root, skip_version_check=True)
    assert (result, plan) == ("refused", None)
    assert note.startswith("vllm_ascend/worker/worker.py:") and "execute_model" in note and "0.1.0 is installed" \
        not in note and str(root) not in note


def test_apply_then_revert_is_checked_byte_for_byte_on_a_copy(tree):
    root = _release(tree, "0.1.0")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert sweep.reverts_exactly("vllm-ascend-decode", root) == "exact"
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before  # the release itself untouched
    (root / "vllm_ascend/worker/worker.py").write_text("class NPUWorker:\n    pass\n")
    got = sweep.reverts_exactly("vllm-ascend-decode", root)
    assert got.startswith("n/a (") and "execute_model" in got


def test_an_older_sweep_stops_each_recipe_at_the_first_release_without_its_files(tmp_path, tree, monkeypatch):
    """Newest first: placed and the same shape, then refused at a point, then no file: nothing older is fetched."""
    roots = {"0.3.0": _release(tree, "0.3.0")}  # older than any release of the table
    broken = tmp_path / "broken"
    shutil.copytree(roots["0.3.0"], broken)
    (broken / "vllm_ascend/worker/worker.py").write_text("class NPUWorker:\n    pass\n")
    roots["0.2.0"] = broken
    bare = tmp_path / "bare"
    shutil.copytree(roots["0.3.0"], bare)
    shutil.rmtree(bare / "vllm_ascend/worker")
    roots["0.1.0"] = bare
    proven = tmp_path / "proven"
    shutil.copytree(FIXTURES / "vllm-ascend-0.23", proven)
    fetched = []

    def fetch(rel, optional=()):
        fetched.append(rel.version)
        assert "vllm_ascend/worker/worker.py" in optional and not rel.files
        return {"root": roots[rel.version], "cached": True}

    monkeypatch.setattr(sweep.realwheels, "fetch_release", fetch)
    monkeypatch.setattr(sweep.realwheels, "release_root", lambda dist, version: proven)
    rows, shapes_from = sweep.sweep_older("vllm-ascend", ["0.3.0", "0.2.0", "0.1.0", "0.0.1"])
    assert fetched == ["0.3.0", "0.2.0", "0.1.0"]
    assert [(r.version, r.result, r.shape, r.revert) for r in rows] == [
        ("0.3.0", "placed", "same", "exact"), ("0.2.0", "refused", "n/a", "n/a"), ("0.1.0", "no target", "n/a", "n/a")]
    assert rows[1].note.startswith("vllm_ascend/worker/worker.py:") and "execute_model" in rows[1].note
    assert rows[2].note == ("none of vllm_ascend/worker/worker_v1.py, vllm_ascend/worker/worker.py: older releases "
                            "not tried")
    assert shapes_from == {"vllm-ascend-decode": min(  # the oldest proven release of the table
        (r.version for r in realwheels.releases("vllm-ascend")), key=sweep.Version)}


def test_the_command_line_going_backwards(monkeypatch, capsys):
    with pytest.raises(SystemExit) as info:
        sweep.main(["--package", "vllm", "--sample", "minor"])
    assert info.value.code == 2 and "--sample needs --older" in capsys.readouterr().err
    asked = []

    def older(dist, versions):
        asked.append(versions)
        return [sweep.Row("vllm-decode", versions[-1], "no target", "ok", "n/a", "none of x: older releases not tried",
                          "n/a")], {"vllm-decode": "0.9.2"}

    monkeypatch.setattr(sweep, "sweep_older", older)
    monkeypatch.setattr(sweep, "registry_versions", lambda dist: ["0.9.1", "0.9.0", "0.8.5.post1", "0.8.5", "9.9"])
    start = sweep.older_starts("vllm")["vllm-decode"]
    assert sweep.main(["--package", "vllm", "--older", "--json"]) == 0
    assert asked[-1] == [v for v in ["0.9.1", "0.8.5.post1"] if sweep.Version(v) < sweep.Version(start)]
    out = json.loads(capsys.readouterr().out)
    assert out["packages"][0]["proven_from"] == start and out["packages"][0]["stopped"] == {"vllm-decode": "0.8.5.post1"}
    assert out["rows"][0]["revert"] == "n/a"
    assert sweep.main(["--package", "vllm", "--older", "--sample", "all"]) == 0
    assert asked[-1] == ["0.9.1", "0.9.0", "0.8.5.post1", "0.8.5"]
    printed = capsys.readouterr().out
    assert "vllm: oldest proven in the tests %s; swept 0.8.5" % start in printed
    assert "vllm-decode: stopped at 0.8.5, which has none of its files" in printed and "REVERT" in printed


def test_the_command_line(monkeypatch, capsys):
    with pytest.raises(SystemExit) as info:
        sweep.main(["--versions", "1.0"])
    assert info.value.code == 2 and "--versions needs --package" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        sweep.main(["--package", "numpy"])
    assert info.value.code == 2 and "numpy is not a target of tests/realwheels.py" in capsys.readouterr().err

    def failing(dist):
        raise RuntimeError("pip index versions --pre %s: exit 1" % dist)

    monkeypatch.setattr(sweep, "registry_versions", failing)
    assert sweep.main(["--package", "vllm"]) == 1
    monkeypatch.setattr(sweep, "registry_versions", lambda dist: ["0.1.0", sweep.newest_pinned(dist)])
    assert sweep.main(["--package", "vllm"]) == 0
    assert "vllm: newest in the tests %s; swept nothing (none newer)" % sweep.newest_pinned("vllm") in capsys.readouterr().out
    rows = [sweep.Row("vllm-decode", "9.0", "refused", "ok", "n/a", "why")]
    monkeypatch.setattr(sweep, "sweep", lambda dist, versions: (rows, {"vllm-decode": "0.33.0"}))
    assert sweep.main(["--package", "vllm", "--versions", "9.0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["packages"] == [{"package": "vllm", "newest_pinned": sweep.newest_pinned("vllm"), "versions": ["9.0"],
                                "shapes_from": {"vllm-decode": "0.33.0"}}]
    assert out["rows"] == [{"recipe": "vllm-decode", "version": "9.0", "result": "refused", "examples": "ok",
                            "shape": "n/a", "note": "why", "revert": ""}]
    assert sweep.main(["--package", "vllm", "--versions", "9.0"]) == 0
    printed = capsys.readouterr().out
    assert "shapes compared with: vllm-decode 0.33.0" in printed and "vllm-decode  9.0      refused" in printed


def test_the_script_runs_as_a_program():
    import subprocess

    done = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "--package" in done.stdout and "--versions" in done.stdout
    assert "--older" in done.stdout and "--sample" in done.stdout
