"""attach.payload: the window of --steps steps, the request planned by the engine (refused for applied files and
nested or property functions a point decorates; a decorating point's decorators travel as text), and the private
folder it travels in, owned by the job's user where root attaches."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path

import pytest

import attach_helpers as helpers
from patchkit.attach import payload
from patchkit.attach.process import AttachError, Process
from script_helpers import script_recipe

REPO = Path(__file__).resolve().parent.parent


def test_the_window_is_the_next_steps_and_a_schedule_of_one_s_own_is_refused(tmp_path):
    path = str(helpers.recipe(tmp_path, "logged"))
    s = payload.settings(path, ["profiler.ranks=[0]"], "torch", 3)
    assert s.recipe.schedule.steps == (0, 1, 2) and s.recipe.schedule.trigger == "schedule"
    assert s.recipe.profiler.ranks == (0,)
    with pytest.raises(AttachError, match="schedule.wait=2: attach records the next --steps steps"):
        payload.settings(path, ["schedule.wait=2"], None, 3)
    with pytest.raises(AttachError, match="1 to 1000 steps"):
        payload.settings(path, [], None, 1001)


def test_the_request_holds_each_module_s_instrumented_text_the_hash_of_its_file_and_its_targets(tmp_path):
    site = helpers.site(tmp_path)
    s = payload.settings(str(helpers.recipe(tmp_path, "closure")), [], None, 2)
    spec = payload.request(s, 2, str(site))
    (module,) = spec["modules"]
    train = site / "pkjob" / "train.py"
    assert module["name"] == "pkjob.train" and module["file"] == str(train.resolve())
    assert module["sha256"] == hashlib.sha256(train.read_bytes()).hexdigest()
    assert module["targets"] == [[None, "closure_loop", "step"]] and module["relpath"] == "pkjob/train.py"
    assert '_patchkit_runtime.start("pkjob-closure")' in module["instrumented"]
    assert "configure(\"pkjob-closure\"" in spec["header"] and "steps=(0, 1)" in spec["header"]
    assert spec["recipe"] == "pkjob-closure" and spec["steps"] == 2 and spec["lines"] == 2 and spec["version"] == "1.0"
    json.dumps(spec)  # it travels as JSON


def test_a_decorating_point_travels_with_the_text_of_its_decorators(tree):
    """sglang-forward's on_exit: no code to swap, the decorator the engine wrote above the def, at its line."""
    s = payload.settings("sglang-forward", [], None, 1)
    (module,) = payload.request(s, 1, str(tree("sglang-0.5.5")))["modules"]
    assert module["targets"] == []
    ((target, definitions),) = module["decorated"]
    assert target == ["ModelRunner", "forward", None]
    ((line, text),) = definitions[0]
    assert text.startswith('_patchkit_runtime.on_exit("sglang-forward", lambda self, forward_batch')
    assert module["instrumented"].splitlines()[line - 1].strip().startswith("@" + text)
    assert "# patchkit:sglang-forward" in module["instrumented"].splitlines()[line - 1]


RANGE = """\
  - class: Trainer
    method: {m}
    at: on_exit
  - class: Trainer
    method: {m}
    at: method
    action: range
    name: whole
  - class: Trainer
    method: work
    at: method_start
    action: mark
    name: work"""


def test_a_range_and_an_on_exit_on_one_method_keep_the_applied_order_and_the_other_points_are_swapped(tmp_path):
    site = helpers.site(tmp_path)
    path = tmp_path / "both.yaml"
    path.write_text(helpers.RECIPE.format(rid="both", scope="step_logged", save=tmp_path / "t",
                                          points=RANGE.format(m="step_logged")))
    (module,) = payload.request(payload.settings(str(path), [], None, 1), 1, str(site))["modules"]
    assert module["targets"] == [["Trainer", "work", None]]
    ((target, (definition,)),) = module["decorated"]
    lines = module["instrumented"].splitlines()
    assert [lines[line - 1].strip().split("  #")[0] for line, _ in definition] == ["@" + t for _, t in definition]
    assert lines[definition[0][0] - 2].strip() == '@memory_logger(role="actor")'  # below the job's own decorator
    assert [t.split("(")[0] for _, t in definition] == ["_patchkit_runtime.on_exit", "_patchkit_runtime.ranged"]


@pytest.mark.parametrize("shape,says", [
    ("@property\n    def step_logged(self):", "a property's function"),
    ("@functools.cached_property\n    def step_logged(self):", "a property's function"),
])
def test_a_property_s_function_is_refused_before_anything_is_injected(tmp_path, shape, says):
    site = helpers.site(tmp_path)
    train = site / "pkjob" / "train.py"
    train.write_text(train.read_text().replace('@memory_logger(role="actor")\n    def step_logged(self, i):', shape))
    path = tmp_path / "prop.yaml"
    path.write_text(helpers.RECIPE.format(rid="prop", scope="step_logged", save=tmp_path / "t",
                                          points="  - class: Trainer\n    method: step_logged\n    at: on_exit"))
    with pytest.raises(AttachError, match=says) as err:
        payload.request(payload.settings(str(path), [], None, 1), 1, str(site))
    assert "patchkit run" in err.value.hint


