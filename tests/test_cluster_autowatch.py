"""`patchkit attach --ray ADDRESS --match TEXT --auto`: each node watches its own processes, the first clear step's
recipe comes back and is attached on every node.  A node's answer is bounded text, and the recipe it wrote is
taken only as --auto writes one: no node hands the others a guard (code) of its own.  On a real one-node
cluster, with the project's nested-loop trainer: one optimizer step a span."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

import attach_helpers as helpers
import autojobs
from patchkit.cluster import autowatch

CANNOT_TRACE = helpers.gdb_missing() or helpers.ptrace_denied()

RECIPE = textwrap.dedent('''\
    id: auto-train
    description: one step per turn of the loop over loader in train
    target:
      script: train.py
    backend: torch
    points:
      - function: train
        at: loop_start
        loop: {iter: loader}
    ''')


def test_a_node_s_answer_is_bounded_text():
    assert autowatch.checked(["x"])["state"] == autowatch.FAILED
    assert autowatch.checked({"state": "pwned"})["state"] == autowatch.FAILED
    said = autowatch.checked({"state": "found", "lines": ["a" * 5000, 7, "b"], "recipe": "x" * (autowatch.LONG + 1),
                              "name": "auto-train"})
    assert said["lines"] == ["a" * (autowatch.TEXT * 4), "b"] and said["recipe"] == "" and said["name"] == "auto-train"
    for name in ("../../etc/cron.d/x", "/tmp/x", "a/b", 7):  # a name is a recipe id, never a path
        assert autowatch.checked({"state": "found", "name": name})["name"] == ""


def test_the_recipe_an_auto_watch_writes_is_taken_and_written_never_over_a_file(tmp_path):
    path = tmp_path / "auto-train.yaml"
    assert autowatch.taken(RECIPE, str(path)) is None and path.read_text() == RECIPE
    with pytest.raises(FileExistsError):
        autowatch.taken(RECIPE, str(path))


@pytest.mark.parametrize("change,why", [
    (("at: loop_start\n", "at: loop_start\n    guard: len(epoch) > 0\n"), "not a recipe attach --auto"),
    (("at: loop_start\n", "at: loop_start\n    guard: __import__('os').system('id')\n"), "does not load"),
    (("    loop: {iter: loader}\n", "    loop: {iter: loader}\n  - {function: train, at: method_start}\n"),
     "not a recipe attach --auto"),
    (("    loop: {iter: loader}\n", "    loop: {iter: loader}\n    action: start\n"),
     "not a recipe attach --auto"),
    (("id: auto-train", "id: [x"), "does not load"),
    (("backend: torch\n", "backend: torch\nguard: self.x\n"), "not a recipe attach --auto"),
])
def test_any_other_recipe_from_a_node_is_refused_and_nothing_written(tmp_path, change, why):
    text = RECIPE.replace(*change)
    assert text != RECIPE
    path = tmp_path / "auto-train.yaml"
    assert why in autowatch.taken(text, str(path)) and not path.exists()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from raycluster import one_node

    home = tmp_path_factory.mktemp("node-home")
    with one_node({"PATCHKIT_HOME": str(home)}) as address:
        yield address


@pytest.mark.skipif(bool(CANNOT_TRACE), reason=CANNOT_TRACE or "")
def test_every_node_watches_and_records_the_step_it_found(cluster, tmp_path, jobs):
    job = autojobs.start("nested", tmp_path)
    jobs.append(job)
    job.wait_steps(3)
    done = helpers.attach(tmp_path, ["--ray", cluster, "--match", job.log, "--auto", "--steps", "3", "--json",
                                     f"profiler.save_path={tmp_path / 'traces'}"])
    assert done.returncode == 0, done.stderr
    assert "found" in done.stderr and "chosen 1: each turn of the loop at line 69 of train" in done.stderr
    assert (tmp_path / "auto-train.yaml").is_file()
    (node,) = json.loads(done.stdout)
    (proc,) = node["processes"]
    assert proc["state"] == "restored" and proc["original_code"] is True
    (trace,) = proc["captures"][0]["traces"]
    assert [c.get(autojobs.OPTIMIZER) for _, c in autojobs.labels_per_span(trace)] == [1, 1, 1]
    assert os.path.dirname(trace) == str(tmp_path / "traces")


@pytest.mark.skipif(bool(CANNOT_TRACE), reason=CANNOT_TRACE or "")
def test_no_clear_step_on_any_node_records_nothing(cluster, tmp_path, jobs):
    idle = tmp_path / "idle.py"
    idle.write_text("import time\nwhile True:\n    time.sleep(1)\n")
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, str(idle)])
    jobs.append(type("Idle", (), {"kill": lambda self: (proc.kill(), proc.wait())})())
    done = helpers.attach(tmp_path, ["--ray", cluster, "--match", str(idle), "--auto", "--watch", "2"])
    assert done.returncode == 1 and "no node found a step to record" in done.stderr, done.stderr
    assert "no step is clear" in done.stderr and list(Path(tmp_path).glob("*.yaml")) == []