def test_an_on_exit_on_a_nested_function_is_refused_before_anything_is_injected(tmp_path):
    site = helpers.site(tmp_path)
    path = tmp_path / "nested.yaml"
    path.write_text(helpers.RECIPE.format(rid="nested", scope="step", save=tmp_path / "t",
                                          points="  - function: closure_loop\n    nested: step\n    at: on_exit"))
    with pytest.raises(AttachError, match="closure_loop.step, a nested function"):
        payload.request(payload.settings(str(path), [], None, 1), 1, str(site))


def test_an_applied_file_is_refused(tmp_path):
    site = helpers.site(tmp_path)
    import patchkit

    patchkit.apply_recipe(str(helpers.recipe(tmp_path, "logged")), ["backend=torch"], root=str(site))
    s = payload.settings(str(helpers.recipe(tmp_path, "logged")), [], None, 1)
    with pytest.raises(AttachError, match="has the lines of pkjob-logged \\(or another recipe.s\\) already") as err:
        payload.request(s, 1, str(site))
    assert "patchkit capture pkjob-logged" in err.value.hint


def proc(uid, pid=4242):
    return Process(pid, (uid,) * 4, (uid,) * 4, (), 1, "/usr/bin/python3", False, ("python3",), 7, 0, 0, "python3")


def test_the_folder_is_private_to_this_user(tmp_path):
    f = payload.folder(proc(os.geteuid()), {"recipe": "r"}, "/some/where")
    try:
        assert stat.S_IMODE(os.stat(f.base).st_mode) == 0o700 and stat.S_IMODE(os.stat(f.out).st_mode) == 0o700
        st = os.stat(f.request)
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
        data = Path(f.request).read_bytes()
        assert hashlib.sha256(data).hexdigest() == f.digest
        sent = json.loads(data)
        assert sent["channel"] == f.out and sent["runtime_from"] == "/some/where" and sent["id"] == f.id
        assert sent["pid"] == 4242 and "patchkit-attach-4242-" in f.base
        payload.withdraw(f)
        assert os.listdir(f.base) == ["out"]
    finally:
        payload.remove(f)
    assert not os.path.exists(f.base)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root attaches to another user's job")
def test_root_hands_the_request_and_the_channel_to_the_job_s_user_and_nobody_else():
    f = payload.folder(proc(65534), {"recipe": "r"}, "")
    try:
        assert stat.S_IMODE(os.stat(f.base).st_mode) == 0o711 and os.stat(f.base).st_uid == 0  # pass, not list
        assert os.stat(f.request).st_uid == 65534 and stat.S_IMODE(os.stat(f.request).st_mode) == 0o600
        assert os.stat(f.out).st_uid == 65534 and stat.S_IMODE(os.stat(f.out).st_mode) == 0o700
    finally:
        payload.remove(f)


def test_the_folder_goes_even_while_the_agent_writes_its_last_status_into_it():
    import threading

    f = payload.folder(proc(os.geteuid()), {"recipe": "r"}, "")
    stop = threading.Event()

    def agent_writes():  # as agent.Channel.write does: a temporary file, then a rename
        while not stop.is_set():
            try:
                fd, tmp = tempfile.mkstemp(prefix=".status-", dir=f.out)
                os.close(fd)
                os.replace(tmp, os.path.join(f.out, "status.json"))
            except OSError:
                return  # the folder has gone: nobody to tell

    writer = threading.Thread(target=agent_writes)
    writer.start()
    try:
        payload.remove(f)
    finally:
        stop.set()
        writer.join()
    assert not os.path.lexists(f.base)




def test_a_script_s_module_is_the_job_s_main_planned_in_the_folder_that_holds_it(tmp_path):
    """Attach plans with the job's script folder as the root: the script there, asked for as __main__."""
    recipes, job = tmp_path / "recipes", tmp_path / "job"
    recipes.mkdir()
    job.mkdir()
    (recipes / "ts.yaml").write_text(script_recipe())
    script = job / "train.py"
    script.write_text("class Tiny:\n    def training_step(self, i):\n        return i\n")
    s = payload.settings(str(recipes / "ts.yaml"), [], None, 2)
    (module,) = payload.request(s, 2, str(job))["modules"]
    assert (module["name"], module["file"], module["relpath"]) == ("__main__", str(script), "train.py")
    assert module["sha256"] == hashlib.sha256(script.read_bytes()).hexdigest()
    assert module["targets"] == [["Tiny", "training_step", None]]
    assert '_patchkit_runtime.step("ts")' in module["instrumented"]


def test_the_window_replaces_a_periodic_schedule_of_the_recipe_s_own(tmp_path):
    """A recipe with wait/warmup/active of its own (sglang-forward's): the window is exactly --steps steps, with
    no periodic key left beside it (the runtime refuses steps together with wait, warmup, active)."""
    from patchkit.core.vocabulary import DEFAULTS
    from patchkit.runtime.settings import _combinations

    recipe = helpers.recipe(tmp_path, "logged")
    recipe.write_text(recipe.read_text() + "schedule: {wait: 1, warmup: 1, active: 2, repeat: 1}\n")
    s = payload.settings(str(recipe), [], None, 3)
    assert s.recipe.schedule.steps == (0, 1, 2) and s.recipe.schedule.trigger == "schedule"
    assert all(getattr(s.recipe.schedule, k) == DEFAULTS[k] for k in ("wait", "warmup", "active", "repeat"))
    assert _combinations(s.runtime_settings()) == []
